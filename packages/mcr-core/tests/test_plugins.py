"""The provider registry filled through pluggy, and mcr.providers.create()."""

from __future__ import annotations

from pathlib import Path
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
    assert "pip" not in message  # never an install command for a name that may be a typo
    for name in BUILTINS:
        assert name in message
    with pytest.raises(UnknownProviderError, match=r"did you mean 'nop'\?"):
        mcr.providers.create("nopp")


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
    loaded = {dist for dist, _ in pm.distributions.values()}
    assert "mcr-core" in loaded  # the built-ins come through mcr-core's own entry point

    monkeypatch.setenv(DISABLE_AUTOLOAD_ENV, "1")
    pm = plugin_manager()
    assert pm.distributions == {}
    assert set(load_registry(pm).names()) == BUILTINS  # built-ins are registered anyway


def install_distribution(root: Path, name: str, module_source: str) -> None:
    """Install a one-module distribution declaring an ``mcr`` entry point into ``root``."""
    module = name.replace("-", "_")
    (root / f"{module}.py").write_text(module_source)
    info = root / f"{module}-1.2.3.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.2.3\n")
    (info / "entry_points.txt").write_text(f"[mcr]\n{name.removeprefix('mcr-provider-')} = {module}\n")


def test_third_party_distribution_is_discovered(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    install_distribution(
        tmp_path,
        "mcr-provider-toy",
        "from mcr.plugins import hookimpl\n"
        "from mcr.providers import NopProvider\n\n"
        "@hookimpl\n"
        "def mcr_register_providers(register):\n"
        "    register('toy', NopProvider, description='a toy fleet')\n",
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delenv(DISABLE_AUTOLOAD_ENV, raising=False)
    info = load_registry(plugin_manager()).info("toy")
    assert (info.plugin, info.distribution, info.version, info.description) == (
        "toy",
        "mcr-provider-toy",
        "1.2.3",
        "a toy fleet",
    )
    monkeypatch.setenv(DISABLE_AUTOLOAD_ENV, "1")
    assert "toy" not in load_registry(plugin_manager())


def test_broken_distribution_does_not_break_the_others(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    install_distribution(tmp_path, "mcr-provider-broken", "import mcr_no_such_module\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delenv(DISABLE_AUTOLOAD_ENV, raising=False)
    reg = load_registry(plugin_manager())
    assert set(reg.names()) >= BUILTINS
    assert isinstance(reg.create("nop"), NopProvider)
    [error] = reg.load_errors
    assert "plugin 'broken' (mcr_provider_broken, from mcr-provider-broken 1.2.3) failed to load" in error
    assert "ModuleNotFoundError" in error
    assert error in caplog.text
    with pytest.raises(UnknownProviderError, match="failed to load"):
        reg.create("broken")


def test_registry_is_cached_until_reloaded() -> None:
    first = registry()
    assert registry() is first
    assert registry(reload=True) is not first
