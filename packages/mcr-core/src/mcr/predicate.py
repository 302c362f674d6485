"""Predicates: filter informer events before a handler turns them into requests.

A predicate answers, per event type, whether the event should pass. Objects are the decoded JSON
dicts the cache holds (models with a ``metadata`` attribute work too); they must not be mutated.
Deletes see the last known state (a tombstone is unwrapped by the source first).

The built-ins match controller-runtime: :class:`GenerationChanged`, :class:`ResourceVersionChanged`,
:class:`LabelChanged`, :class:`AnnotationChanged` only filter updates; everything else passes.
:class:`LabelSelectorPredicate` passes the events of objects whose labels a selector matches (its
selector is checked when it is made). Combine with :func:`and_`, :func:`or_`, :func:`not_`; build
one from a function with :func:`predicate_from`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol, runtime_checkable

from mcr.cache.selectors import parse_label_selector

__all__ = [
    "AnnotationChanged",
    "Funcs",
    "GenerationChanged",
    "LabelChanged",
    "LabelSelectorPredicate",
    "Predicate",
    "ResourceVersionChanged",
    "and_",
    "meta",
    "not_",
    "or_",
    "predicate_from",
]


@runtime_checkable
class Predicate(Protocol):
    """Decides per event whether it reaches the handler."""

    def create(self, obj: Any) -> bool: ...

    def update(self, old: Any, new: Any) -> bool: ...

    def delete(self, obj: Any) -> bool: ...

    def generic(self, obj: Any) -> bool: ...


def meta(obj: Any) -> Mapping[str, Any]:
    """An object's ``metadata`` as a mapping (dict objects, or models with a ``metadata``)."""
    if type(obj) is dict or isinstance(obj, Mapping):
        m = obj.get("metadata")
        if type(m) is dict:
            return m
        return m if isinstance(m, Mapping) else {}
    m = getattr(obj, "metadata", None)
    if m is None:
        return {}
    if isinstance(m, Mapping):
        return m
    to_dict = getattr(m, "to_dict", None)
    if callable(to_dict):
        d = to_dict()
        return d if isinstance(d, Mapping) else {}
    return {k: getattr(m, k) for k in ("name", "namespace", "generation", "resource_version", "labels")}


class Funcs:
    """A predicate from optional per-event functions; a missing function lets its events pass."""

    __slots__ = ("_create", "_delete", "_generic", "_update")

    def __init__(
        self,
        create: Callable[[Any], bool] | None = None,
        update: Callable[[Any, Any], bool] | None = None,
        delete: Callable[[Any], bool] | None = None,
        generic: Callable[[Any], bool] | None = None,
    ) -> None:
        self._create = create
        self._update = update
        self._delete = delete
        self._generic = generic

    def create(self, obj: Any) -> bool:
        return self._create is None or bool(self._create(obj))

    def update(self, old: Any, new: Any) -> bool:
        return self._update is None or bool(self._update(old, new))

    def delete(self, obj: Any) -> bool:
        return self._delete is None or bool(self._delete(obj))

    def generic(self, obj: Any) -> bool:
        return self._generic is None or bool(self._generic(obj))


def predicate_from(fn: Callable[[Any], bool]) -> Predicate:
    """A predicate that applies ``fn(obj)`` to every event (``fn(new)`` for updates).

    controller-runtime's ``NewPredicateFuncs``.
    """
    return Funcs(create=fn, update=lambda old, new: fn(new), delete=fn, generic=fn)


class _UpdateOnly:
    """Base for predicates that filter only updates."""

    __slots__ = ()

    def create(self, obj: Any) -> bool:
        return True

    def delete(self, obj: Any) -> bool:
        return True

    def generic(self, obj: Any) -> bool:
        return True

    def update(self, old: Any, new: Any) -> bool:
        raise NotImplementedError


class GenerationChanged(_UpdateOnly):
    """Passes updates whose ``metadata.generation`` changed (spec changes, not status or metadata).

    Objects without a generation (e.g. ConfigMaps) never pass an update, as in controller-runtime.
    """

    __slots__ = ()

    def update(self, old: Any, new: Any) -> bool:
        if old is None or new is None:
            return False
        return meta(old).get("generation") != meta(new).get("generation")


