"""The provider's ``mcr_provider_rbac`` hook, found through its installed entry point."""

from __future__ import annotations

import pytest

from mcr.plugins import plugin_manager
from mcr.rbac.manifests import Provider, provider_rules
from mcr.rbac.rules import Rule


def test_reads_the_secrets_of_its_namespace_only() -> None:
    rules = provider_rules(
        plugin_manager().hook, Provider("kubeconfig", "kubeconfig", (("namespace", "fleet"),))
    )
    assert rules == [Rule(("",), ("secrets",), ("get", "list", "watch"), "fleet", "hub")]


def test_without_a_namespace_it_names_the_missing_option() -> None:
    with pytest.raises(ValueError, match=r"provider 'kubeconfig': needs --provider-opt namespace="):
        provider_rules(plugin_manager().hook, Provider("kubeconfig", "kubeconfig"))


def test_answers_for_its_own_name_only() -> None:
    answers = plugin_manager().hook.mcr_provider_rbac(name="kubeconfig", options={"namespace": ["a"]})
    assert len(answers) == 1
