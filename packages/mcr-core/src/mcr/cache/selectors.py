"""Label and field selectors evaluated against cached objects (the cache reader's filters).

Label selectors use the Kubernetes string syntax (``a=b,c!=d,e in (x,y),f notin (z),g,!h``) or a
``{key: value}`` mapping (``matchLabels``). Field selectors on the cache support what
controller-runtime's cache supports: ``metadata.name`` and ``metadata.namespace`` directly, and
any other field only through an index registered with ``index_field`` (exact match).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["LabelSelector", "parse_field_selector", "parse_label_selector"]

Obj = dict[str, Any]
_Requirement = Callable[[Mapping[str, str]], bool]

_SET_RE = re.compile(r"^\s*(!?)\s*([A-Za-z0-9_./-]+)\s*(?:(in|notin)\s*\(([^)]*)\))?\s*$")
_OP_RE = re.compile(r"^\s*([A-Za-z0-9_./-]+)\s*(==|=|!=)\s*([A-Za-z0-9_.-]*)\s*$")


def _split_top(text: str) -> list[str]:
    """Split on commas that are not inside parentheses."""
    parts: list[str] = []
    cur: list[str] = []
    depth = 0
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    parts.append("".join(cur))
    return [p for p in parts if p.strip()]


class LabelSelector:
    """A parsed label selector; ``matches(labels)`` is true when every requirement holds."""

    __slots__ = ("_reqs", "text")

    def __init__(self, text: str, reqs: list[_Requirement]) -> None:
        self.text = text
        self._reqs = reqs

    def matches(self, labels: Mapping[str, str] | None) -> bool:
        labels = labels or {}
        return all(req(labels) for req in self._reqs)

    def matches_object(self, obj: Obj) -> bool:
        return self.matches(obj["metadata"].get("labels"))

    @property
    def empty(self) -> bool:
        return not self._reqs


def _eq(key: str, value: str) -> _Requirement:
    return lambda labels: labels.get(key) == value


def _ne(key: str, value: str) -> _Requirement:
    return lambda labels: labels.get(key) != value


def _in(key: str, values: frozenset[str]) -> _Requirement:
    return lambda labels: key in labels and labels[key] in values


def _notin(key: str, values: frozenset[str]) -> _Requirement:
    return lambda labels: labels.get(key) not in values


def _exists(key: str) -> _Requirement:
    return lambda labels: key in labels


def _absent(key: str) -> _Requirement:
    return lambda labels: key not in labels


def parse_label_selector(selector: str | Mapping[str, str]) -> LabelSelector:
    """Parse a selector string or a ``matchLabels`` mapping; ``ValueError`` names a bad term."""
    if isinstance(selector, Mapping):
        reqs = [_eq(k, v) for k, v in selector.items()]
        return LabelSelector(",".join(f"{k}={v}" for k, v in selector.items()), reqs)
    reqs = []
    for term in _split_top(selector):
        m = _OP_RE.match(term)
        if m:
            key, op, value = m.groups()
            reqs.append(_ne(key, value) if op == "!=" else _eq(key, value))
            continue
        m = _SET_RE.match(term)
        if not m:
            raise ValueError(f"invalid label selector {selector!r}: cannot parse {term.strip()!r}")
        bang, key, op, values = m.groups()
        if op:
            if bang:
                raise ValueError(f"invalid label selector {selector!r}: '!' before a set term {term!r}")
            vals = frozenset(v.strip() for v in values.split(",") if v.strip())
            reqs.append(_in(key, vals) if op == "in" else _notin(key, vals))
        else:
            reqs.append(_absent(key) if bang else _exists(key))
    return LabelSelector(selector, reqs)


def parse_field_selector(selector: str | Mapping[str, str]) -> list[tuple[str, str, bool]]:
    """``"a=b,c!=d"`` (or a mapping) → ``[(field, value, equal)]``; ``ValueError`` on a bad term."""
    if isinstance(selector, Mapping):
        return [(k, v, True) for k, v in selector.items()]
    terms = []
    for term in _split_top(selector):
        if "!=" in term:
            field, _, value = term.partition("!=")
            terms.append((field.strip(), value.strip(), False))
        elif "==" in term or "=" in term:
            field, _, value = term.partition("==") if "==" in term else term.partition("=")
            terms.append((field.strip(), value.strip(), True))
        else:
            raise ValueError(f"invalid field selector {selector!r}: {term.strip()!r} has no operator")
    return terms
