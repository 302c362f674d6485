"""Plugin discovery (entry points of group ``mcr``) and the provider registry the plugins fill.

:func:`plugin_manager` loads the built-ins, entry-point plugins and plugins passed explicitly;
:func:`load_registry` calls their hooks; :func:`registry` is the process-wide registry behind
:func:`mcr.providers.create`. Public through :mod:`mcr.plugins`.
"""

from __future__ import annotations

import importlib.metadata
import logging
import os
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import pluggy

from mcr.providers import builtin
from mcr.providers.hooks import PROJECT, MCRHookSpecs
from mcr.providers.registry import ProviderFactory, ProviderInfo, ProviderRegistry

__all__ = [
    "DISABLE_AUTOLOAD_ENV",
    "ENTRY_POINT_GROUP",
    "PluginLoadError",
    "PluginManager",
    "autoload_enabled",
    "load_registry",
    "plugin_manager",
    "registry",
]

ENTRY_POINT_GROUP = "mcr"
DISABLE_AUTOLOAD_ENV = "MCR_DISABLE_PLUGIN_AUTOLOAD"

log = logging.getLogger("mcr.plugins")


def autoload_enabled() -> bool:
    """Whether entry-point plugins are loaded (``MCR_DISABLE_PLUGIN_AUTOLOAD`` unset or ``0``)."""
    return os.environ.get(DISABLE_AUTOLOAD_ENV, "").strip().lower() in ("", "0", "false", "no")


@dataclass(frozen=True)
class PluginLoadError:
    """An entry point of group ``mcr`` whose module could not be imported."""

    name: str
    value: str
    distribution: str
    version: str
    error: str

    def __str__(self) -> str:
        return (
            f"plugin {self.name!r} ({self.value}, from {self.distribution} {self.version}) "
            f"failed to load: {self.error}"
        )


class PluginManager(pluggy.PluginManager):
    """pluggy's manager for project ``mcr``, remembering where each plugin came from.

    ``distributions`` maps ``id(plugin)`` to (distribution, version) for entry-point plugins;
    ``load_errors`` lists the entry points that failed to import (each also logged): one broken
    distribution must not take the built-ins and every other provider down with it.
    """

    def __init__(self) -> None:
        super().__init__(PROJECT)
        self.add_hookspecs(MCRHookSpecs)
        self.distributions: dict[int, tuple[str, str]] = {}
        self.load_errors: list[PluginLoadError] = []

    def load_entry_points(self, group: str = ENTRY_POINT_GROUP) -> None:
        """Import and register every plugin of the entry-point ``group`` (blocked names skipped)."""
        for ep in importlib.metadata.entry_points(group=group):
            if self.get_plugin(ep.name) is not None or self.is_blocked(ep.name):
                continue
            dist = (ep.dist.name, ep.dist.version) if ep.dist is not None else ("-", "-")
            try:
                plugin = ep.load()
            except Exception as exc:  # noqa: BLE001 -- recorded, logged, reported by `mcr providers`
                failure = PluginLoadError(ep.name, ep.value, *dist, f"{type(exc).__name__}: {exc}")
                log.warning("%s", failure)
                self.load_errors.append(failure)
                continue
            if self.is_registered(plugin):
                continue  # the same module declared twice
            self.register(plugin, name=ep.name)
            self.distributions[id(plugin)] = dist


def plugin_manager(*, autoload: bool | None = None, plugins: Iterable[object] = ()) -> PluginManager:
    """A plugin manager with mcr's hookspecs, the built-ins, entry-point plugins and ``plugins``.

    ``autoload=None`` follows :data:`DISABLE_AUTOLOAD_ENV`. Entry points that fail to import are
    skipped and listed in ``load_errors``.
    """
    pm = PluginManager()
    if autoload_enabled() if autoload is None else autoload:
        pm.load_entry_points()
    if not pm.is_registered(builtin):
        # Not installed with its entry point metadata, or autoload is off: the built-ins still count.
        pm.register(builtin, name="builtin")
    for plugin in plugins:
        pm.register(plugin, name=_label(plugin))
    return pm


def load_registry(pm: pluggy.PluginManager | None = None) -> ProviderRegistry:
    """Call every plugin's ``mcr_register_providers`` and collect the registrations.

    Each registration records the plugin and its distribution (name and version).
    ``ValueError`` if two plugins register the same provider name; an exception raised by a plugin's
    hook propagates with a note naming the plugin and its distribution.
    """
    pm = pm if pm is not None else plugin_manager()
    dists = {id(plugin): (dist.project_name, dist.version) for plugin, dist in pm.list_plugin_distinfo()}
    if isinstance(pm, PluginManager):
        dists.update(pm.distributions)
    reg = ProviderRegistry()
    if isinstance(pm, PluginManager):
        reg.load_errors.extend(str(e) for e in pm.load_errors)
    # Hook implementations are called one by one so each registration knows which plugin made it.
    for impl in pm.hook.mcr_register_providers.get_hookimpls():  # in registration order
        plugin_name = impl.plugin_name
        distribution, version = dists.get(id(impl.plugin)) or _distribution_of(impl.plugin)

        def register(
            name: str,
            factory: ProviderFactory,
            *,
            description: str = "",
            _plugin: str = plugin_name,
            _dist: str = distribution,
            _version: str = version,
        ) -> None:
            if not name or not callable(factory):
                raise ValueError(f"plugin {_plugin!r} registered an invalid provider {name!r}")
            reg.add(
                ProviderInfo(
                    name=name,
                    factory=factory,
                    description=description or _first_line(factory.__doc__),
                    plugin=_plugin,
                    distribution=_dist,
                    version=_version,
                )
            )

        kwargs = {"register": register}
        try:
            impl.function(**{arg: kwargs[arg] for arg in impl.argnames})
        except Exception as exc:
            exc.add_note(f"in mcr_register_providers of plugin {plugin_name!r} ({distribution} {version})")
            raise
    return reg


_registry: ProviderRegistry | None = None


def registry(*, reload: bool = False) -> ProviderRegistry:
    """The process-wide registry, loaded on first use (``reload=True`` loads it again)."""
    global _registry
    if _registry is None or reload:
        _registry = load_registry()
    return _registry


def _label(plugin: object) -> str:
    name = getattr(plugin, "__name__", None)
    if isinstance(name, str):
        return name
    cls = type(plugin)
    return f"{cls.__module__}.{cls.__qualname__}"


def _first_line(doc: str | None) -> str:
    return (doc or "").strip().split("\n", 1)[0].strip()


def _distribution_of(plugin: Any) -> tuple[str, str]:
    """The distribution declaring ``plugin``'s module as an ``mcr`` entry point, else the one that
    installs its top-level package, else ``("-", "-")``."""
    module = getattr(plugin, "__name__", None) or type(plugin).__module__
    for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
        if ep.value.split(":", 1)[0] == module and ep.dist is not None:
            return ep.dist.name, ep.dist.version
    top = module.split(".", 1)[0]
    for dist in importlib.metadata.packages_distributions().get(top, []):
        try:
            return dist, importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            continue
    return "-", "-"
