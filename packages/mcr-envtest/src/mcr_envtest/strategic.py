"""Strategic merge patch (``application/strategic-merge-patch+json``) for built-in kinds.

Like a JSON merge patch, except that lists the schema marks with ``x-kubernetes-patch-strategy:
merge`` are merged: lists of objects by their ``x-kubernetes-patch-merge-key`` (containers by
``name``, ports by ``containerPort``, conditions by ``type``, ...), lists of scalars as sets
(finalizers). Directives: ``$patch: replace|delete|merge`` (in maps and as list elements),
``$retainKeys``, ``$deleteFromPrimitiveList/<field>`` and ``$setElementOrder/<field>``.

Patch metadata comes from the same schemas as the OpenAPI documents (:mod:`.schema.builtin`); a kind
without a schema (custom resources) merges like a JSON merge patch with lists replaced.
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any

from . import errors
from ._fieldpath import item_schema as _items
from ._fieldpath import sub_schema
from .schema import builtin

if TYPE_CHECKING:
    from .resources import ResourceInfo

__all__ = ["strategic_merge"]

_DELETE = object()
_PATCH = "$patch"
_RETAIN = "$retainKeys"
_DEL_PRIM = "$deleteFromPrimitiveList/"
_ORDER = "$setElementOrder/"


def strategic_merge(info: ResourceInfo, original: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    """Return a new object: ``original`` with the strategic merge ``patch`` applied.

    ``original`` is not modified. Raises ValueError for a malformed patch (not an object, an
    unknown ``$``-key, a merge-list item without its merge key, wrong directive value types), and
    StatusError 500 for an unknown ``$patch`` value in a map, as kube-apiserver answers it.
    """
    if not isinstance(patch, dict):
        raise ValueError("a strategic merge patch must be a JSON object")
    schema: dict[str, Any] | None = None
    if info.crd is None and info.model is not None and builtin.model_class(info.model) is not None:
        schema = builtin.model_schema(info.model)
    result = _merge_map(original if isinstance(original, dict) else {}, patch, schema, "")
    if result is _DELETE:
        raise ValueError('"$patch": "delete" may not delete the whole object')
    assert isinstance(result, dict)
    return result


def _list_meta(schema: dict[str, Any] | None) -> tuple[bool, str | None]:
    """(merge, merge key) for a list field's schema."""
    if schema is None:
        return False, None
    strategy = str(schema.get("x-kubernetes-patch-strategy", ""))
    key = schema.get("x-kubernetes-patch-merge-key")
    return "merge" in strategy.split(","), key if isinstance(key, str) else None


def _go_value(value: Any) -> str:
    """``value`` as Go's ``%v`` prints a decoded JSON value (maps with sorted keys)."""
    if isinstance(value, dict):
        return "map[" + " ".join(f"{k}:{_go_value(value[k])}" for k in sorted(value)) + "]"
    if isinstance(value, list):
        return "[" + " ".join(_go_value(v) for v in value) + "]"
    if value is None:
        return "<nil>"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _where(path: str) -> str:
    return path or "<root>"


def _merge_map(original: Any, patch: dict[str, Any], schema: dict[str, Any] | None, path: str) -> Any:
    directive = patch.get(_PATCH)
    if directive is not None:
        if directive == "replace":
            return _clean({k: v for k, v in patch.items() if k != _PATCH}, schema, path)
        if directive == "delete":
            return _DELETE
        if directive != "merge":  # upstream fails this as an internal error (500)
            raise errors.StatusError(
                500, "", f"unknown patch type: {_go_value(directive)} in map: {_go_value(patch)}"
            )
    result: dict[str, Any] = copy.deepcopy(original) if isinstance(original, dict) else {}
    retain = patch.get(_RETAIN)
    if retain is not None and not (isinstance(retain, list) and all(isinstance(k, str) for k in retain)):
        raise ValueError(f"{_where(path)}: {_RETAIN} must be a list of strings")
    orders: dict[str, list[Any]] = {}
    deletions: dict[str, list[Any]] = {}
    for key, value in patch.items():
        if key in (_PATCH, _RETAIN):
            continue
        if key.startswith(_ORDER):
            if not isinstance(value, list):
                raise ValueError(f"{_where(path)}: {key} must be a list")
            orders[key[len(_ORDER) :]] = value
            continue
        if key.startswith(_DEL_PRIM):
            if not isinstance(value, list):
                raise ValueError(f"{_where(path)}: {key} must be a list")
            deletions[key[len(_DEL_PRIM) :]] = value
            continue
        if key.startswith("$"):
            raise ValueError(f"{_where(path)}: unknown patch directive {key!r}")
        sub = sub_schema(schema, key)
        sub_path = f"{path}.{key}" if path else key
        if value is None:
            result.pop(key, None)
        elif isinstance(value, dict):
            merged = _merge_map(result.get(key), value, sub, sub_path)
            if merged is _DELETE:
                result.pop(key, None)
            else:
                result[key] = merged
        elif isinstance(value, list):
            result[key] = _merge_list(result.get(key), value, sub, sub_path)
        else:
            result[key] = value
    for key, values in deletions.items():
        current = result.get(key)
        if isinstance(current, list):
            result[key] = [v for v in current if v not in values]
    for key, order in orders.items():
        current = result.get(key)
        if isinstance(current, list):
            _, merge_key = _list_meta(sub_schema(schema, key))
            result[key] = _apply_order(current, order, merge_key)
    if retain is not None:
        for key in [k for k in result if k not in retain]:
            del result[key]
    return result


