"""Parsing a subset of the Common Expression Language, enough for the ``x-kubernetes-validations`` rules
CRDs commonly carry: literals, ``self``/``oldSelf`` field access and indexing, ``has()``,
``size()``, arithmetic, comparisons, ``in``, ``&&``/``||``/``!`` (with CEL's error absorption),
the ternary, list and map literals, the macros ``all``, ``exists``, ``exists_one``, ``map`` and
``filter``, the string functions ``startsWith``, ``endsWith``, ``contains``, ``matches``,
``lowerAscii``, ``upperAscii``, ``trim``, ``indexOf``, ``split``, ``join``, ``substring``,
``replace``, and the conversions ``int``, ``uint``, ``double``, ``string``.

:func:`parse` raises :class:`CelSyntaxError` for text that is not CEL and
:class:`CelUnsupported` for CEL this module does not implement (so a caller never mistakes an
unimplemented rule for a passing one). :mod:`.evaluator` evaluates the tree.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

__all__ = ["NO_TARGET", "CelError", "CelEvalError", "CelSyntaxError", "CelUnsupported", "Node", "parse"]

INT_MIN, INT_MAX = -(2**63), 2**63 - 1


class CelError(Exception):
    """Base of this module's errors; ``pos`` is the 0-based offset in the expression."""

    def __init__(self, message: str, pos: int = 0) -> None:
        super().__init__(message)
        self.message = message
        self.pos = pos


class CelSyntaxError(CelError):
    """The text is not a CEL expression."""


class CelUnsupported(CelError):
    """Valid CEL this evaluator does not implement (a function, macro or literal kind)."""


class CelEvalError(CelError):
    """A runtime error of an expression (no such key, overflow, division by zero, ...)."""


@dataclass
class Node:
    """An expression node: ``op`` is ``lit``, ``ident``, ``select``, ``index``, ``call``,
    ``list``, ``map``, ``unary``, ``binary``, ``and``, ``or``, ``cond`` or ``macro``."""

    op: str
    pos: int
    value: Any = None
    args: tuple[Node, ...] = ()


# ------------------------------------------------------------------ lexer
_TOKEN = re.compile(
    r"""(?P<ws>\s+)
    |(?P<float>(?:\d+\.\d+(?:[eE][+-]?\d+)?|\d+[eE][+-]?\d+|\.\d+(?:[eE][+-]?\d+)?))
    |(?P<int>0[xX][0-9a-fA-F]+[uU]?|\d+[uU]?)
    |(?P<string>[rR]?[bB]?(?:'''(?:.|\n)*?'''|\"\"\"(?:.|\n)*?\"\"\"|'(?:\\.|[^'\\\n])*'|"(?:\\.|[^"\\\n])*"))
    |(?P<ident>[A-Za-z_][A-Za-z0-9_]*)
    |(?P<op>\|\||&&|==|!=|<=|>=|[-+*/%!<>?:.,\[\](){}])""",
    re.VERBOSE,
)
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\", "'": "'", '"': '"', "`": "`", "?": "?", "a": "\a",
            "b": "\b", "f": "\f", "v": "\v"}  # fmt: skip
RESERVED = {"as", "break", "const", "continue", "else", "for", "function", "if", "import", "let", "loop",
            "package", "namespace", "return", "var", "void", "while"}  # fmt: skip


def _unquote(text: str, pos: int) -> str:
    prefix = ""
    while text[0] in "rRbB":
        prefix += text[0].lower()
        text = text[1:]
    if "b" in prefix:
        raise CelUnsupported("bytes literals are not supported", pos)
    quote = 3 if text[:3] in ("'''", '"""') else 1
    body = text[quote:-quote]
    if "r" in prefix:
        return body
    out, i = [], 0
    while i < len(body):
        c = body[i]
        if c != "\\":
            out.append(c)
            i += 1
            continue
        nxt = body[i + 1] if i + 1 < len(body) else ""
        if nxt in _ESCAPES:
            out.append(_ESCAPES[nxt])
            i += 2
        elif nxt in "uU":
            width = 4 if nxt == "u" else 8
            out.append(chr(int(body[i + 2 : i + 2 + width], 16)))
            i += 2 + width
        elif nxt in "xX":
            out.append(chr(int(body[i + 2 : i + 4], 16)))
            i += 4
        elif nxt.isdigit():
            out.append(chr(int(body[i + 1 : i + 4], 8)))
            i += 4
        else:
            raise CelSyntaxError(f"invalid escape sequence '\\{nxt}'", pos)
    return "".join(out)


