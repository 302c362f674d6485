"""JSON syntax errors in the words of Go's ``encoding/json``, which kube-apiserver quotes.

:func:`syntax_error` scans a document as Go's scanner does and returns its message for the first
fault (``invalid character 'n' looking for beginning of object key string``, ``unexpected end of
JSON input``), or None for well-formed JSON.
"""

from __future__ import annotations

__all__ = ["quote_char", "syntax_error"]

_SPACE = b" \t\r\n"
_DIGITS = b"0123456789"
_HEX = b"0123456789abcdefABCDEF"
_END = "unexpected end of JSON input"


def quote_char(c: int) -> str:
    """A byte as Go's scanner quotes it in errors (``'x'``, ``'\\''``, ``'\\n'``, ``'\\u009e'``)."""
    if c == ord("'"):
        return "'\\''"
    if c == ord('"'):
        return "'\"'"
    if c == ord("\\"):
        return "'\\\\'"
    named = {7: "a", 8: "b", 12: "f", 10: "n", 13: "r", 9: "t", 11: "v"}
    if c in named:
        return f"'\\{named[c]}'"
    if c < 0x20 or c == 0x7F:
        return f"'\\x{c:02x}'"
    ch = chr(c)
    return f"'{ch}'" if ch.isprintable() else f"'\\u{c:04x}'"


class _Fault(Exception):
    pass


class _Scanner:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.i = 0

    def fail(self, context: str) -> _Fault:
        if self.i >= len(self.data):
            return _Fault(_END)
        return _Fault(f"invalid character {quote_char(self.data[self.i])} {context}")

    def peek(self) -> int | None:
        return self.data[self.i] if self.i < len(self.data) else None

    def space(self) -> None:
        while self.i < len(self.data) and self.data[self.i] in _SPACE:
            self.i += 1

    def value(self) -> None:
        self.space()
        c = self.peek()
        if c == ord("{"):
            self.i += 1
            self.obj()
        elif c == ord("["):
            self.i += 1
            self.array()
        elif c == ord('"'):
            self.i += 1
            self.string()
        elif c is not None and (c == ord("-") or c in _DIGITS):
            self.number()
        elif c is not None and c in b"tfn":
            word = {ord("t"): b"true", ord("f"): b"false", ord("n"): b"null"}[c]
            for want in word:
                if self.peek() != want:
                    raise self.fail(f"in literal {word.decode()} (expecting {quote_char(want)})")
                self.i += 1
        else:
            raise self.fail("looking for beginning of value")

    def obj(self) -> None:
        self.space()
        if self.peek() == ord("}"):
            self.i += 1
            return
        while True:
            self.space()
            if self.peek() != ord('"'):
                raise self.fail("looking for beginning of object key string")
            self.i += 1
            self.string()
            self.space()
            if self.peek() != ord(":"):
                raise self.fail("after object key")
            self.i += 1
            self.value()
            self.space()
            c = self.peek()
            if c == ord("}"):
                self.i += 1
                return
            if c != ord(","):
                raise self.fail("after object key:value pair")
            self.i += 1

    def array(self) -> None:
        self.space()
        if self.peek() == ord("]"):
            self.i += 1
            return
        while True:
            self.value()
            self.space()
            c = self.peek()
            if c == ord("]"):
                self.i += 1
                return
            if c != ord(","):
                raise self.fail("after array element")
            self.i += 1

    def string(self) -> None:
        while True:
            c = self.peek()
            if c is None:
                raise self.fail("")
            self.i += 1
            if c == ord('"'):
                return
            if c < 0x20:
                self.i -= 1
                raise self.fail("in string literal")
            if c == ord("\\"):
                e = self.peek()
                if e is None or e not in b'"\\/bfnrtu':
                    raise self.fail("in string escape code")
                self.i += 1
                if e == ord("u"):
                    for _ in range(4):
                        h = self.peek()
                        if h is None or h not in _HEX:
                            raise self.fail("in \\u hexadecimal character escape")
                        self.i += 1

    def digits(self, context: str, *, first: bool = True) -> None:
        c = self.peek()
        if first and (c is None or c not in _DIGITS):
            raise self.fail(context)
        while self.i < len(self.data) and self.data[self.i] in _DIGITS:
            self.i += 1

    def number(self) -> None:
        if self.peek() == ord("-"):
            self.i += 1
        c = self.peek()
        if c == ord("0"):
            self.i += 1
        else:
            self.digits("in numeric literal")
        if self.peek() == ord("."):
            self.i += 1
            self.digits("after decimal point in numeric literal")
        if self.peek() in (ord("e"), ord("E")):
            self.i += 1
            if self.peek() in (ord("+"), ord("-")):
                self.i += 1
            self.digits("in exponent of numeric literal")


def syntax_error(data: bytes) -> str | None:
    """Go's message for the first syntax fault of ``data``, or None when it is valid JSON."""
    scanner = _Scanner(data)
    try:
        scanner.value()
        scanner.space()
        if scanner.peek() is not None:
            raise scanner.fail("after top-level value")
    except _Fault as fault:
        return str(fault)
    return None
