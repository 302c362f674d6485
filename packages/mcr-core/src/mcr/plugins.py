"""Plugin hooks (pluggy project ``"mcr"``) and the provider registry they fill.

A distribution ships providers by declaring an entry point in the group ``mcr`` whose module has a
``@hookimpl`` of :func:`MCRHookSpecs.mcr_register_providers`::

    [project.entry-points.mcr]
    file = "mcr_provider_file.plugin"

The built-in providers register through the same hook (entry point ``builtin``). Setting the
environment variable ``MCR_DISABLE_PLUGIN_AUTOLOAD=1`` turns entry-point loading off; the built-ins
are registered anyway, and further plugins can be passed to :func:`plugin_manager` explicitly.
An entry point whose module fails to import is logged and reported (``mcr providers`` exits 1,
unknown-provider errors mention it); the other providers stay usable.
"""

from __future__ import annotations

from mcr.providers.discovery import (
    DISABLE_AUTOLOAD_ENV,
    ENTRY_POINT_GROUP,
    PluginLoadError,
    PluginManager,
    autoload_enabled,
    load_registry,
    plugin_manager,
    registry,
)
from mcr.providers.hooks import PROJECT, MCRHookSpecs, RegisterProvider, hookimpl, hookspec

__all__ = [
    "DISABLE_AUTOLOAD_ENV",
    "ENTRY_POINT_GROUP",
    "PROJECT",
    "MCRHookSpecs",
    "PluginLoadError",
    "PluginManager",
    "RegisterProvider",
    "autoload_enabled",
    "hookimpl",
    "hookspec",
    "load_registry",
    "plugin_manager",
    "registry",
]
