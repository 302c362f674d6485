"""Structural comparison of two servers' answers to one step."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .model import Step
from .pointer import MISSING, drop, resolve

__all__ = ["STATUS", "TYPE", "Answer", "Difference", "compare", "diff"]

STATUS = "<status>"
TYPE = "<content-type>"


@dataclass(frozen=True)
class Answer:
    """One server's normalised answer to one step: HTTP status, media type (``Content-Type``
    without parameters), body (decoded JSON, text, or for a watch the list of events read) and
    the response headers the step compares (lower-case names; repeated headers joined by
    newlines)."""

    status: int
    content_type: str
    body: Any
    headers: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Difference:
    """Where two answers differ: ``path`` is a pointer into the body, or :data:`STATUS` /
    :data:`TYPE`; ``against`` and ``reference`` are the two values (:data:`MISSING` when absent)."""

    path: str  # also <header:NAME>
    against: Any
    reference: Any


def _escape(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")


def diff(a: Any, b: Any, path: str = "") -> list[Difference]:
    """Every place where ``a`` and ``b`` differ (dict keys in any order; lists element-wise)."""
    if isinstance(a, dict) and isinstance(b, dict):
        out: list[Difference] = []
        for key in sorted(set(a) | set(b)):
            out.extend(diff(a.get(key, MISSING), b.get(key, MISSING), f"{path}/{_escape(key)}"))
        return out
    if isinstance(a, list) and isinstance(b, list):
        out = []
        for i in range(max(len(a), len(b))):
            out.extend(diff(a[i] if i < len(a) else MISSING, b[i] if i < len(b) else MISSING, f"{path}/{i}"))
        return out
    if type(a) is type(b) and a == b:
        return []
    return [Difference(path, a, b)]


def _summary(answer: Answer) -> Any:
    body = answer.body
    if isinstance(body, dict) and body.get("kind") == "Status":
        return f"{answer.status} {body.get('reason', '')}: {body.get('message', '')}"
    if isinstance(body, str):
        return f"{answer.status} {body[:120]!r}"
    return answer.status


def compare(step: Step, ignore: tuple[str, ...], a: Answer, b: Answer) -> list[Difference]:
    """The differences between ``a`` (the server under test) and ``b`` (the reference) that
    ``step`` asks to compare; with different status codes only that one difference (both sides
    summarised) is reported, since the bodies then say different things."""
    if a.status != b.status:
        return [Difference(STATUS, _summary(a), _summary(b))]
    out = []
    if a.content_type != b.content_type:
        out.append(Difference(TYPE, a.content_type, b.content_type))
    for name in step.response_headers:
        ha, hb = a.headers.get(name, MISSING), b.headers.get(name, MISSING)
        if ha != hb:
            out.append(Difference(f"<header:{name}>", ha, hb))
    if step.compare == "status":
        return out
    ignored = (*ignore, *step.ignore)
    left, right = drop(a.body, ignored), drop(b.body, ignored)
    if not step.paths and not step.exists:
        return out + diff(left, right)
    for p in step.paths:
        out.extend(diff(resolve(left, p), resolve(right, p), p))
    for p in step.exists:
        has_a, has_b = resolve(left, p) is not MISSING, resolve(right, p) is not MISSING
        if has_a != has_b:
            out.append(Difference(p, "present" if has_a else MISSING, "present" if has_b else MISSING))
    return out
