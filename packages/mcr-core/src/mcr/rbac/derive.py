"""What a program's controllers need, read from a manager its ``setup(mgr)`` filled but never started.

Every :class:`~mcr.source.Kind` a controller watches needs ``get``/``list``/``watch`` on that
kind; a kind watched through its owner (``owns``) also needs ``create``/``update``/``patch``/
``delete``. A watch that engages the local cluster counts for the hub, one that engages provider
clusters for the fleet. Rules declared with :func:`mcr.rbac.declare` (on the manager or a
runnable) or a runnable's ``rbac_rules`` attribute are added; those ``on="auto"`` go where their
controller's watches engage (both sides when declared for anything else).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from mcr.controller import Controller
from mcr.handler import EnqueueRequestForOwner
from mcr.manager import Manager
from mcr.providers import NopProvider
from mcr.rbac.rules import READ, WRITE, Rule, declared, resource_of
from mcr.rest.config import RestConfig
from mcr.rest.kinds import gvk_of

__all__ = ["Derived", "PlanningManager", "derive"]

_NOWHERE = "https://kubernetes.default.svc"


class PlanningManager(Manager):
    """A manager that records what is added to it; built to be inspected, never started.

    ``with_provider``: whether it looks like a manager with a provider (controllers built with
    the builder then engage provider clusters by default, as under ``mcr run --provider``). The
    provider is a stand-in without clusters, and the local cluster is never contacted: a
    ``setup`` that needs a particular provider type or reads a cluster cannot be read this way.
    """

    def __init__(self, *, with_provider: bool) -> None:
        super().__init__(
            RestConfig(host=_NOWHERE, source="<mcr manifests>"),
            provider=NopProvider() if with_provider else None,
            metrics_bind_address="0",
            health_probe_bind_address=None,
        )
        self.added: list[Any] = []

    def add(self, runnable: Any) -> None:
        self.added.append(runnable)
        super().add(runnable)


@dataclass
class Derived:
    """The rules a program needs: each with the controllers (or ``"declared"``) it comes from."""

    rules: list[Rule] = field(default_factory=list)
    controllers: list[str] = field(default_factory=list)

    def on(self, side: str) -> list[Rule]:
        """The rules granted on ``side`` (``"hub"`` or ``"fleet"``)."""
        return [r for r in self.rules if r.applies_to(side)]


def _side(local: bool, provider: bool) -> str | None:
    if local and provider:
        return "both"
    if local:
        return "hub"
    return "fleet" if provider else None


def rules_of(mgr: PlanningManager) -> Derived:
    """The rules of everything added to ``mgr`` (see the module docs)."""
    out = Derived(rules=[r.placed("both") for r in declared(mgr)])
    for runnable in mgr.added:
        if not isinstance(runnable, Controller):
            out.rules.extend(r.placed("both") for r in declared(runnable))
            continue
        out.controllers.append(runnable.name)
        sides: set[str] = set()
        for src in runnable.sources:
            side = _side(src.engage_local, src.engage_provider)
            if side is None:
                continue
            sides.update(("hub", "fleet") if side == "both" else (side,))
            try:
                gvk = gvk_of(src.kind)
            except ValueError as exc:
                raise ValueError(f"controller {runnable.name!r}: {exc}") from None
            verbs = READ + WRITE if isinstance(src.handler, EnqueueRequestForOwner) else READ
            out.rules.append(Rule((gvk.group,), (resource_of(gvk.kind),), verbs, None, side))
        where = sides.pop() if len(sides) == 1 else "both"
        out.rules.extend(r.placed(where) for r in declared(runnable))
    return out


async def derive(setup: Callable[[Any], Any], *, with_provider: bool) -> Derived:
    """Call ``setup(mgr)`` (plain or ``async``) on a :class:`PlanningManager`; its rules.

    Exceptions from ``setup`` propagate. The manager is never started, so no I/O happens.
    """
    mgr = PlanningManager(with_provider=with_provider)
    result = setup(mgr)
    if inspect.isawaitable(result):
        await result
    return rules_of(mgr)
