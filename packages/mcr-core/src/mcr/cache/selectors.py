"""Label and field selectors: parsed and checked where they are given, evaluated against cached objects.

Label selectors use the Kubernetes string syntax (``a=b,c!=d,e in (x,y),f notin (z),g,!h,n>3``)
or a ``{key: value}`` mapping (``matchLabels``). They are checked as the API server checks them —
the grammar, label keys (``[prefix/]name``) and values, integer operands of ``>`` and ``<`` — so a
selector the server would answer with 400 Bad Request is refused with a ``ValueError`` naming it
and the fault before any request is made. Field selectors on the cache support what
controller-runtime's cache supports: ``metadata.name`` and ``metadata.namespace`` directly, and
any other field only through an index registered with ``index_field`` (exact match).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping
from typing import Any

__all__ = [
    "LabelSelector",
    "check_field_selector",
    "check_label_selector",
    "label_key_problem",
    "label_value_problem",
    "parse_field_selector",
    "parse_label_selector",
]

Obj = dict[str, Any]
_Requirement = Callable[[Mapping[str, str]], bool]


class LabelSelector:
    """A parsed label selector; ``matches(labels)`` is true when every requirement holds."""

    __slots__ = ("_reqs", "text")

    def __init__(self, text: str, reqs: list[_Requirement]) -> None:
        self.text = text
        self._reqs = reqs

    def matches(self, labels: Mapping[str, str] | None) -> bool:
        labels = labels or {}
        return all(req(labels) for req in self._reqs)

    @property
    def empty(self) -> bool:
        return not self._reqs

    def __repr__(self) -> str:
        return f"LabelSelector({self.text!r})"


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


def _as_int(value: str | None) -> int | None:
    if value is None:
        return None
    try:
        return int(value)
    except ValueError:
        return None


def _gt(key: str, number: int) -> _Requirement:
    def gt(labels: Mapping[str, str]) -> bool:
        value = _as_int(labels.get(key))
        return value is not None and value > number

    return gt


def _lt(key: str, number: int) -> _Requirement:
    def lt(labels: Mapping[str, str]) -> bool:
        value = _as_int(labels.get(key))
        return value is not None and value < number

    return lt


_WHITESPACE = " \t\r\n"
_SPECIAL = "=!(),<>"
_OPERATORS = ("==", "!=", "=", "!", "(", ")", ",", "<", ">")
_KEYWORDS = ("in", "notin")

_NAME_RE = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_DNS_SUBDOMAIN_RE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_VALUE_RE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")


def label_key_problem(key: str) -> str | None:
    """Why ``key`` is not a valid label key (a qualified name: ``[prefix/]name``), else ``None``.

    The rules are the API server's: ``name`` is at most 63 characters of alphanumerics, ``-``,
    ``_`` and ``.``, starting and ending with an alphanumeric; the optional ``prefix`` is a DNS
    subdomain (lower case, at most 253 characters).
    """
    prefix, slash, name = key.rpartition("/")
    if slash and not prefix:
        return "the prefix before '/' must not be empty"
    if "/" in prefix:
        return "a key has at most one '/'"
    if not name:
        return "the name must not be empty"
    if len(name) > 63:
        return f"the name {name!r} is longer than 63 characters"
    if not _NAME_RE.match(name):
        return (
            f"the name {name!r} must consist of alphanumerics, '-', '_' or '.', "
            "and start and end with an alphanumeric"
        )
    if prefix:
        if len(prefix) > 253:
            return "the prefix is longer than 253 characters"
        if not _DNS_SUBDOMAIN_RE.match(prefix):
            return f"the prefix {prefix!r} must be a lower-case DNS subdomain"
    return None


def label_value_problem(value: str) -> str | None:
    """Why ``value`` is not a valid label value, else ``None`` (the empty value is valid)."""
    if len(value) > 63:
        return f"the value {value!r} is longer than 63 characters"
    if not _VALUE_RE.match(value):
        return (
            f"the value {value!r} must consist of alphanumerics, '-', '_' or '.', "
            "and start and end with an alphanumeric"
        )
    return None


def _tokens(text: str) -> list[tuple[str, str]]:
    """``text`` as ``(kind, literal)`` tokens: ``"id"`` for identifiers, else the operator itself."""
    out: list[tuple[str, str]] = []
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch in _WHITESPACE:
            i += 1
        elif ch in _SPECIAL:
            op = next((o for o in _OPERATORS if text.startswith(o, i)), None)
            assert op is not None  # every special character is an operator of its own
            out.append((op, op))
            i += len(op)
        else:
            j = i
            while j < n and text[j] not in _SPECIAL and text[j] not in _WHITESPACE:
                j += 1
            word = text[i:j]
            out.append((word if word in _KEYWORDS else "id", word))
            i = j
    out.append(("end", ""))
    return out


def _shown(literal: str) -> str:
    return repr(literal) if literal else "the end"


class _Parser:
    """The label selector grammar of the API server (``k8s.io/apimachinery/pkg/labels``)::

    selector    := "" | requirement ("," requirement)*
    requirement := ["!"] KEY | KEY ("=" | "==" | "!=" | ">" | "<") VALUE | KEY ("in" | "notin") "(" VALUES ")"
    """

    def __init__(self, text: str) -> None:
        self.text = text
        self.toks = _tokens(text)
        self.pos = 0

    def fail(self, why: str) -> ValueError:
        return ValueError(f"invalid label selector {self.text!r}: {why}")

    def peek(self, values: bool = False) -> tuple[str, str]:
        kind, lit = self.toks[self.pos]
        # In value position the keywords are plain words: "x in (in)" is valid.
        return ("id", lit) if values and kind in _KEYWORDS else (kind, lit)

    def take(self, values: bool = False) -> tuple[str, str]:
        tok = self.peek(values)
        self.pos += 1
        return tok

    def parse(self) -> list[_Requirement]:
        reqs: list[_Requirement] = []
        if self.peek(values=True)[0] == "end":
            return reqs
        while True:
            reqs.append(self.requirement())
            kind, lit = self.take(values=True)
            if kind == "end":
                return reqs
            if kind != ",":
                raise self.fail(f"found {lit!r} where ',' or the end was expected")
            if self.peek(values=True)[0] not in ("id", "!"):
                raise self.fail(f"found {_shown(self.peek()[1])} where a key was expected after ','")

    def requirement(self) -> _Requirement:
        kind, key = self.take(values=True)
        negated = kind == "!"
        if negated:
            kind, key = self.take(values=True)
        if kind != "id":
            raise self.fail(f"found {_shown(key)} where a key was expected")
        self.check_key(key)
        if self.peek(values=True)[0] in (",", "end"):
            return _absent(key) if negated else _exists(key)
        if negated:
            raise self.fail(f"'!{key}' takes no operator or value")
        op, lit = self.take()
        if op in ("in", "notin"):
            values = self.value_set(key)
            return _in(key, values) if op == "in" else _notin(key, values)
        if op not in ("=", "==", "!=", ">", "<"):
            raise self.fail(
                f"found {_shown(lit)} after {key!r} where one of =, ==, !=, in, notin, >, < was expected"
            )
        value = ""
        if self.peek(values=True)[0] not in (",", "end"):
            kind, value = self.take(values=True)
            if kind != "id":
                raise self.fail(f"found {value!r} where the value of {key!r} was expected")
        if op in (">", "<"):
            self.check_value(key, value)  # an operand is a label value too (so never negative)
            try:
                number = int(value)
            except ValueError:
                raise self.fail(f"{key}{op}{value}: the value of '>' and '<' must be an integer") from None
            return _gt(key, number) if op == ">" else _lt(key, number)
        self.check_value(key, value)
        return _ne(key, value) if op == "!=" else _eq(key, value)

    def value_set(self, key: str) -> frozenset[str]:
        kind, lit = self.take(values=True)
        if kind != "(":
            raise self.fail(f"found {_shown(lit)} where '(' was expected after {key!r} in/notin")
        values: set[str] = set()
        expect_value = True
        while True:
            kind, lit = self.take(values=True)
            if kind == ")":
                if expect_value:
                    values.add("")  # "()" and "(a,)" hold the empty value
                break
            if kind == ",":
                if expect_value:
                    values.add("")
                expect_value = True
            elif kind == "id" and expect_value:
                self.check_value(key, lit)
                values.add(lit)
                expect_value = False
            else:
                raise self.fail(f"found {_shown(lit)} in the values of {key!r} where ',' or ')' was expected")
        return frozenset(values)

    def check_key(self, key: str) -> None:
        problem = label_key_problem(key)
        if problem is not None:
            raise self.fail(f"key {key!r}: {problem}")

    def check_value(self, key: str, value: str) -> None:
        problem = label_value_problem(value)
        if problem is not None:
            raise self.fail(f"key {key!r}: {problem}")


def parse_label_selector(selector: str | Mapping[str, str]) -> LabelSelector:
    """Parse a selector string or a ``matchLabels`` mapping.

    Raises ``ValueError`` naming the selector and what is wrong with it (the term, key or value)
    for anything the API server would refuse.
    """
    if isinstance(selector, Mapping):
        text = ",".join(f"{k}={v}" for k, v in selector.items())
        reqs = []
        for key, value in selector.items():
            if not isinstance(key, str) or not isinstance(value, str):
                raise ValueError(
                    f"invalid label selector {dict(selector)!r}: keys and values must be strings"
                )
            problem = label_key_problem(key)
            if problem is None:
                problem = label_value_problem(value)
            if problem is not None:
                raise ValueError(f"invalid label selector {dict(selector)!r}: key {key!r}: {problem}")
            reqs.append(_eq(key, value))
        return LabelSelector(text, reqs)
    if not isinstance(selector, str):
        raise TypeError(f"a label selector is a string or a mapping, not {type(selector).__name__}")
    return _parse_text(selector)


# Cache reads name the same few selectors again and again: parse each distinct string once (a
# LabelSelector is never changed once made; a bad string raises each time, it is not cached).
@functools.lru_cache(maxsize=256)
def _parse_text(text: str) -> LabelSelector:
    return LabelSelector(text, _Parser(text).parse())


def check_label_selector(selector: str | Mapping[str, str] | None, where: str) -> None:
    """Raise ``ValueError`` prefixed with ``where`` (e.g. ``"ByObject.label_selector"``) if
    ``selector`` is not ``None`` and does not parse."""
    if selector is None:
        return
    try:
        parse_label_selector(selector)
    except (ValueError, TypeError) as exc:
        raise ValueError(f"{where}: {exc}") from None


def check_field_selector(selector: str | Mapping[str, str] | None, where: str) -> None:
    """Raise ``ValueError`` prefixed with ``where`` if ``selector`` is not ``None`` and does not parse."""
    if selector is None:
        return
    try:
        parse_field_selector(selector)
    except (ValueError, TypeError) as exc:
        raise ValueError(f"{where}: {exc}") from None


def parse_field_selector(selector: str | Mapping[str, str]) -> list[tuple[str, str, bool]]:
    """``"a=b,c!=d"`` (or a mapping) → ``[(field, value, equal)]``; ``ValueError`` on a bad term."""
    if isinstance(selector, Mapping):
        return [(k, v, True) for k, v in selector.items()]
    terms = []
    for term in (t for t in selector.split(",") if t.strip()):
        if "!=" in term:
            field, _, value = term.partition("!=")
            terms.append((field.strip(), value.strip(), False))
        elif "==" in term or "=" in term:
            field, _, value = term.partition("==") if "==" in term else term.partition("=")
            terms.append((field.strip(), value.strip(), True))
        else:
            raise ValueError(f"invalid field selector {selector!r}: {term.strip()!r} has no operator")
        if not terms[-1][0]:
            raise ValueError(f"invalid field selector {selector!r}: {term.strip()!r} names no field")
    return terms