def _tokens(text: str) -> list[tuple[str, Any, int]]:
    out: list[tuple[str, Any, int]] = []
    pos = 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None:
            raise CelSyntaxError(f"token recognition error at: '{text[pos]}'", pos)
        kind = m.lastgroup or ""
        raw = m.group()
        if kind == "float":
            out.append(("lit", float(raw), pos))
        elif kind == "int":
            unsigned = raw[-1] in "uU"
            digits = raw[:-1] if unsigned else raw
            value = int(digits, 16) if digits[:2].lower() == "0x" else int(digits)
            out.append(("uint" if unsigned else "int", value, pos))
        elif kind == "string":
            out.append(("lit", _unquote(raw, pos), pos))
        elif kind == "ident":
            if raw in ("true", "false"):
                out.append(("lit", raw == "true", pos))
            elif raw == "null":
                out.append(("lit", None, pos))
            else:
                out.append(("ident", raw, pos))
        elif kind == "op":
            out.append(("op", raw, pos))
        pos = m.end()
    out.append(("eof", None, len(text)))
    return out


# ------------------------------------------------------------------ parser
_MACROS = {"all", "exists", "exists_one", "map", "filter"}
_REL = {"==", "!=", "<", "<=", ">", ">="}


class _Parser:
    def __init__(self, text: str) -> None:
        self.toks = _tokens(text)
        self.i = 0

    def peek(self) -> tuple[str, Any, int]:
        return self.toks[self.i]

    def take(self) -> tuple[str, Any, int]:
        tok = self.toks[self.i]
        self.i += 1
        return tok

    def accept(self, op: str) -> bool:
        kind, value, _ = self.peek()
        if kind == "op" and value == op:
            self.i += 1
            return True
        return False

    def expect(self, op: str) -> None:
        if not self.accept(op):
            kind, value, pos = self.peek()
            found = "<EOF>" if kind == "eof" else f"'{value}'"
            raise CelSyntaxError(f"mismatched input {found} expecting '{op}'", pos)

    def expr(self) -> Node:
        cond = self.or_()
        kind, value, pos = self.peek()
        if kind == "op" and value == "?":
            self.take()
            yes = self.or_()
            self.expect(":")
            no = self.expr()
            return Node("cond", pos, None, (cond, yes, no))
        return cond

    def or_(self) -> Node:
        left = self.and_()
        while self.peek()[:2] == ("op", "||"):
            pos = self.take()[2]
            left = Node("or", pos, None, (left, self.and_()))
        return left

    def and_(self) -> Node:
        left = self.rel()
        while self.peek()[:2] == ("op", "&&"):
            pos = self.take()[2]
            left = Node("and", pos, None, (left, self.rel()))
        return left

    def rel(self) -> Node:
        left = self.add()
        while True:
            kind, value, pos = self.peek()
            if (kind == "op" and value in _REL) or (kind == "ident" and value == "in"):
                self.take()
                left = Node("binary", pos, value, (left, self.add()))
            else:
                return left

    def add(self) -> Node:
        left = self.mul()
        while self.peek()[0] == "op" and self.peek()[1] in ("+", "-"):
            _, op, pos = self.take()
            left = Node("binary", pos, op, (left, self.mul()))
        return left

    def mul(self) -> Node:
        left = self.unary()
        while self.peek()[0] == "op" and self.peek()[1] in ("*", "/", "%"):
            _, op, pos = self.take()
            left = Node("binary", pos, op, (left, self.unary()))
        return left

    def unary(self) -> Node:
        kind, value, pos = self.peek()
        if kind == "op" and value in ("!", "-"):
            self.take()
            operand = self.unary()
            literal = operand.op == "lit" and not isinstance(operand.value, bool)
            if value == "-" and literal and isinstance(operand.value, int | float):
                return Node("lit", pos, -operand.value)
            return Node("unary", pos, value, (operand,))
        return self.member()

    def member(self) -> Node:
        node = self.primary()
        while True:
            kind, value, pos = self.peek()
            if kind == "op" and value == ".":
                self.take()
                if self.peek()[:2] == ("op", "?"):
                    raise CelUnsupported("optional field selection (.?) is not supported", pos)
                k2, name, npos = self.take()
                if k2 != "ident":
                    found = "<EOF>" if k2 == "eof" else f"'{name}'"
                    raise CelSyntaxError(f"mismatched input {found} expecting IDENTIFIER", npos)
                if self.accept("("):
                    args = self.args(")")
                    if name in _MACROS:
                        if len(args) != 2 and not (name == "map" and len(args) == 3):
                            raise CelSyntaxError(f"{name}() requires 2 arguments", pos)
                        if args[0].op != "ident":
                            raise CelSyntaxError("argument must be a simple name", args[0].pos)
                        node = Node("macro", pos, name, (node, *args))
                    else:
                        node = Node("call", pos, name, (node, *args))
                else:
                    node = Node("select", pos, name, (node,))
            elif kind == "op" and value == "[":
                self.take()
                idx = self.expr()
                self.expect("]")
                node = Node("index", pos, None, (node, idx))
            else:
                return node

    def args(self, close: str) -> tuple[Node, ...]:
        out: list[Node] = []
        if self.accept(close):
            return ()
        kind, _, pos = self.peek()
        if kind == "eof":
            raise CelSyntaxError(
                f"mismatched input '<EOF>' expecting {{'[', '{{', '(', '{close}', '.', '-', '!', 'true', "
                "'false', 'null', NUM_FLOAT, NUM_INT, NUM_UINT, STRING, BYTES, IDENTIFIER}",
                pos,
            )
        while True:
            out.append(self.expr())
            if self.accept(close):
                return tuple(out)
            self.expect(",")

    def primary(self) -> Node:
        kind, value, pos = self.take()
        if kind == "lit":
            return Node("lit", pos, value)
        if kind == "int":
            return Node("lit", pos, value)
        if kind == "uint":
            return Node("lit", pos, value)
        if kind == "ident":
            if value in RESERVED:
                raise CelSyntaxError(f"reserved identifier: {value}", pos)
            if self.accept("("):
                args = self.args(")")
                if value == "has":
                    if len(args) != 1 or args[0].op != "select":
                        raise CelSyntaxError("invalid argument to has() macro", pos)
                    return Node("has", pos, None, args)
                return Node("call", pos, value, (Node("lit", pos, NO_TARGET), *args))
            return Node("ident", pos, value)
        if kind == "op" and value == "(":
            inner = self.expr()
            self.expect(")")
            return inner
        if kind == "op" and value == "[":
            return Node("list", pos, None, self.args("]"))
        if kind == "op" and value == "{":
            items: list[Node] = []
            if not self.accept("}"):
                while True:
                    items.append(self.expr())
                    self.expect(":")
                    items.append(self.expr())
                    if self.accept("}"):
                        break
                    self.expect(",")
            return Node("map", pos, None, tuple(items))
        found = "<EOF>" if kind == "eof" else f"'{value}'"
        raise CelSyntaxError(
            f"mismatched input {found} expecting {{'[', '{{', '(', '.', '-', '!', 'true', 'false', 'null', "
            "NUM_FLOAT, NUM_INT, NUM_UINT, STRING, BYTES, IDENTIFIER}",
            pos,
        )


class _NoTarget:
    """Marks a global function call (``size(x)``) as opposed to a method (``x.size()``)."""


NO_TARGET = _NoTarget()


def parse(text: str) -> Node:
    """Parse ``text`` into an expression tree (raises :class:`CelSyntaxError`)."""
    p = _Parser(text)
    node = p.expr()
    kind, value, pos = p.peek()
    if kind != "eof":
        raise CelSyntaxError(f"extraneous input '{value}' expecting <EOF>", pos)
    return node
