"""The provider registry filled through pluggy, and mcr.providers.create()."""

from __future__ import annotations

from typing import Any

import pytest

import mcr.providers
from mcr.plugins import (
    DISABLE_AUTOLOAD_ENV,
    RegisterProvider,
    hookimpl,
    load_registry,
    plugin_manager,
    registry,
)
from mcr.providers import (
    ClustersProvider,
    MultiProvider,
    NopProvider,
    SingleProvider,
    UnknownProviderError,
)

BUILTINS = {"clusters", "multi", "nop", "single"}


class EchoProvider(NopProvider):
    """A provider that remembers its options."""

    def __init__(self, **options: Any) -> None:
        self.options = options


class EchoPlugin:
    @hookimpl
    def mcr_register_providers(self, register: RegisterProvider) -> None:
        register("echo", EchoProvider)


def test_builtins_register_through_the_hook() -> None:
    reg = load_registry(plugin_manager(autoload=False))
    assert set(reg.names()) == BUILTINS
    for info in reg:
        assert info.plugin == "builtin"
        assert info.distribution == "mcr-core"
        assert info.version == "0.1.0"
        assert info.description


def test_create_builds_builtins_with_options() -> None:
    assert isinstance(mcr.providers.create("clusters"), ClustersProvider)
    assert isinstance(mcr.providers.create("nop"), NopProvider)
    multi = mcr.providers.create("multi", separator="/")
    assert isinstance(multi, MultiProvider)
    assert multi.separator == "/"
    single = mcr.providers.create("single", name="one", cluster=None)
    assert isinstance(single, SingleProvider)
    assert single.name == "one"
    assert {i.name for i in mcr.providers.available()} >= BUILTINS


def test_unknown_provider_lists_available_ones() -> None:
    with pytest.raises(UnknownProviderError) as info:
        mcr.providers.create("kindd")
    assert isinstance(info.value, LookupError)
    message = str(info.value)
    assert "'kindd'" in message
    for name in BUILTINS:
        assert name in message


def test_plugin_registrations_record_their_plugin_and_description() -> None:
    reg = load_registry(plugin_manager(autoload=False, plugins=[EchoPlugin()]))
    info = reg.info("echo")
    assert info.description == "A provider that remembers its options."  # from the docstring
    provider = reg.create("echo", answer=42)
    assert provider.options == {"answer": 42}
    assert info.distribution == "-"  # defined in a test module no distribution installs


def test_duplicate_names_are_refused_naming_both_plugins() -> None:
    class Clash:
        @hookimpl
        def mcr_register_providers(self, register: RegisterProvider) -> None:
            register("nop", NopProvider)

    with pytest.raises(ValueError, match="'nop' is registered twice: by builtin"):
        load_registry(plugin_manager(autoload=False, plugins=[Clash()]))


def test_entry_points_are_loaded_unless_disabled(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(DISABLE_AUTOLOAD_ENV, raising=False)
    pm = plugin_manager()
    loaded = {dist.project_name for _, dist in pm.list_plugin_distinfo()}
    assert "mcr-core" in loaded  # the built-ins come through mcr-core's own entry point

    monkeypatch.setenv(DISABLE_AUTOLOAD_ENV, "1")
    pm = plugin_manager()
    assert pm.list_plugin_distinfo() == []
    assert set(load_registry(pm).names()) == BUILTINS  # built-ins are registered anyway


def test_registry_is_cached_until_reloaded() -> None:
    first = registry()
    assert registry() is first
    assert registry(reload=True) is not first
