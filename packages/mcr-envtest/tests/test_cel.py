"""The CEL subset mcr-envtest evaluates for CRD validation rules (pure: no server)."""

from __future__ import annotations

from typing import Any

import pytest

from mcr_envtest.cel.evaluator import evaluate
from mcr_envtest.cel.parser import CelEvalError, CelSyntaxError, CelUnsupported, parse

SELF = {"min": 1, "max": 3, "name": "w-abc", "tags": ["ab", "cd"], "labels": {"a": "x"}, "ratio": 0.5}


@pytest.mark.parametrize(
    ("expr", "value"),
    [
        ("self.min <= self.max", True),
        ("self.min + self.max * 2 - 1 == 6", True),
        ("7 / 2 == 3 && -7 / 2 == -3 && -7 % 3 == -1 && 7 % -3 == 1", True),
        ("self.ratio * 2.0 == 1.0 && self.ratio < self.min", True),
        ("size(self.tags) == 2 && self.tags.size() == 2 && size(self.name) == 5", True),
        ("has(self.labels) && !has(self.missing)", True),
        ("has(self.missing) ? self.missing > 1 : self.min == 1", True),
        ("self.name.startsWith('w-') && self.name.endsWith('c') && self.name.contains('ab')", True),
        ("self.name.matches('^w-[a-z]+$') && !self.name.matches('[0-9]')", True),
        ("self.tags.all(t, t.size() == 2) && self.tags.exists(t, t == 'cd')", True),
        ("self.tags.exists_one(t, t.startsWith('a'))", True),
        ("self.tags.map(t, t + '!') == ['ab!', 'cd!']", True),
        ("self.tags.filter(t, t != 'ab') == ['cd']", True),
        ("self.labels.all(k, k == 'a') && 'a' in self.labels && !('b' in self.labels)", True),
        ("'cd' in self.tags && self.tags[1] == 'cd' && self.labels['a'] == 'x'", True),
        ("[1, 2] + [3] == [1, 2, 3] && {'k': 1}.k == 1", True),
        ("self.name.upperAscii() == 'W-ABC' && ' x '.trim() == 'x' && 'a,b'.split(',') == ['a', 'b']", True),
        ("'abc'.substring(1) == 'bc' && 'abc'.indexOf('c') == 2 && ['a', 'b'].join('-') == 'a-b'", True),
        ("int('42') == 42 && string(42) == '42' && double(1) == 1.0 && string(true) == 'true'", True),
        ("self == oldSelf", False),
        ("false && self.nope == 1", False),
        ("true || self.nope == 1", True),
        ("self.nope == 1 || true", True),
        ("r'\\d' == '\\\\d' && '\\u0041' == 'A' && \"\"\"x\"\"\" == 'x'", True),
        ("0x10 == 16 && 3u == 3", True),
    ],
)
def test_expressions(expr: str, value: Any) -> None:
    assert evaluate(parse(expr), {"self": SELF, "oldSelf": {**SELF, "min": 0}}) == value


@pytest.mark.parametrize(
    ("expr", "error"),
    [
        ("self.nope > 1", "no such key: nope"),
        ("self.tags[5] == 'x'", "index out of bounds: 5"),
        ("self.min / 0 == 1", "division by zero"),
        ("9223372036854775807 + 1 > 0", "integer overflow"),
        ("self.min + 'a' == 1", "no such overload: _+_(int, string)"),
        ("self.name < 1", "no such overload: _<_(string, int)"),
        ("self.name.startsWith(1)", "no such overload: startsWith(string, int)"),
    ],
)
def test_runtime_errors(expr: str, error: str) -> None:
    with pytest.raises(CelEvalError) as info:
        evaluate(parse(expr), {"self": SELF})
    assert info.value.message == error


@pytest.mark.parametrize(
    ("expr", "pos"), [("self.nope(", 10), ("self.", 5), ("1 +", 3), ("a b", 2), ("(1", 2)]
)
def test_syntax_errors_carry_their_position(expr: str, pos: int) -> None:
    with pytest.raises(CelSyntaxError) as info:
        parse(expr)
    assert info.value.pos == pos


def test_unimplemented_cel_is_never_taken_for_a_pass() -> None:
    with pytest.raises(CelUnsupported):
        evaluate(parse("quantity(self.q).isGreaterThan(quantity('1'))"), {"self": {"q": "2"}})
    with pytest.raises(CelUnsupported):
        parse("self.?x")
    with pytest.raises(CelUnsupported):
        evaluate(parse("self.tags.isSorted()"), {"self": SELF})
