"""Resource quantities (``500m``, ``1Gi``, ``1e3``) as kube-apiserver reads, compares and writes them.

:meth:`Quantity.parse` accepts what the server's JSON decoding of a quantity accepts: a string
(surrounding white space ignored) or a JSON number, and raises ``ValueError`` with the server's
message otherwise. Values are exact decimals, rounded away from zero to a multiple of ``1n``;
``Ki``..``Ei`` values are capped at the largest int64, as the server caps them.

``str(q)`` (also :meth:`Quantity.canonical`) is the text the server writes back for a bare
quantity: the text as given when the server keeps it (``100M``, ``1Ki``, ``1e3``), otherwise the
largest suffix of the quantity's format (decimal SI, binary SI, or decimal exponent, after the
suffix it was written with) that leaves an integer mantissa; binary SI values under ``1Ki`` or
with a fraction are written in decimal SI. The server first rounds each value of a v1 resource
list up to thousandths: :meth:`Quantity.round_up` with ``-3``.

Quantities are immutable, hashable and ordered by value (``1000m == 1``); a sum is exact and
takes the format of its first non-zero term. :meth:`Quantity.value` and
:meth:`Quantity.milli_value` round away from zero and saturate at the int64 bounds.
"""

from __future__ import annotations

from typing import Literal

__all__ = ["Format", "Quantity"]

Format = Literal["DecimalSI", "BinarySI", "DecimalExponent"]

FORMAT_ERROR = "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
SUFFIX_ERROR = "unable to parse quantity's suffix"
NUMERIC_ERROR = "unable to parse numeric part of quantity"

