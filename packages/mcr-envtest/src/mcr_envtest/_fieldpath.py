"""Field sets for managedFields: paths into an object, their FieldsV1 encoding, and edits.

A path is a tuple of upstream's FieldsV1 path elements: ``"f:<field>"`` (a map key),
``"k:<json>"`` (a list item identified by its key fields, e.g. ``k:{"name":"web"}``) and
``"v:<json>"`` (a value of a set-like list). A path ending in ``k:`` names the item itself.
How lists are identified comes from the schema: ``x-kubernetes-list-type`` and
``x-kubernetes-list-map-keys``, else the strategic-merge key (as upstream does for built-ins);
lists with neither are atomic and owned as one field.
"""

from __future__ import annotations

import copy
import functools
import json
from typing import Any

from .schema import builtin

Path = tuple[str, ...]
FieldSet = set[Path]

MISSING: Any = object()

# Paths the server owns: never part of any manager's set.
IGNORED: tuple[Path, ...] = (
    ("f:apiVersion",),
    ("f:kind",),
    *(
        ("f:metadata", f"f:{k}")
        for k in (
            "name",
            "namespace",
            "uid",
            "resourceVersion",
            "generation",
            "creationTimestamp",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "managedFields",
            "selfLink",
        )
    ),
)


def _dumps(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def sub_schema(schema: dict[str, Any] | None, key: str) -> dict[str, Any] | None:
    """The schema of ``key`` inside an object schema (properties, else additionalProperties)."""
    if schema is None:
        return None
    schema = builtin.resolve(schema)
    props = schema.get("properties")
    if isinstance(props, dict) and isinstance(props.get(key), dict):
        return props[key]  # type: ignore[no-any-return]  # schemas are decoded JSON
    addl = schema.get("additionalProperties")
    return addl if isinstance(addl, dict) else None


def item_schema(schema: dict[str, Any] | None) -> dict[str, Any] | None:
    """The schema of a list's items."""
    if schema is None:
        return None
    items = builtin.resolve(schema).get("items")
    return items if isinstance(items, dict) else None


def list_kind(schema: dict[str, Any] | None) -> tuple[str, list[str]]:
    """("map", keys) | ("set", []) | ("atomic", []) for a list field's schema."""
    if schema is None:
        return "atomic", []
    list_type = schema.get("x-kubernetes-list-type")
    keys = schema.get("x-kubernetes-list-map-keys")
    merge_key = schema.get("x-kubernetes-patch-merge-key")
    strategy = str(schema.get("x-kubernetes-patch-strategy", ""))
    if list_type == "map" and isinstance(keys, list) and keys:
        return "map", [str(k) for k in keys]
    if list_type == "atomic":  # a list type given wins over the strategic-merge key
        return "atomic", []
    if isinstance(merge_key, str):
        return "map", [merge_key]
    if list_type == "set" or (list_type is None and "merge" in strategy.split(",")):
        return "set", []
    return "atomic", []


def set_element(value: Any) -> str:
    """The ``v:`` element naming ``value`` in a set-like list."""
    return "v:" + _dumps(value)


def item_key(item: Any, keys: list[str], defaults: dict[str, Any] | None = None) -> str | None:
    """The ``k:`` element naming ``item`` in a keyed list, or None when it has no key field.

    A key field the item omits takes its value from ``defaults`` (the schema's defaults of key
    fields, as upstream keys such items); without one it is left out of the element."""
    if not isinstance(item, dict):
        return None
    present = {
        k: item[k] if k in item else (defaults or {})[k] for k in keys if k in item or k in (defaults or {})
    }
    return "k:" + _dumps(present) if present and any(k in item for k in keys) else None


_IGNORED_TOP = frozenset(p[0][2:] for p in IGNORED if len(p) == 1)
_IGNORED_META = frozenset(p[1][2:] for p in IGNORED if len(p) == 2)


def field_set(obj: Any, schema: dict[str, Any] | None) -> FieldSet:
    """Every path ``obj`` sets (leaves, keyed list items and set values), minus :data:`IGNORED`."""
    out: FieldSet = set()
    if not isinstance(obj, dict):
        return out
    for key, value in obj.items():
        if key in _IGNORED_TOP:
            continue
        sub = sub_schema(schema, key)
        if key == "metadata" and isinstance(value, dict):
            for mkey, mvalue in value.items():
                if mkey not in _IGNORED_META:
                    _collect(mvalue, sub_schema(sub, mkey), ("f:metadata", f"f:{mkey}"), out)
        else:
            _collect(value, sub, (f"f:{key}",), out)
    return out


def _order(elem: str) -> tuple[int, str]:
    # upstream's order of path elements: the node itself, fields, keys, values, indexes
    return ({".": 0, "f": 1, "k": 2, "v": 3, "i": 4}.get(elem.partition(":")[0], 5), elem)


def _sorted(node: dict[str, Any]) -> dict[str, Any]:
    return {k: _sorted(node[k]) for k in sorted(node, key=_order)}


def is_ignored(path: Path) -> bool:
    """True for paths under a server-owned field."""
    return any(path[: len(i)] == i for i in IGNORED)


def _collect(value: Any, schema: dict[str, Any] | None, prefix: Path, out: FieldSet) -> None:
    resolved = builtin.resolve(schema) if schema is not None else None
    if isinstance(value, dict):
        if (not value or (resolved or {}).get("x-kubernetes-map-type") == "atomic") and prefix:
            out.add(prefix)
            return
        for k, v in value.items():
            _collect(v, sub_schema(schema, k), (*prefix, f"f:{k}"), out)
        return
    if isinstance(value, list) and prefix:
        kind, keys = list_kind(resolved)
        if kind == "set" and all(not isinstance(v, dict | list) for v in value) and value:
            out.update((*prefix, set_element(v)) for v in value)
            return
        if kind == "map" and value:
            defaults = (resolved or {}).get("x-mcr-key-defaults")
            elems = [item_key(v, keys, defaults) for v in value]
            if all(e is not None for e in elems) and len(set(elems)) == len(elems):
                for elem, item in zip(elems, value, strict=True):
                    assert elem is not None
                    path = (*prefix, elem)
                    out.add(path)
                    _collect(item, item_schema(resolved), path, out)
                return
        out.add(prefix)
        return
    if prefix:
        out.add(prefix)


def encode(paths: FieldSet) -> dict[str, Any]:
    """FieldsV1 JSON for a set of paths (``"."`` marks a node owned itself and through children)."""
    root: dict[str, Any] = {}
    for path in paths:
        node = root
        for elem in path:
            node = node.setdefault(elem, {})
    for path in paths:
        node = root
        for elem in path:
            node = node[elem]
        if node:
            node["."] = {}
    return _sorted(root)


def decode(fields: Any) -> FieldSet:
    """The set of paths in FieldsV1 JSON; malformed input yields the paths that can be read."""
    out: FieldSet = set()

    def walk(node: Any, prefix: Path) -> None:
        if not isinstance(node, dict):
            return
        if not node and prefix:
            out.add(prefix)
            return
        for k, v in node.items():
            if k == ".":
                if prefix:
                    out.add(prefix)
            else:
                walk(v, (*prefix, k))

    walk(fields, ())
    return out


@functools.lru_cache(maxsize=8192)
def _decoded(elem_value: str) -> Any:
    return json.loads(elem_value)


def _matches(item: Any, want: dict[str, Any]) -> bool:
    return isinstance(item, dict) and all(item.get(k) == v for k, v in want.items())


def get(obj: Any, path: Path) -> Any:
    """The value at ``path`` in ``obj``, or :data:`MISSING`."""
    cur = obj
    for elem in path:
        kind, _, rest = elem.partition(":")
        if kind == "f":
            if not isinstance(cur, dict) or rest not in cur:
                return MISSING
            cur = cur[rest]
        elif kind == "k":
            if not isinstance(cur, list):
                return MISSING
            want = _decoded(rest)
            cur = next((i for i in cur if _matches(i, want)), MISSING)
            if cur is MISSING:
                return MISSING
        elif kind == "v":
            if not isinstance(cur, list):
                return MISSING
            value = _decoded(rest)
            return value if value in cur else MISSING
        else:
            return MISSING
    return cur


def remove(obj: Any, path: Path) -> None:
    """Remove the field, keyed item or set value at ``path`` from ``obj`` (in place; no-op if absent)."""
    parent = get(obj, path[:-1]) if len(path) > 1 else obj
    if parent is MISSING:
        return
    kind, _, rest = path[-1].partition(":")
    if kind == "f" and isinstance(parent, dict):
        parent.pop(rest, None)
    elif kind == "k" and isinstance(parent, list):
        want = json.loads(rest)
        parent[:] = [
            i for i in parent if not (isinstance(i, dict) and all(i.get(k) == v for k, v in want.items()))
        ]
    elif kind == "v" and isinstance(parent, list):
        value = json.loads(rest)
        parent[:] = [i for i in parent if i != value]


def merge(current: Any, applied: Any, schema: dict[str, Any] | None) -> Any:
    """Return ``current`` with an apply configuration merged in (maps by key, keyed lists by item,
    sets by union, anything else replaced). Neither argument is modified."""
    if isinstance(applied, dict):
        resolved = builtin.resolve(schema) if schema is not None else None
        if not isinstance(current, dict) or (resolved or {}).get("x-kubernetes-map-type") == "atomic":
            return copy.deepcopy(applied)
        out = copy.copy(current)
        for k, v in applied.items():
            if v is None:
                out.pop(k, None)
            else:
                out[k] = merge(current.get(k), v, sub_schema(schema, k))
        return out
    if isinstance(applied, list) and isinstance(current, list):
        kind, keys = list_kind(builtin.resolve(schema) if schema is not None else None)
        if kind == "set":
            return list(current) + [copy.deepcopy(v) for v in applied if v not in current]
        if kind == "map":
            defaults = builtin.resolve(schema).get("x-mcr-key-defaults") if schema is not None else None
            out_list = list(current)
            for item in applied:
                elem = item_key(item, keys, defaults)
                if elem is None:
                    return copy.deepcopy(applied)
                want = json.loads(elem[2:])
                idx = next(
                    (
                        i
                        for i, c in enumerate(out_list)
                        if isinstance(c, dict) and all(c.get(k) == v for k, v in want.items())
                    ),
                    None,
                )
                if idx is None:
                    out_list.append(copy.deepcopy(item))
                else:
                    out_list[idx] = merge(out_list[idx], item, item_schema(schema))
            return out_list
    return copy.deepcopy(applied)


def describe(path: Path) -> str:
    """Upstream's rendering of a path: ``.spec.containers[name="web"].image``."""
    parts: list[str] = []
    for elem in path:
        kind, _, rest = elem.partition(":")
        if kind == "f":
            parts.append("." + rest)
        elif kind == "k":
            try:
                keys = json.loads(rest)
                parts.append("[" + ",".join(f"{k}={_dumps(v)}" for k, v in keys.items()) + "]")
            except (ValueError, AttributeError):
                parts.append(f"[{rest}]")
        elif kind == "v":
            parts.append(f"[={rest}]")
        else:
            parts.append(f"[{elem}]")
    return "".join(parts)