def _merge_list(original: Any, patch: list[Any], schema: dict[str, Any] | None, path: str) -> list[Any]:
    merge, key = _list_meta(schema)
    item_schema = _items(schema)
    if not merge:
        return [_clean(v, item_schema, f"{path}[{i}]") for i, v in enumerate(patch)]
    current: list[Any] = copy.deepcopy(original) if isinstance(original, list) else []
    if any(isinstance(v, dict) and v.get(_PATCH) == "replace" for v in patch):
        rest = [v for v in patch if not (isinstance(v, dict) and v.get(_PATCH) == "replace")]
        return [_clean(v, item_schema, f"{path}[{i}]") for i, v in enumerate(rest)]
    if key is None:
        # A merged set of scalars (finalizers): union, keeping the original order first.
        for value in patch:
            if isinstance(value, dict):
                if value.get(_PATCH) == "delete" and "$value" not in value:
                    continue
                raise ValueError(f"{path}: a list of scalars cannot hold objects")
            if value not in current:
                current.append(value)
        return current
    server_order = {repr(cur.get(key)): j for j, cur in enumerate(current) if isinstance(cur, dict)}
    for i, item in enumerate(patch):
        if not isinstance(item, dict):
            raise ValueError(f"{path}[{i}]: items of a list merged by {key!r} must be objects")
        directive = item.get(_PATCH)
        if key not in item:
            if directive in ("delete", "merge", "replace"):
                continue
            raise ValueError(f"{path}[{i}]: map does not contain declared merge key: {key}")
        idx = next(
            (j for j, cur in enumerate(current) if isinstance(cur, dict) and cur.get(key) == item[key]),
            None,
        )
        if directive == "delete":
            if idx is not None:
                del current[idx]
            continue
        merged = _merge_map(
            current[idx] if idx is not None else {}, item, item_schema, f"{path}[{key}={item[key]}]"
        )
        if merged is _DELETE:
            if idx is not None:
                del current[idx]
        elif idx is not None:
            current[idx] = merged
        else:
            current.append(merged)
    return _patch_order(current, patch, key, server_order)


def _patch_order(current: list[Any], patch: list[Any], key: str, server_order: dict[str, int]) -> list[Any]:
    """Upstream's order of a merged keyed list: the patched items in patch order and the others
    in their original order, interleaved by original position where both have one (so an item
    the patch adds comes before the original items it is compared with)."""
    wanted: dict[str, int] = {}
    for item in patch:
        if isinstance(item, dict) and key in item and item.get(_PATCH) != "delete":
            wanted.setdefault(repr(item[key]), len(wanted))

    def ident(item: Any) -> str:
        return repr(item.get(key)) if isinstance(item, dict) else repr(item)

    left = sorted((x for x in current if ident(x) in wanted), key=lambda x: wanted[ident(x)])
    right = [x for x in current if ident(x) not in wanted]
    out: list[Any] = []
    i = j = 0
    while i < len(left) or j < len(right):
        if i >= len(left):
            out.append(right[j])
            j += 1
            continue
        if j < len(right):
            li, ri = server_order.get(ident(left[i])), server_order.get(ident(right[j]))
            if li is not None and ri is not None and li > ri:
                out.append(right[j])
                j += 1
                continue
        out.append(left[i])
        i += 1
    return out


def _apply_order(current: list[Any], order: list[Any], merge_key: str | None) -> list[Any]:
    """Reorder ``current`` so the items named in ``order`` follow it; others keep their slots."""

    def ident(item: Any) -> Any:
        if merge_key is not None and isinstance(item, dict):
            return item.get(merge_key)
        return item

    wanted = [ident(o) for o in order]
    rank = {repr(w): i for i, w in enumerate(wanted)}
    known = sorted((x for x in current if repr(ident(x)) in rank), key=lambda x: rank[repr(ident(x))])
    out: list[Any] = []
    it = iter(known)
    for item in current:
        out.append(next(it) if repr(ident(item)) in rank else item)
    return out


def _clean(value: Any, schema: dict[str, Any] | None, path: str) -> Any:
    """Return ``value`` with patch directives applied against an empty original."""
    if isinstance(value, dict):
        merged = _merge_map({}, value, schema, path)
        return {} if merged is _DELETE else merged
    if isinstance(value, list):
        return [_clean(v, _items(schema), f"{path}[{i}]") for i, v in enumerate(value)]
    return value
