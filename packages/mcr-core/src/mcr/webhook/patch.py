"""JSON patches (RFC 6902) that turn one JSON document into another.

:func:`diff` compares decoded JSON values (dicts, lists, strings, numbers, booleans, ``None``)
and returns the operations a mutating admission response carries. Applying the operations to
``old`` in order yields a document equal to ``new``.
"""

from __future__ import annotations

from typing import Any

__all__ = ["diff", "pointer"]


def pointer(tokens: list[str | int]) -> str:
    """The JSON pointer (RFC 6901) of a path: ``~`` and ``/`` in a token escaped."""
    return "".join("/" + str(t).replace("~", "~0").replace("/", "~1") for t in tokens)


def _same(a: Any, b: Any) -> bool:
    """JSON equality at any depth: unlike Python's ``==``, ``true`` is not ``1``."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(v, b[k]) for k, v in a.items())
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    return type(a) is not dict and type(a) is not list and a == b


def diff(old: Any, new: Any) -> list[dict[str, Any]]:
    """The operations (``add``, ``remove``, ``replace``) that turn ``old`` into ``new``.

    Objects are compared member by member, arrays element by element (elements past the shorter
    array are added at the end or removed from the end); any other change replaces the value.
    Equal documents give ``[]``.
    """
    ops: list[dict[str, Any]] = []
    _diff(old, new, [], ops)
    return ops


def _diff(old: Any, new: Any, path: list[str | int], ops: list[dict[str, Any]]) -> None:
    if _same(old, new):
        return
    if isinstance(old, dict) and isinstance(new, dict):
        for key in old:
            if key not in new:
                ops.append({"op": "remove", "path": pointer([*path, key])})
        for key, value in new.items():
            if key in old:
                _diff(old[key], value, [*path, key], ops)
            else:
                ops.append({"op": "add", "path": pointer([*path, key]), "value": value})
        return
    if isinstance(old, list) and isinstance(new, list):
        common = min(len(old), len(new))
        for i in range(common):
            _diff(old[i], new[i], [*path, i], ops)
        for i in range(len(old) - 1, common - 1, -1):
            ops.append({"op": "remove", "path": pointer([*path, i])})
        for i in range(common, len(new)):
            ops.append({"op": "add", "path": pointer([*path, i]), "value": new[i]})
        return
    ops.append({"op": "replace", "path": pointer(path), "value": new})
