"""RBAC rules: what a controller may do, where (the hub, the fleet clusters), merged into roles.

A :class:`Rule` is a Kubernetes PolicyRule with two additions: ``namespace`` (``None``: granted
cluster-wide by a ClusterRole; a name: granted by a Role in that namespace) and ``on`` (``"hub"``,
the cluster the operator runs against; ``"fleet"``, every cluster a provider engages;
``"both"``; or ``"auto"``: where the controller it is declared for watches, both sides for
anything else). :func:`rule` makes one from a kind; :func:`declare` attaches rules a program's
controllers need beyond what their watches show (writes, status, events).
"""

from __future__ import annotations

import weakref
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from mcr.rest.kinds import gvk_of

__all__ = [
    "EVENTS",
    "READ",
    "WRITE",
    "Rule",
    "declare",
    "declared",
    "events",
    "merge",
    "resource_of",
    "rule",
]

READ = ("get", "list", "watch")
"""The verbs a watched kind needs (the informer lists and watches, the client gets)."""
WRITE = ("create", "update", "patch", "delete")
"""The verbs an owned kind needs (the controller creates, updates and deletes its children)."""

_SIDES = ("hub", "fleet", "both", "auto")

# Kinds whose resource is not the lower-case plural the guess below gives.
_IRREGULAR = {"endpoints": "endpoints", "podmetrics": "pods", "nodemetrics": "nodes"}


def resource_of(kind: str) -> str:
    """The resource (lower-case plural) Kubernetes serves ``kind`` under, as API servers guess it.

    A custom resource whose CRD declares another plural needs an explicit :class:`Rule`.
    """
    low = kind.lower()
    if low in _IRREGULAR:
        return _IRREGULAR[low]
    if low.endswith(("s", "x", "z", "ch", "sh")):
        return low + "es"
    if low.endswith("y") and len(low) > 1 and low[-2] not in "aeiou":
        return low[:-1] + "ies"
    return low + "s"


@dataclass(frozen=True)
class Rule:
    """One grant: ``verbs`` on ``resources`` of ``api_groups`` (``""`` is the core group).

    ``namespace``: ``None`` for every namespace (and cluster-scoped kinds), else only that one.
    ``on``: ``"hub"``, ``"fleet"``, ``"both"`` or ``"auto"``. ``resource_names`` narrows to named objects.
    ``ValueError`` for an empty field or an unknown side.
    """

    api_groups: tuple[str, ...]
    resources: tuple[str, ...]
    verbs: tuple[str, ...]
    namespace: str | None = None
    on: str = "hub"
    resource_names: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.on not in _SIDES:
            raise ValueError(f"rule on {self.on!r}: expected one of {', '.join(_SIDES)}")
        if not self.resources or not self.verbs:
            raise ValueError(f"rule {self.resources!r}/{self.verbs!r}: needs resources and verbs")
        if not self.api_groups:
            raise ValueError(f"rule {self.resources!r}: needs api_groups ([''] for the core group)")

    def applies_to(self, side: str) -> bool:
        """Whether the rule is granted on ``side`` (``"hub"`` or ``"fleet"``)."""
        return self.on in (side, "both", "auto")

    def placed(self, on: str) -> Rule:
        """The rule granted on ``on`` when it says ``"auto"``, else itself."""
        return (
            self
            if self.on != "auto"
            else Rule(self.api_groups, self.resources, self.verbs, self.namespace, on, self.resource_names)
        )

    def policy_rule(self) -> dict[str, Any]:
        """The Kubernetes PolicyRule (without the namespace and side)."""
        out: dict[str, Any] = {
            "apiGroups": list(self.api_groups),
            "resources": list(self.resources),
            "verbs": list(self.verbs),
        }
        if self.resource_names:
            out["resourceNames"] = list(self.resource_names)
        return out

    @classmethod
    def from_policy(cls, d: Mapping[str, Any], *, on: str = "hub", where: str = "rule") -> Rule:
        """A rule from a PolicyRule dict with an optional ``namespace``; ``ValueError`` naming ``where``."""

        def strings(key: str, required: bool = True) -> tuple[str, ...]:
            value = d.get(key, [])
            if isinstance(value, str) or not all(isinstance(v, str) for v in value):
                raise ValueError(f"{where}: {key} must be a list of strings, not {value!r}")
            if required and not value:
                raise ValueError(f"{where}: {key} must not be empty")
            return tuple(value)

        namespace = d.get("namespace")
        if namespace is not None and not isinstance(namespace, str):
            raise ValueError(f"{where}: namespace must be a string, not {namespace!r}")
        return cls(
            strings("apiGroups"),
            strings("resources"),
            strings("verbs"),
            namespace or None,
            on,
            strings("resourceNames", required=False),
        )


