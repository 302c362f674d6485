"""The resource quantities of built-in objects, decoded as kube-apiserver decodes them.

kube-apiserver reads every ``Quantity`` of a built-in object into Go's type and writes it back
in its form (``1000m`` is ``1``, a JSON number becomes a string); the values of resource lists
(``resources.limits``, a quota's ``hard``, a LimitRange's bounds) are first rounded up to
thousandths. :func:`canonicalise` does the same to an object in place, finding its quantities
from the Go types of ``data/proto_fields.json``, and returns the decoding error kube-apiserver
answers for text that is no quantity (None when all decode). Custom resources are not touched:
their schemas decide.
"""

from __future__ import annotations

import functools
from typing import Any

from .quantity import Quantity
from .schema.protobuf import message_fields, message_of

__all__ = ["canonicalise"]

_QUANTITY = "k8s.io.apimachinery.pkg.api.resource.Quantity"
_MILLI = -3

# A trie of where quantities sit: JSON key -> (how, sub-trie). ``how``: "q" a quantity, "list"
# a resource list (string -> quantity), "m" a message, "r" a list of messages, "map" a map of
# messages (each with the sub-trie).
Trie = dict[str, tuple[str, "Trie"]]


_VISITING: set[str] = set()


@functools.cache
def _trie(message: str) -> Trie:
    """Where ``message`` holds quantities (empty: nowhere); a message met again within itself
    adds none (the recursive schemas of CRDs carry no quantities)."""
    fields = message_fields(message)
    if fields is None or message in _VISITING:
        return {}
    _VISITING.add(message)
    try:
        out: Trie = {}
        for _, key, typ, traits in fields:
            if typ.startswith("map:"):
                value = typ.split(":", 2)[2]
                if value == _QUANTITY:
                    out[key] = ("list", {})
                elif value.startswith("k8s.io.") and (sub := _trie(value)):
                    out[key] = ("map", sub)
            elif typ == _QUANTITY:
                out[key] = ("q", {})
            elif typ.startswith("k8s.io.") and (sub := _trie(typ)):
                if "i" in traits:
                    out.update(sub)  # an embedded struct's fields are the parent's
                else:
                    out[key] = ("r" if "r" in traits else "m", sub)
        return out
    finally:
        _VISITING.discard(message)


def _decoded(value: Any, milli: bool) -> str:
    q = Quantity.parse(value) if isinstance(value, str | int | float) else Quantity.parse(str(value))
    return str(q.round_up(_MILLI) if milli else q)


def _walk(obj: dict[str, Any], trie: Trie) -> None:
    for key, (how, sub) in trie.items():
        value = obj.get(key)
        if value is None:
            continue
        if how == "q":
            obj[key] = _decoded(value, milli=False)
        elif how == "list" and isinstance(value, dict):
            for name, q in value.items():
                if q is not None:
                    value[name] = _decoded(q, milli=True)
        elif how == "m" and isinstance(value, dict):
            _walk(value, sub)
        elif how == "r" and isinstance(value, list):
            for item in value:
                if isinstance(item, dict):
                    _walk(item, sub)
        elif how == "map" and isinstance(value, dict):
            for item in value.values():
                if isinstance(item, dict):
                    _walk(item, sub)


def canonicalise(api_version: str, kind: str, obj: dict[str, Any]) -> str | None:
    """Write every quantity of the built-in ``obj`` (of ``api_version``/``kind``) in
    kube-apiserver's form, in place; the decoding error for one that is no quantity (``obj``
    then partly rewritten), else None."""
    message = message_of(api_version, kind)
    trie = _trie(message) if message is not None else {}
    if not trie:
        return None
    try:
        _walk(obj, trie)
    except (TypeError, ValueError) as exc:
        return str(exc)
    return None
