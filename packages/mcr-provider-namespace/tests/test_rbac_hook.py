"""The provider's ``mcr_provider_rbac`` hook, found through its installed entry point."""

from __future__ import annotations

from mcr.plugins import plugin_manager
from mcr.rbac.manifests import Provider, place_fleet_in_hub, provider_rules
from mcr.rbac.rules import Rule

READ = ("get", "list", "watch")


def test_reads_namespaces_and_grants_the_fleet_rules_in_the_hub() -> None:
    rules = provider_rules(plugin_manager().hook, Provider("namespace", "namespace"))
    assert rules is not None
    fleet = Rule(("",), ("configmaps",), READ, None, "fleet")
    placed = place_fleet_in_hub([*rules, fleet])
    assert placed == [
        Rule(("",), ("namespaces",), READ, None, "hub"),
        fleet,
        Rule(("",), ("configmaps",), READ, None, "hub"),
    ]
