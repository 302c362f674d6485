"""The provider's ``mcr_provider_rbac`` hook, found through its installed entry point."""

from __future__ import annotations

from mcr.plugins import plugin_manager
from mcr.rbac.manifests import Provider, provider_rules
from mcr.rbac.rules import Rule


def test_reads_namespaces() -> None:
    rules = provider_rules(plugin_manager().hook, Provider("namespace", "namespace"))
    assert rules == [Rule(("",), ("namespaces",), ("get", "list", "watch"), None, "hub")]
