"""Evaluation of a parsed CEL expression over JSON values (``dict``, ``list``, ``str``, ``int``,
``float``, ``bool``, ``None``), with CEL's semantics for the subset :mod:`.parser` accepts:
64-bit integer overflow and division by zero are errors, ``&&`` and ``||`` absorb an error on one
side when the other side decides the result, a missing field is ``no such key: <name>``."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from .parser import INT_MAX, INT_MIN, NO_TARGET, CelEvalError, CelUnsupported, Node

__all__ = ["evaluate", "type_name"]

Env = dict[str, Any]


def type_name(value: Any) -> str:
    """CEL's name of a value's type (``int``, ``string``, ``map``, ...)."""
    if value is None:
        return "null_type"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "double"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "list"
    return "map"


def _no_overload(name: str, *values: Any) -> CelEvalError:
    return CelEvalError(f"no such overload: {name}({', '.join(type_name(v) for v in values)})")


def _int(value: int) -> int:
    if not INT_MIN <= value <= INT_MAX:
        raise CelEvalError("integer overflow")
    return value


def _num(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _equal(a: Any, b: Any) -> bool:
    if _num(a) and _num(b):
        return bool(a == b)
    if type_name(a) != type_name(b):
        return False
    if isinstance(a, list):
        return len(a) == len(b) and all(_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_equal(a[k], b[k]) for k in a)
    return bool(a == b)


def _compare(op: str, a: Any, b: Any) -> bool:
    comparable = (_num(a) and _num(b)) or (type_name(a) == type_name(b) and type(a) in (str, bool))
    if not comparable:
        raise _no_overload({"<": "_<_", "<=": "_<=_", ">": "_>_", ">=": "_>=_"}[op], a, b)
    return bool({"<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b}[op])


def _arith(op: str, a: Any, b: Any) -> Any:
    if op == "+" and type_name(a) == type_name(b) and isinstance(a, str | list):
        return a + b
    if not (_num(a) and _num(b)) or type(a) is not type(b):
        raise _no_overload(f"_{op}_", a, b)
    if isinstance(a, float):
        if op == "%":
            raise _no_overload("_%_", a, b)
        if op == "/":
            return a / b if b else (float("inf") if a > 0 else float("-inf") if a < 0 else float("nan"))
        return {"+": a + b, "-": a - b, "*": a * b}[op]
    if op in ("/", "%") and b == 0:
        raise CelEvalError("division by zero" if op == "/" else "modulus by zero")
    if op == "/":
        q = abs(a) // abs(b)
        return _int(q if (a >= 0) == (b >= 0) else -q)
    if op == "%":
        r = abs(a) % abs(b)
        return r if a >= 0 else -r
    return _int({"+": a + b, "-": a - b, "*": a * b}[op])


def _select(target: Any, name: str) -> Any:
    if not isinstance(target, dict):
        raise CelEvalError(
            f"no such key: {name}"
            if target is None
            else f"type '{type_name(target)}' does not support field selection"
        )
    if name not in target:
        raise CelEvalError(f"no such key: {name}")
    return target[name]


def _index(target: Any, key: Any) -> Any:
    if isinstance(target, list):
        if not _num(key) or (isinstance(key, float) and not key.is_integer()):
            raise _no_overload("_[_]", target, key)
        i = int(key)
        if not 0 <= i < len(target):
            raise CelEvalError(f"index out of bounds: {i}")
        return target[i]
    if isinstance(target, dict):
        if key not in target:
            raise CelEvalError(f"no such key: {key}")
        return target[key]
    raise _no_overload("_[_]", target, key)


def _size(value: Any) -> int:
    if isinstance(value, str | list | dict):
        return len(value)
    raise _no_overload("size", value)


def _string(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str | int):
        return str(value)
    if isinstance(value, float):
        return repr(value) if not value.is_integer() else f"{int(value)}"
    raise _no_overload("string", value)


def _to_int(value: Any) -> int:
    if isinstance(value, bool) or value is None:
        raise _no_overload("int", value)
    if isinstance(value, int | float):
        return _int(int(value))
    if isinstance(value, str):
        try:
            return _int(int(value))
        except ValueError:
            raise CelEvalError(f"cannot convert {value!r} to int") from None
    raise _no_overload("int", value)


def _strs(name: str, *values: Any) -> None:
    if not all(isinstance(v, str) for v in values):
        raise _no_overload(name, *values)


def _matches(s: Any, pattern: Any) -> bool:
    _strs("matches", s, pattern)
    try:
        return re.search(pattern, s) is not None
    except re.error as exc:
        raise CelEvalError(f"invalid regular expression: {exc}") from None


def _string_method(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    """A method whose receiver and arguments must all be strings."""

    def method(*args: Any) -> Any:
        _strs(name, *args)
        return fn(*args)

    return method


def _ascii(convert: Callable[[str], str]) -> Callable[[str], str]:
    return lambda s: "".join(convert(c) if c.isascii() else c for c in s)


def _substring(s: Any, start: Any, end: Any = None) -> str:
    if not isinstance(s, str) or not _num(start) or not (end is None or _num(end)):
        raise _no_overload("substring", s, start)
    stop = len(s) if end is None else int(end)
    if not 0 <= int(start) <= stop <= len(s):
        raise CelEvalError(f"index out of range: {start}")
    return s[int(start) : stop]


def _join(items: Any, sep: Any = "") -> str:
    if not isinstance(items, list) or not all(isinstance(x, str) for x in items) or not isinstance(sep, str):
        raise _no_overload("join", items)
    return sep.join(items)


def _uint(value: Any) -> int:
    out = _to_int(value)
    if out < 0:
        raise CelEvalError("unsigned integer overflow")
    return out


def _double(value: Any) -> float:
    if _num(value):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            raise CelEvalError(f"cannot convert {value!r} to double") from None
    raise _no_overload("double", value)


def _to_bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if value in ("true", "false"):
        return bool(value == "true")
    raise _no_overload("bool", value)


_METHODS: dict[str, Callable[..., Any]] = {
    "size": _size,
    "matches": _matches,
    "substring": _substring,
    "join": _join,
    "startsWith": _string_method("startsWith", str.startswith),
    "endsWith": _string_method("endsWith", str.endswith),
    "contains": _string_method("contains", lambda s, p: p in s),
    "lowerAscii": _string_method("lowerAscii", _ascii(str.lower)),
    "upperAscii": _string_method("upperAscii", _ascii(str.upper)),
    "trim": _string_method("trim", str.strip),
    "indexOf": _string_method("indexOf", str.find),
    "lastIndexOf": _string_method("lastIndexOf", str.rfind),
    "split": _string_method("split", str.split),
    "replace": _string_method("replace", str.replace),
}
_FUNCTIONS: dict[str, Callable[..., Any]] = {
    "size": _size,
    "matches": _matches,
    "int": _to_int,
    "uint": _uint,
    "double": _double,
    "string": _string,
    "bool": _to_bool,
}
SUPPORTED_FUNCTIONS = frozenset(_FUNCTIONS)
SUPPORTED_METHODS = frozenset(_METHODS)


def evaluate(node: Node, env: Env) -> Any:
    """The value of ``node`` with the variables of ``env`` (raises :class:`CelEvalError`, or
    :class:`CelUnsupported` for a function this module does not implement)."""
    op = node.op
    if op == "lit":
        return node.value
    if op == "ident":
        if node.value not in env:
            raise CelEvalError(f"undeclared reference to '{node.value}'")
        return env[node.value]
    if op == "select":
        return _select(evaluate(node.args[0], env), node.value)
    if op == "index":
        return _index(evaluate(node.args[0], env), evaluate(node.args[1], env))
    if op == "has":
        sel = node.args[0]
        target = evaluate(sel.args[0], env)
        if not isinstance(target, dict):
            raise _no_overload("has", target)
        return sel.value in target
    if op in ("and", "or"):
        decisive = op == "or"
        err: CelEvalError | None = None
        for arg in node.args:
            try:
                value = evaluate(arg, env)
            except CelEvalError as exc:
                err = err or exc
                continue
            if not isinstance(value, bool):
                err = err or _no_overload("_&&_" if op == "and" else "_||_", value)
            elif value is decisive:
                return decisive
        if err is not None:
            raise err
        return not decisive
    if op == "cond":
        test = evaluate(node.args[0], env)
        if not isinstance(test, bool):
            raise _no_overload("_?_:_", test)
        return evaluate(node.args[1] if test else node.args[2], env)
    if op == "unary":
        value = evaluate(node.args[0], env)
        if node.value == "!":
            if not isinstance(value, bool):
                raise _no_overload("!_", value)
            return not value
        if not _num(value):
            raise _no_overload("-_", value)
        return -value if isinstance(value, float) else _int(-value)
    if op == "binary":
        a, b = evaluate(node.args[0], env), evaluate(node.args[1], env)
        sym = node.value
        if sym == "==":
            return _equal(a, b)
        if sym == "!=":
            return not _equal(a, b)
        if sym == "in":
            if isinstance(b, list):
                return any(_equal(a, x) for x in b)
            if isinstance(b, dict):
                return a in b
            raise _no_overload("@in", a, b)
        if sym in ("<", "<=", ">", ">="):
            return _compare(sym, a, b)
        return _arith(sym, a, b)
    if op == "list":
        return [evaluate(a, env) for a in node.args]
    if op == "map":
        items = [evaluate(a, env) for a in node.args]
        return dict(zip(items[::2], items[1::2], strict=True))
    if op == "call":
        return _call(node, env)
    if op == "macro":
        return _macro(node, env)
    raise CelUnsupported(f"unsupported expression {op}", node.pos)


def _call(node: Node, env: Env) -> Any:
    name = node.value
    target_node, *arg_nodes = node.args
    args = [evaluate(a, env) for a in arg_nodes]
    if target_node.op == "lit" and target_node.value is NO_TARGET:
        fn = _FUNCTIONS.get(name)
        if fn is None:
            raise CelUnsupported(f"function '{name}' is not supported", node.pos)
        try:
            return fn(*args)
        except (TypeError, KeyError, ValueError):
            raise _no_overload(name, *args) from None
    method = _METHODS.get(name)
    if method is None:
        raise CelUnsupported(f"function '{name}' is not supported", node.pos)
    target = evaluate(target_node, env)
    try:
        return method(target, *args)
    except (TypeError, KeyError, ValueError, AttributeError):
        raise _no_overload(name, target, *args) from None


def _macro(node: Node, env: Env) -> Any:
    name = node.value
    target_node, var_node, *rest = node.args
    target = evaluate(target_node, env)
    if isinstance(target, dict):
        items = list(target)
    elif isinstance(target, list):
        items = target
    else:
        raise _no_overload(name, target)
    var = var_node.value

    def each(body: Node, item: Any) -> Any:
        return evaluate(body, {**env, var: item})

    if name == "map":
        if len(rest) == 2:
            return [each(rest[1], x) for x in items if _bool(each(rest[0], x), "map")]
        return [each(rest[0], x) for x in items]
    if name == "filter":
        return [x for x in items if _bool(each(rest[0], x), "filter")]
    if name == "exists_one":
        return sum(1 for x in items if _bool(each(rest[0], x), name)) == 1
    decisive = name == "exists"
    err: CelEvalError | None = None
    for x in items:
        try:
            if _bool(each(rest[0], x), name) is decisive:
                return decisive
        except CelEvalError as exc:
            err = err or exc
    if err is not None:
        raise err
    return not decisive


def _bool(value: Any, name: str) -> bool:
    if not isinstance(value, bool):
        raise _no_overload(name, value)
    return value