_DIGITS = frozenset("0123456789")
_SUFFIX_CHARS = frozenset("eEinumkKMGTP")
_GO_SPACE = (  # what Go's strings.TrimSpace trims
    "\t\n\v\f\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a"
    "\u2028\u2029\u202f\u205f\u3000"
)
_DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_BINARY = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_DECIMAL_NAMES = {v: k for k, v in _DECIMAL.items()}
_BINARY_NAMES = {v // 10: k for k, v in _BINARY.items()}
_INT64_MAX = (1 << 63) - 1
_NANO = -9


def _suffix(suffix: str) -> tuple[int, int, Format]:
    """(base, exponent, format) of a suffix; ValueError for an unknown one."""
    if suffix in _DECIMAL:
        return 10, _DECIMAL[suffix], "DecimalSI"
    if suffix in _BINARY:
        return 2, _BINARY[suffix], "BinarySI"
    rest = suffix[1:]
    body = rest[1:] if rest[:1] in ("+", "-") else rest
    if suffix[:1] in ("e", "E") and body and all(c in _DIGITS for c in body):
        exponent = int(rest)
        if -(1 << 63) <= exponent <= _INT64_MAX:
            return 10, (exponent + (1 << 31)) % (1 << 32) - (1 << 31), "DecimalExponent"  # int32
    raise ValueError(SUFFIX_ERROR)


def _scan(s: str) -> tuple[bool, str, str, str, bool]:
    """(negative, integer digits without leading zeros, fraction digits, suffix, any digit seen)."""
    n, pos, negative = len(s), 1 if s[0] in "+-" else 0, s[0] == "-"
    start = pos
    while pos < n and s[pos] == "0":
        pos += 1
    if pos == n:
        return negative, "0", "", "", True
    num_start = pos
    while pos < n and s[pos] in _DIGITS:
        pos += 1
    num, denom = s[num_start:pos] or "0", ""
    if pos < n and s[pos] == ".":
        pos += 1
        denom_start = pos
        while pos < n and s[pos] in _DIGITS:
            pos += 1
        denom = s[denom_start:pos]
    seen = any(c in _DIGITS for c in s[start:pos])
    suffix_start = pos
    while pos < n and s[pos] in _SUFFIX_CHARS:
        pos += 1
    if pos < n and s[pos] in "+-":
        pos += 1
    while pos < n and s[pos] in _DIGITS:
        pos += 1
    if pos < n:
        raise ValueError(FORMAT_ERROR)
    return negative, num, denom, s[suffix_start:], seen


def _pow10(n: int) -> int:
    power: int = 10**n
    return power


def _ndigits(n: int) -> int:
    return len(str(abs(n)))


class Quantity:
    """An exact resource quantity, its format, and the text the server would keep for it."""

    __slots__ = ("_digits", "_exp", "_text", "format")
    _digits: int  # value == _digits * 10**_exp, trailing zeros moved into _exp (0 is 0 * 10**0)
    _exp: int
    _text: str | None
    format: Format

    def __init__(self, digits: int, exp: int, format: Format = "DecimalSI", text: str | None = None) -> None:
        """The value ``digits * 10**exp`` (``exp >= -9``) in ``format``; ``text`` is kept as its
        string form, as the server keeps text already in canonical shape."""
        if exp < _NANO:
            raise ValueError(f"quantity exponent {exp} is below the nano scale")
        while digits and digits % 10 == 0:
            digits, exp = digits // 10, exp + 1
        for name, value in (("_digits", digits), ("_exp", exp if digits else 0)):
            object.__setattr__(self, name, value)
        object.__setattr__(self, "_text", text)
        object.__setattr__(self, "format", format)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"Quantity is immutable: cannot set {name}")

    @classmethod
    def parse(cls, text: str | int | float) -> Quantity:
        """The quantity a string or JSON number stands for, as the server decodes it. A float is
        read through its shortest decimal form (``1.5``); ValueError with the server's message
        for bad text, TypeError for anything but a string or number."""
        if isinstance(text, bool):
            s = "true" if text else "false"
        elif isinstance(text, int):
            s = str(text)
        elif isinstance(text, float):
            s = repr(text)
        elif isinstance(text, str):
            s = text.strip(_GO_SPACE)
        else:
            raise TypeError(f"a quantity is a string or a number, not {type(text).__name__}")
        if not s:
            raise ValueError(FORMAT_ERROR)
        if s == "0":
            return cls(0, 0, "DecimalSI", s)
        negative, num, denom, suffix, seen = _scan(s)
        base, exponent, fmt = _suffix(suffix)
        sign = -1 if negative else 1
        # Values the server holds in an int64 keep their text when it is already canonical.
        if fmt == "BinarySI":
            precision = 15 - len(num) - exponent * 3 // 10 - 1 if not denom else -1
            scale, factor = 0, 1 << exponent
        else:
            precision, scale, factor = 18 - len(num) - len(denom), exponent - len(denom), 1
        if precision >= 0 and scale >= _NANO and int(num + denom) * factor <= _INT64_MAX:
            shifted = int(num + denom)
            if fmt == "BinarySI":
                kept = shifted & 7 != 0
            else:
                kept = scale % 3 == 0 and not (num + denom).endswith("000") and num[0] != "0"
            return cls(sign * shifted * factor, scale, fmt, s if kept else None)
        if not seen:
            raise ValueError(NUMERIC_ERROR)
        given = (num + denom).lstrip("0")
        significant = given.rstrip("0")
        exp = (0 if base == 2 else exponent) - len(denom) + len(given) - len(significant)
        if base == 2 and len(given) - len(denom) > 19:  # at least 10**19: over the cap
            magnitude, exp = _INT64_MAX, 0
        else:
            magnitude = int(significant or "0") << (exponent if base == 2 else 0)
        if exp < _NANO and magnitude:  # round up to 1n steps
            drop = _NANO - exp
            if drop > _ndigits(magnitude):
                magnitude, exp = 1, _NANO
            else:
                whole, rest = divmod(magnitude, _pow10(drop))
                magnitude, exp = whole + (1 if rest else 0), _NANO
        if fmt == "BinarySI" and Quantity(magnitude, exp) > _MAX:
            magnitude, exp = _INT64_MAX, 0
        if fmt == "BinarySI" and magnitude > 0 and exp < 0 and magnitude < _pow10(-exp):
            fmt = "DecimalSI"
        return cls(sign * magnitude, exp, fmt)

    def canonical(self) -> str:
        """The text the server writes for this quantity."""
        if self._text is not None:
            return self._text
        digits, exp = self._digits, self._exp
        if not digits:
            return "0"
        fmt = self.format
        if fmt == "BinarySI":
            whole, power = abs(digits) * _pow10(max(exp, 0)), 0
            if exp < 0 or whole < 1024:
                fmt = "DecimalSI"
            else:
                while whole >= 1024 and whole % 1024 == 0:
                    whole, power = whole // 1024, power + 1
                sign = "-" if digits < 0 else ""
                return f"{sign}{whole}{_BINARY_NAMES.get(power, '')}"
        group = exp - exp % 3
        mantissa = digits * _pow10(exp - group)
        if fmt == "DecimalExponent":
            return f"{mantissa}e{group}" if group else str(mantissa)
        return f"{mantissa}{_DECIMAL_NAMES.get(group, '')}"

    def __str__(self) -> str:
        return self.canonical()

    def __repr__(self) -> str:
        return f"Quantity({self.canonical()!r})"

    def _scaled(self, exp: int) -> int:
        """The value in units of ``10**exp``, rounded away from zero, saturated at int64 bounds."""
        digits, shift = self._digits, self._exp - exp
        if not digits:
            return 0
        if shift >= 0:
            if _ndigits(digits) + shift > 19:
                return _INT64_MAX if digits > 0 else -_INT64_MAX - 1
            whole = abs(digits) * _pow10(shift)
        else:
            quotient, rest = divmod(abs(digits), _pow10(-shift))
            whole = quotient + (1 if rest else 0)
        whole = min(whole, _INT64_MAX) if digits > 0 else min(whole, _INT64_MAX + 1)
        return whole if digits > 0 else -whole

    def round_up(self, exp: int) -> Quantity:
        """This quantity rounded away from zero to a multiple of ``10**exp`` (``exp >= -9``), in its
        format; itself, its kept text included, when it already is one. kube-apiserver rounds each
        value of a v1 resource list (requests, limits, quotas, LimitRange bounds) with ``exp=-3``
        before anything else sees it."""
        if not self._digits or self._exp >= exp:
            return self
        quotient, rest = divmod(abs(self._digits), _pow10(exp - self._exp))
        whole = quotient + (1 if rest else 0)
        return Quantity(whole if self._digits > 0 else -whole, exp, self.format)

    def value(self) -> int:
        """The value rounded away from zero to an integer, within int64 (saturated beyond it)."""
        return self._scaled(0)

    def milli_value(self) -> int:
        """The value in thousandths, rounded away from zero, within int64 (saturated beyond it)."""
        return self._scaled(-3)

    def __add__(self, other: Quantity) -> Quantity:
        if not isinstance(other, Quantity):
            return NotImplemented
        exp = min(self._exp, other._exp)
        total = self._digits * _pow10(self._exp - exp) + other._digits * _pow10(other._exp - exp)
        return Quantity(total, exp, self.format if self._digits else other.format)

    def _cmp(self, other: Quantity) -> int:
        a, b = self._digits, other._digits
        if (a > 0) != (b > 0) or not a or not b:
            return (a > b) - (a < b)
        length_a, length_b = _ndigits(a) + self._exp, _ndigits(b) + other._exp
        if length_a != length_b:
            bigger = length_a > length_b
            return 1 if bigger == (a > 0) else -1
        exp = min(self._exp, other._exp)
        x, y = a * _pow10(self._exp - exp), b * _pow10(other._exp - exp)
        return (x > y) - (x < y)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Quantity):
            return NotImplemented
        return (self._digits, self._exp) == (other._digits, other._exp)

    def __hash__(self) -> int:
        return hash((self._digits, self._exp))

    def __lt__(self, other: Quantity) -> bool:
        return self._cmp(other) < 0

    def __le__(self, other: Quantity) -> bool:
        return self._cmp(other) <= 0

    def __gt__(self, other: Quantity) -> bool:
        return self._cmp(other) > 0

    def __ge__(self, other: Quantity) -> bool:
        return self._cmp(other) >= 0


_MAX = Quantity(_INT64_MAX, 0)