class ResourceVersionChanged(_UpdateOnly):
    """Passes updates whose ``metadata.resourceVersion`` changed (drops resync no-ops)."""

    __slots__ = ()

    def update(self, old: Any, new: Any) -> bool:
        if old is None or new is None:
            return False
        return bool(_rv(old) != _rv(new))


class LabelChanged(_UpdateOnly):
    """Passes updates whose labels changed."""

    __slots__ = ()

    def update(self, old: Any, new: Any) -> bool:
        if old is None or new is None:
            return False
        return (meta(old).get("labels") or {}) != (meta(new).get("labels") or {})


class AnnotationChanged(_UpdateOnly):
    """Passes updates whose annotations changed."""

    __slots__ = ()

    def update(self, old: Any, new: Any) -> bool:
        if old is None or new is None:
            return False
        return (meta(old).get("annotations") or {}) != (meta(new).get("annotations") or {})


class LabelSelectorPredicate:
    """Passes every event of an object whose labels ``selector`` matches (``new`` for updates).

    ``selector`` is a label selector string (``"app=web,tier in (a,b)"``) or a ``matchLabels``
    mapping; one that does not parse raises ``ValueError`` naming it, here rather than at the first
    event. controller-runtime's ``LabelSelectorPredicate``.
    """

    __slots__ = ("selector",)

    def __init__(self, selector: str | Mapping[str, str]) -> None:
        try:
            self.selector = parse_label_selector(selector)
        except ValueError as exc:
            raise ValueError(f"LabelSelectorPredicate: {exc}") from None

    def __repr__(self) -> str:
        return f"LabelSelectorPredicate({self.selector.text!r})"

    def _passes(self, obj: Any) -> bool:
        return obj is not None and self.selector.matches(meta(obj).get("labels"))

    def create(self, obj: Any) -> bool:
        return self._passes(obj)

    def update(self, old: Any, new: Any) -> bool:
        return self._passes(new)

    def delete(self, obj: Any) -> bool:
        return self._passes(obj)

    def generic(self, obj: Any) -> bool:
        return self._passes(obj)


def _rv(obj: Any) -> Any:
    m = meta(obj)
    return m.get("resourceVersion", m.get("resource_version"))


class _And:
    __slots__ = ("preds",)

    def __init__(self, preds: tuple[Predicate, ...]) -> None:
        self.preds = preds

    def create(self, obj: Any) -> bool:
        return all(p.create(obj) for p in self.preds)

    def update(self, old: Any, new: Any) -> bool:
        return all(p.update(old, new) for p in self.preds)

    def delete(self, obj: Any) -> bool:
        return all(p.delete(obj) for p in self.preds)

    def generic(self, obj: Any) -> bool:
        return all(p.generic(obj) for p in self.preds)


class _Or(_And):
    __slots__ = ()

    def create(self, obj: Any) -> bool:
        return any(p.create(obj) for p in self.preds)

    def update(self, old: Any, new: Any) -> bool:
        return any(p.update(old, new) for p in self.preds)

    def delete(self, obj: Any) -> bool:
        return any(p.delete(obj) for p in self.preds)

    def generic(self, obj: Any) -> bool:
        return any(p.generic(obj) for p in self.preds)


class _Not:
    __slots__ = ("pred",)

    def __init__(self, pred: Predicate) -> None:
        self.pred = pred

    def create(self, obj: Any) -> bool:
        return not self.pred.create(obj)

    def update(self, old: Any, new: Any) -> bool:
        return not self.pred.update(old, new)

    def delete(self, obj: Any) -> bool:
        return not self.pred.delete(obj)

    def generic(self, obj: Any) -> bool:
        return not self.pred.generic(obj)


def and_(*predicates: Predicate) -> Predicate:
    """Passes an event only if every predicate passes it (an empty ``and_`` passes everything)."""
    return _And(tuple(predicates))


def or_(*predicates: Predicate) -> Predicate:
    """Passes an event if any predicate passes it (an empty ``or_`` passes nothing)."""
    return _Or(tuple(predicates))


def not_(predicate: Predicate) -> Predicate:
    """Inverts ``predicate`` for every event type."""
    return _Not(predicate)
