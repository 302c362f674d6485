"""Pointers into JSON documents, as the corpus data writes them.

A pointer is JSON Pointer (``/a/b/0``; ``~1`` for ``/`` and ``~0`` for ``~`` inside a key) with
two additions: a segment ``[key=value]`` selects the first list element whose ``key`` (dotted for
nested keys: ``[metadata.name=web]``) equals ``value`` as a string, and ``*`` (in :func:`drop`)
stands for every key or element.
"""

from __future__ import annotations

import copy
from typing import Any

__all__ = ["MISSING", "drop", "resolve", "segments"]


class _Missing:
    def __repr__(self) -> str:
        return "<missing>"


MISSING: Any = _Missing()


def segments(pointer: str) -> list[str]:
    """The unescaped segments of ``pointer`` (``""`` is the whole document)."""
    if not pointer:
        return []
    return [s.replace("~1", "/").replace("~0", "~") for s in pointer.split("/")[1:]]


def _nested(item: Any, dotted: str) -> Any:
    for part in dotted.split("."):
        if not isinstance(item, dict) or part not in item:
            return MISSING
        item = item[part]
    return item


def _step(doc: Any, seg: str) -> Any:
    if isinstance(doc, dict):
        return doc.get(seg, MISSING)
    if isinstance(doc, list):
        if seg.startswith("[") and seg.endswith("]") and "=" in seg:
            key, _, want = seg[1:-1].partition("=")
            for item in doc:
                value = _nested(item, key)
                if value is not MISSING and str(value) == want:
                    return item
            return MISSING
        if seg.isdigit() and int(seg) < len(doc):
            return doc[int(seg)]
    return MISSING


def resolve(doc: Any, pointer: str) -> Any:
    """The value at ``pointer`` in ``doc``, or :data:`MISSING`."""
    for seg in segments(pointer):
        doc = _step(doc, seg)
        if doc is MISSING:
            return MISSING
    return doc


def _drop(doc: Any, segs: list[str]) -> None:
    seg, rest = segs[0], segs[1:]
    if seg == "*":
        children = list(doc.values()) if isinstance(doc, dict) else doc if isinstance(doc, list) else []
        if not rest:
            if isinstance(doc, (dict, list)):
                doc.clear()
            return
        for child in children:
            _drop(child, rest)
        return
    if not rest:
        if isinstance(doc, dict):
            doc.pop(seg, None)
        elif isinstance(doc, list):
            target = _step(doc, seg)
            if target is not MISSING:
                doc.remove(target)
        return
    child = _step(doc, seg)
    if child is not MISSING:
        _drop(child, rest)


def drop(doc: Any, pointers: tuple[str, ...] | list[str]) -> Any:
    """A copy of ``doc`` without what each pointer names (pointers that name nothing are
    ignored; ``""`` empties nothing)."""
    if not pointers:
        return doc
    doc = copy.deepcopy(doc)
    for p in pointers:
        segs = segments(p)
        if segs:
            _drop(doc, segs)
    return doc
