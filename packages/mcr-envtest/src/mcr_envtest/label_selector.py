"""Label selector syntax as kube-apiserver parses it, refused in its words.

:func:`parse` turns ``app=web,tier in (a,b),!legacy,size>3`` into requirements or raises
:class:`SelectorError` with the message kube-apiserver 1.37 answers for the same selector
(``unable to parse requirement: found 'front' expected: '('``, ``found 'b', expected: ',' or
'end of string'``, a key or value that is not a valid label name or value). Tokens are what
upstream's lexer produces: identifiers run up to whitespace or one of ``=!(),<>``, and a run of
those symbols is read as the longest operator it starts with.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["Requirement", "SelectorError", "key_problems", "parse", "value_problems"]

_SYMBOLS = frozenset("=!(),<>")
_OPERATORS = {"!": "!", "!=": "!=", "(": "(", ")": ")", ",": ",", "<": "<", "=": "=", "==": "==", ">": ">"}
_BINARY = "in, notin, =, ==, !=, gt, lt"
_EOS = ""  # the end of the selector (upstream's EndOfStringToken has an empty literal)
_QUALIFIED = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_RE_QUALIFIED = re.compile(_QUALIFIED)
_RE_VALUE = re.compile(f"({_QUALIFIED})?")
_DNS_LABEL = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_RE_SUBDOMAIN = re.compile(rf"{_DNS_LABEL}(\.{_DNS_LABEL})*")
_NAME_MSG = (
    "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
    "alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is "
    f"'{_QUALIFIED}')"
)
_PREFIX_MSG = (
    "prefix part a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or "
    "'.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for "
    f"validation is '{_DNS_LABEL}(\\.{_DNS_LABEL})*')"
)
_VALUE_MSG = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and "
    "must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', "
    f"regex used for validation is '({_QUALIFIED})?')"
)


class SelectorError(ValueError):
    """A malformed label selector; ``str()`` is kube-apiserver's message for it."""


@dataclass(frozen=True)
class Requirement:
    """One requirement: ``op`` is ``=`` (for ``=`` and ``==``), ``!=``, ``in``, ``notin``,
    ``exists``, ``!`` (does not exist), ``gt`` or ``lt``; ``values`` its values."""

    key: str
    op: str
    values: frozenset[str]


def _tokens(selector: str) -> list[tuple[str, str]]:
    """(kind, literal) pairs: kind is ``id``, an operator literal, ``error`` or ``eos``."""
    out: list[tuple[str, str]] = []
    i, n = 0, len(selector)
    while True:
        while i < n and selector[i] in " \t\r\n":
            i += 1
        if i >= n:
            out.append(("eos", _EOS))
            return out
        if selector[i] in _SYMBOLS:
            best, j = "", i
            while j < n and selector[j] in _SYMBOLS:
                if selector[i : j + 1] in _OPERATORS:
                    best = selector[i : j + 1]
                elif best:
                    break
                j += 1
            if not best:
                out.append(("error", f"error expected: keyword found '{selector[i:j]}'"))
                i = j
            else:
                out.append((best, best))
                i += len(best)
            continue
        j = i
        while j < n and selector[j] not in _SYMBOLS and selector[j] not in " \t\r\n":
            j += 1
        word = selector[i:j]
        out.append((word if word in ("in", "notin") else "id", word))
        i = j


