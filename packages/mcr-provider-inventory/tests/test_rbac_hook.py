"""The provider's ``mcr_provider_rbac`` hook, found through its installed entry point."""

from __future__ import annotations

from mcr.plugins import plugin_manager
from mcr.rbac.manifests import Provider, provider_rules
from mcr.rbac.rules import Rule

READ = ("get", "list", "watch")


def test_reads_cluster_profiles() -> None:
    rules = provider_rules(plugin_manager().hook, Provider("inventory", "inventory", (("namespace", "inv"),)))
    assert rules == [Rule(("multicluster.x-k8s.io",), ("clusterprofiles",), READ, "inv", "hub")]


def test_with_a_consumer_name_also_reads_its_kubeconfig_secrets() -> None:
    provider = Provider("inventory", "inventory", (("consumer_name", "me"),))
    rules = provider_rules(plugin_manager().hook, provider)
    assert rules == [
        Rule(("multicluster.x-k8s.io",), ("clusterprofiles",), READ, None, "hub"),
        Rule(("",), ("secrets",), READ, None, "hub"),
    ]