def rule(
    kind: Any,
    *verbs: str,
    namespace: str | None = None,
    on: str = "auto",
    subresource: str | None = None,
) -> Rule:
    """A rule granting ``verbs`` on ``kind`` (a model class, ``"group/version/Kind"``, ...).

    ``on`` defaults to ``"auto"``: declared for a controller, the rule goes where its watches
    engage (the hub, the fleet or both), so one program's rules follow ``--provider``.
    ``subresource`` (``"status"``, ``"scale"``) grants on ``<resource>/<subresource>`` instead.
    ``ValueError`` when ``kind`` names no kind or no verb is given.
    """
    if not verbs:
        raise ValueError(f"rule({kind!r}): name at least one verb")
    gvk = gvk_of(kind)
    resource = resource_of(gvk.kind)
    if subresource:
        resource = f"{resource}/{subresource}"
    return Rule((gvk.group,), (resource,), tuple(verbs), namespace, on)


EVENTS = (
    Rule(("",), ("events",), ("create", "patch"), on="both"),
    Rule(("events.k8s.io",), ("events",), ("create", "patch"), on="both"),
)
"""What :class:`~mcr.recorder.EventRecorder` needs (``events.k8s.io``, core ``v1`` as fallback)."""


def events(on: str = "both") -> tuple[Rule, ...]:
    """The rules for writing Events through a cluster's event recorder on ``on``."""
    return tuple(Rule(r.api_groups, r.resources, r.verbs, None, on) for r in EVENTS)


_DECLARED: weakref.WeakKeyDictionary[object, list[Rule]] = weakref.WeakKeyDictionary()


def declare(owner: object, *rules: Rule | Iterable[Rule]) -> None:
    """Record rules ``owner`` (a manager, a controller) needs beyond what its watches show.

    ``mcr manifests`` and ``mcr fleet-rbac`` add them to the generated roles. Repeated calls add
    up. ``TypeError`` for anything that is not a :class:`Rule`.
    """
    flat: list[Rule] = []
    for item in rules:
        for r in (item,) if isinstance(item, Rule) else item:
            if not isinstance(r, Rule):
                raise TypeError(f"declare({owner!r}): {r!r} is not an mcr.rbac.Rule")
            flat.append(r)
    _DECLARED.setdefault(owner, []).extend(flat)


def declared(owner: object) -> list[Rule]:
    """The rules declared for ``owner`` (:func:`declare`) and its ``rbac_rules`` attribute, if any."""
    out = list(_DECLARED.get(owner, ()))
    own = getattr(owner, "rbac_rules", None)
    if own is not None:
        for r in own:
            if not isinstance(r, Rule):
                raise TypeError(f"{owner!r}.rbac_rules: {r!r} is not an mcr.rbac.Rule")
            out.append(r)
    return out


def merge(rules: Iterable[Rule]) -> dict[str | None, list[dict[str, Any]]]:
    """The rules as PolicyRules per namespace (``None``: cluster-wide), merged and sorted.

    Rules on the same group and resource names join their verbs; the output is stable.
    """
    verbs: dict[tuple[str | None, tuple[str, ...], str, str], set[str]] = {}
    for r in rules:
        names = tuple(sorted(r.resource_names))
        for group in r.api_groups:
            for resource in r.resources:
                verbs.setdefault((r.namespace, names, group, resource), set()).update(r.verbs)
    # Join resources of one group (and names) that ended with the same verbs.
    joined: dict[tuple[str | None, tuple[str, ...], str, tuple[str, ...]], list[str]] = {}
    for (namespace, names, group, resource), vs in verbs.items():
        joined.setdefault((namespace, names, group, tuple(_ordered(vs))), []).append(resource)
    out: dict[str | None, list[dict[str, Any]]] = {}
    for (namespace, names, group, ordered), resources in sorted(
        joined.items(), key=lambda kv: _sort_key(kv[0])
    ):
        policy: dict[str, Any] = {
            "apiGroups": [group],
            "resources": sorted(resources),
            "verbs": list(ordered),
        }
        if names:
            policy["resourceNames"] = list(names)
        out.setdefault(namespace, []).append(policy)
    for policies in out.values():
        policies.sort(key=lambda p: (p["apiGroups"], p["resources"], p.get("resourceNames", [])))
    return out


_VERB_ORDER = ("get", "list", "watch", "create", "update", "patch", "delete", "deletecollection")


def _ordered(verbs: Iterable[str]) -> list[str]:
    rank = {v: i for i, v in enumerate(_VERB_ORDER)}
    return sorted(set(verbs), key=lambda v: (rank.get(v, len(rank)), v))


def _sort_key(
    key: tuple[str | None, tuple[str, ...], str, tuple[str, ...]],
) -> tuple[str, str, tuple[str, ...], tuple[str, ...]]:
    namespace, names, group, verbs = key
    return (namespace or "", group, names, verbs)