class _Parser:
    def __init__(self, selector: str) -> None:
        self.items = _tokens(selector)
        self.pos = 0

    def peek(self) -> tuple[str, str]:
        kind, lit = self.items[self.pos]
        return ("id" if kind in ("in", "notin") else kind), lit  # keywords are values here

    def take(self) -> tuple[str, str]:
        tok = self.peek()
        if self.pos < len(self.items) - 1:
            self.pos += 1
        return tok

    def take_operator(self) -> str:
        kind, lit = self.items[self.pos]
        if self.pos < len(self.items) - 1:
            self.pos += 1
        ops = {"in": "in", "notin": "notin", "=": "=", "==": "=", "!=": "!=", ">": "gt", "<": "lt"}
        if kind not in ops:
            raise SelectorError(f"found '{lit}', expected: {_BINARY}")
        return ops[kind]

    def requirements(self) -> list[Requirement]:
        out: list[Requirement] = []
        while True:
            kind, lit = self.peek()
            if kind == "eos":
                return out
            if kind not in ("id", "!"):
                raise SelectorError(f"found '{lit}', expected: !, identifier, or 'end of string'")
            try:
                out.append(self.requirement())
            except SelectorError as exc:
                raise SelectorError(f"unable to parse requirement: {exc}") from None
            kind, lit = self.take()
            if kind == "eos":
                return out
            if kind != ",":
                raise SelectorError(f"found '{lit}', expected: ',' or 'end of string'")
            kind, lit = self.peek()
            if kind not in ("id", "!"):
                raise SelectorError(f"found '{lit}', expected: identifier after ','")

    def requirement(self) -> Requirement:
        kind, key = self.take()
        negated = kind == "!"
        if negated:
            kind, key = self.take()
        if kind != "id":
            raise SelectorError(f"found '{key}', expected: identifier")
        _check_key(key, "")
        if negated or self.peek()[0] in ("eos", ","):
            return _checked(key, "!" if negated else "exists", [])
        op = self.take_operator()
        values = self.set_values() if op in ("in", "notin") else self.exact_value()
        return _checked(key, op, values)

    def exact_value(self) -> list[str]:
        if self.peek()[0] in ("eos", ","):
            return [""]
        kind, lit = self.take()
        if kind != "id":
            raise SelectorError(f"found '{lit}', expected: identifier")
        return [lit]

    def set_values(self) -> list[str]:
        kind, lit = self.take()
        if kind != "(":
            raise SelectorError(f"found '{lit}' expected: '('")
        kind, lit = self.peek()
        if kind == ")":
            self.take()
            return [""]
        if kind not in ("id", ","):
            raise SelectorError(f"found '{lit}', expected: ',', ')' or identifier")
        values: list[str] = []
        while True:
            kind, lit = self.take()
            if kind == "id":
                values.append(lit)
                after, after_lit = self.peek()
                if after == ")":
                    break
                if after != ",":
                    raise SelectorError(f"found '{after_lit}', expected: ',' or ')'")
            elif kind == ",":
                if not values:
                    values.append("")
                while self.peek()[0] == ",":  # empty values between commas
                    self.take()
                    values.append("")
                if self.peek()[0] == ")":
                    values.append("")
                    break
            else:
                raise SelectorError(f"found '{lit}', expected: ',', or identifier")
        self.take()  # the closing parenthesis
        return values


def key_problems(key: str) -> list[str]:
    """What makes ``key`` no label key (a qualified name), in kube-apiserver's words (none: valid)."""
    prefix, slash, name = key.rpartition("/")
    bad: list[str] = []
    if slash and not prefix:
        bad.append("prefix part must be non-empty")
    elif slash:
        if len(prefix) > 253:
            bad.append("prefix part must be no more than 253 characters")
        if not _RE_SUBDOMAIN.fullmatch(prefix):
            bad.append(_PREFIX_MSG)
    if not name:
        bad.append("name part must be non-empty")
    elif len(name) > 63:
        bad.append("name part must be no more than 63 characters")
    if not _RE_QUALIFIED.fullmatch(name):
        bad.append(_NAME_MSG)
    return bad


def value_problems(value: str) -> list[str]:
    """What makes ``value`` no label value, in kube-apiserver's words (none: valid)."""
    bad = ["must be no more than 63 characters"] if len(value) > 63 else []
    if not _RE_VALUE.fullmatch(value):
        bad.append(_VALUE_MSG)
    return bad


def _key_errors(key: str, field: str) -> str | None:
    bad = key_problems(key)
    if not bad:
        return None
    return f'{field or "<nil>"}: Invalid value: "{key}": ' + "; ".join(bad)


def _check_key(key: str, field: str) -> None:
    message = _key_errors(key, field)
    if message is not None:
        raise SelectorError(message)


def _checked(key: str, op: str, values: list[str]) -> Requirement:
    problems: list[str] = []
    if op in ("gt", "lt"):
        for i, value in enumerate(values):
            if not re.fullmatch(r"[+-]?[0-9]+", value):
                problems.append(
                    f'values[{i}]: Invalid value: "{value}": '
                    "for 'Gt', 'Lt' operators, the value must be an integer"
                )
    for i, value in enumerate(values):
        bad = value_problems(value)
        if bad:
            problems.append(f'values[{i}][{key}]: Invalid value: "{value}": ' + "; ".join(bad))
    if len(problems) == 1:
        raise SelectorError(problems[0])
    if problems:
        raise SelectorError("[" + ", ".join(problems) + "]")
    return Requirement(key, op, frozenset(values))


def parse(selector: str) -> list[Requirement]:
    """The requirements of a label selector (none for an empty one); :class:`SelectorError`
    carries kube-apiserver's message for a malformed selector."""
    return _Parser(selector).requirements()
