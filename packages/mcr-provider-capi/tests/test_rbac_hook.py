"""The provider's ``mcr_provider_rbac`` hook, found through its installed entry point."""

from __future__ import annotations

from mcr.plugins import plugin_manager
from mcr.rbac.manifests import Provider, provider_rules
from mcr.rbac.rules import Rule

READ = ("get", "list", "watch")


def test_reads_clusters_and_secrets_everywhere_by_default() -> None:
    rules = provider_rules(plugin_manager().hook, Provider("capi", "capi"))
    assert rules == [
        Rule(("cluster.x-k8s.io",), ("clusters",), READ, None, "hub"),
        Rule(("",), ("secrets",), READ, None, "hub"),
    ]


def test_a_namespace_narrows_both_to_it() -> None:
    rules = provider_rules(plugin_manager().hook, Provider("capi", "capi", (("namespace", "capi-system"),)))
    assert rules is not None
    assert {r.namespace for r in rules} == {"capi-system"}
    assert [r.resources for r in rules] == [("clusters",), ("secrets",)]
