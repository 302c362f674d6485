"""The provider's ``mcr_provider_rbac`` hook, found through its installed entry point."""

from __future__ import annotations

from mcr.plugins import plugin_manager


def test_needs_nothing_from_the_hub() -> None:
    answers = plugin_manager().hook.mcr_provider_rbac(name="file", options={})
    assert answers == [[]]
