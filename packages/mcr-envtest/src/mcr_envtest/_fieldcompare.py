"""Which fields a write added, changed and removed, as kube-apiserver's field manager counts them.

An ``Update`` manager owns what its writes added or changed, so its field set depends on how
two objects are compared:

* both objects are first seen as Go holds them (:func:`materialise`): a built-in type's
  non-pointer structs are there even when unset (``{}``), fields without ``omitempty`` carry
  their zero value, and ``omitempty`` drops zero values. A custom resource is compared as sent.
* a map, struct or list item that is new counts as added along with everything inside it; its
  path then stands in the set with its children (the ``"."`` entry of FieldsV1). A node that
  was there before, even empty or null, is not added itself: only what changed inside it is.
* atomic maps, structs and lists, scalars, and nodes empty (or null) on both sides are leaves:
  added, removed, or modified when their values differ.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from . import _fieldpath as fp
from .schema import builtin

__all__ = ["Comparison", "compare", "materialise"]

Schema = dict[str, Any]


def _resolved(schema: Schema | None) -> Schema | None:
    if schema is None or ("$ref" not in schema and "allOf" not in schema):
        return schema
    return builtin.resolve(schema)


def _empty(value: Any) -> bool:
    # Go's omitempty: false, 0, "", nil and empty slices and maps
    return (
        value is None
        or value is False
        or value == ""
        or value == []
        or value == {}
        or (type(value) in (int, float) and value == 0)
    )


def _zero(schema: Schema) -> Any:
    zero = schema["x-mcr-zero"]
    return materialise({}, schema) if zero == {} else zero


def materialise(value: Any, schema: Schema | None) -> Any:
    """``value`` as the Go type of ``schema`` holds it (a copy where anything differs).

    Only schemas from :mod:`mcr_envtest.schema.fieldtypes` carry what this needs; under any
    other schema (a custom resource's) ``value`` comes back unchanged."""
    s = _resolved(schema)
    if s is None:
        return value
    if isinstance(value, dict):
        props = s.get("properties")
        addl = s.get("additionalProperties")
        out: dict[str, Any] = {}
        for key, item in value.items():
            sub = props.get(key) if isinstance(props, dict) else None
            if sub is None and isinstance(addl, dict):
                sub = addl
            if sub is not None:
                if sub.get("x-mcr-omitempty") and _empty(item):
                    continue
                if item is None and "x-mcr-zero" in sub:
                    out[key] = _zero(sub)
                    continue
            out[key] = materialise(item, sub) if isinstance(item, dict | list) else item
        if isinstance(props, dict):
            for key, sub in props.items():
                if key not in value and "x-mcr-zero" in sub:
                    out[key] = _zero(sub)
        return out
    if isinstance(value, list):
        items = s.get("items")
        return [materialise(item, items) for item in value] if isinstance(items, dict) else value
    return value


@dataclass
class Comparison:
    """Paths (see :mod:`mcr_envtest._fieldpath`) added, modified and removed by a write."""

    added: fp.FieldSet = field(default_factory=set)
    modified: fp.FieldSet = field(default_factory=set)
    removed: fp.FieldSet = field(default_factory=set)


def compare(old: Any, new: Any, schema: Schema | None) -> Comparison:
    """Compare two (materialised) objects of the type ``schema`` describes."""
    out = Comparison()
    _node(old, new, schema, (), out)
    return out


_MISSING: Any = fp.MISSING


def _equal(a: Any, b: Any) -> bool:
    # reached (from _node) only when the values or their types differ: 1 and 1.0 are equal, as
    # numbers are upstream, true and 1 are not
    return not isinstance(a, bool) and not isinstance(b, bool) and bool(a == b)


def _leaf(old: Any, new: Any, path: fp.Path, out: Comparison) -> None:
    if old is _MISSING:
        out.added.add(path)
    elif new is _MISSING:
        out.removed.add(path)
    elif not _equal(old, new):
        out.modified.add(path)


def _node(old: Any, new: Any, schema: Schema | None, path: fp.Path, out: Comparison) -> None:
    if old is new or (type(old) is type(new) and old == new):
        return  # nothing inside changed (validation keeps true and 1 apart: fields have one type)
    s = _resolved(schema) or {}
    if isinstance(old, dict) or isinstance(new, dict):
        granular = _map(old, new, s, path, out)
    elif isinstance(old, list) or isinstance(new, list):
        granular = _list(old, new, s, path, out)
    else:
        granular = False
    if not granular:
        if path:
            _leaf(old, new, path, out)
        return
    if path and old is _MISSING:
        out.added.add(path)
    elif path and new is _MISSING:
        out.removed.add(path)


def _map(old: Any, new: Any, s: Schema, path: fp.Path, out: Comparison) -> bool:
    """Compare two maps key by key; False when they are one leaf (atomic, or empty on both sides)."""
    old_map = old if isinstance(old, dict) else None
    new_map = new if isinstance(new, dict) else None
    if s.get("x-kubernetes-map-type") == "atomic" or (not old_map and not new_map):
        return False
    if (old_map is None and old not in (None, _MISSING)) or (new_map is None and new not in (None, _MISSING)):
        return False  # a map on one side, a scalar or list on the other
    old_map, new_map = old_map or {}, new_map or {}
    for key in {**old_map, **new_map}:
        _node(
            old_map.get(key, _MISSING),
            new_map.get(key, _MISSING),
            fp.sub_schema(s, key),
            (*path, f"f:{key}"),
            out,
        )
    return True


def _elements(
    items: list[Any], kind: str, keys: list[str], defaults: dict[str, Any]
) -> dict[str, Any] | None:
    """Each item by its path element, or None when the list cannot be keyed (then it is a leaf)."""
    out: dict[str, Any] = {}
    for item in items:
        if kind == "set":
            if isinstance(item, dict | list):
                return None
            elem = fp.set_element(item)
        else:
            elem_or_none = fp.item_key(item, keys, defaults)
            if elem_or_none is None:
                return None
            elem = elem_or_none
        if elem in out:
            return None
        out[elem] = item
    return out


def _list(old: Any, new: Any, s: Schema, path: fp.Path, out: Comparison) -> bool:
    """Compare two lists item by item; False when they are one leaf (atomic, or empty on both sides)."""
    old_list = old if isinstance(old, list) else None
    new_list = new if isinstance(new, list) else None
    kind, keys = fp.list_kind(s)
    if kind == "atomic" or (not old_list and not new_list):
        return False
    if (old_list is None and old not in (None, _MISSING)) or (
        new_list is None and new not in (None, _MISSING)
    ):
        return False
    defaults = s.get("x-mcr-key-defaults") or {}
    old_items = _elements(old_list or [], kind, keys, defaults)
    new_items = _elements(new_list or [], kind, keys, defaults)
    if old_items is None or new_items is None:
        return False
    items = fp.item_schema(s)
    for elem in {**old_items, **new_items}:
        _node(old_items.get(elem, _MISSING), new_items.get(elem, _MISSING), items, (*path, elem), out)
    return True
