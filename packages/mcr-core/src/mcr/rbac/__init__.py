"""RBAC rules and deployment manifests generated from a program's controllers.

``mcr manifests``, ``mcr fleet-rbac`` and ``mcr fleet-credentials`` (see docs/deployment.md) build
on this package: :func:`derive` reads what a program's ``setup(mgr)`` watches and owns,
:func:`declare` adds what its controllers write beyond that, providers add what they read through
the ``mcr_provider_rbac`` plugin hook, and :mod:`mcr.rbac.manifests` renders the objects.
"""

from __future__ import annotations

from mcr.rbac.derive import Derived, PlanningManager, derive, rules_of
from mcr.rbac.rules import EVENTS, READ, WRITE, Rule, declare, declared, events, merge, resource_of, rule

__all__ = [
    "EVENTS",
    "READ",
    "WRITE",
    "Derived",
    "PlanningManager",
    "Rule",
    "declare",
    "declared",
    "derive",
    "events",
    "merge",
    "resource_of",
    "rule",
    "rules_of",
]
