"""mcr's pluggy hooks: the markers plugins use and the hooks mcr calls on them.

The lowest layer of plugin support: :mod:`mcr.providers.builtin` and every provider
distribution's plugin module use :data:`hookimpl` (re-exported by :mod:`mcr.plugins`, where
plugin authors import it from).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

import pluggy

from mcr.providers.registry import ProviderFactory

__all__ = ["PROJECT", "MCRHookSpecs", "RegisterProvider", "hookimpl", "hookspec"]

PROJECT = "mcr"

hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)


class RegisterProvider(Protocol):
    """The callback a plugin receives: ``register(name, factory, description=...)``."""

    def __call__(self, name: str, factory: ProviderFactory, *, description: str = "") -> None: ...


class MCRHookSpecs:
    """The hooks mcr calls on plugins. Hooks are synchronous and cheap: they only register."""

    @hookspec
    def mcr_register_providers(self, register: RegisterProvider) -> None:
        """Register provider factories with ``register(name, factory, description="...")``.

        ``factory(**options)`` returns a provider (a :class:`~mcr.multicluster.Provider`, usually
        also a :class:`~mcr.multicluster.ProviderRunnable`); it should not do I/O.
        """

    @hookspec
    def mcr_provider_rbac(
        self, name: str, options: Mapping[str, Sequence[str]]
    ) -> list[dict[str, Any]] | None:
        """The RBAC rules the provider ``name`` needs in the cluster it runs against (the hub).

        ``options`` are the provider's options as given on the command line (``--provider-opt
        KEY=VALUE``: each key with its values, in order). A plugin answers only for the names it
        registers and returns ``None`` for the others. Each rule is a Kubernetes PolicyRule
        (``apiGroups``, ``resources``, ``verbs``, optionally ``resourceNames``) plus an optional
        ``namespace``: a rule with one is granted by a Role in that namespace, one without by
        the ClusterRole. The entry ``{"fleetInHub": True}`` says the provider's clusters are views
        of the hub itself: the controllers' fleet rules are granted in the hub too. A provider
        that needs nothing returns ``[]``. Raises ``ValueError``
        naming the option when the options do not say enough (e.g. a missing namespace).
        """
