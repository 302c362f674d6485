"""``x-kubernetes-validations`` of CRD schemas as kube-apiserver applies them.

:func:`crd_causes` checks a CRD's rules when the CRD is written (a rule that does not parse, names
a field its schema does not declare, mixes types in arithmetic or is not a boolean is a 422 on the
CRD, worded as upstream words it); :func:`unsupported` lists rules this evaluator cannot run, for
the writer to warn about. :func:`causes` evaluates the rules on a write of a custom resource:
each rule sees ``self`` (the value at its schema node) and, on an update, ``oldSelf`` (the
correlated old value; rules using ``oldSelf`` are skipped on create and where no old value
correlates), and each failure becomes a Status cause with the rule's ``message``,
``messageExpression``, ``reason`` and ``fieldPath``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from .evaluator import SUPPORTED_FUNCTIONS, SUPPORTED_METHODS, evaluate
from .parser import NO_TARGET, CelError, CelEvalError, CelSyntaxError, CelUnsupported, Node, parse

__all__ = ["after_schema", "causes", "crd_causes", "unsupported"]

Schema = dict[str, Any]
_REASONS = {
    "FieldValueInvalid": "Invalid value",
    "FieldValueForbidden": "Forbidden",
    "FieldValueRequired": "Required value",
    "FieldValueDuplicate": "Duplicate value",
}


def _cause(kind: str, message: str, field: str) -> dict[str, Any]:
    return {"type": kind, "reason": kind, "message": message, "field": field}


def _go_json(value: Any) -> str:
    """JSON as Go's encoder writes it (``<``, ``>``, ``&`` escaped)."""
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _go_value(value: Any) -> str:
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


# ------------------------------------------------------------------ schema walking
def _nodes(schema: Any, path: str) -> Iterator[tuple[Schema, str]]:
    """Every schema node under ``schema`` with its upstream path (``properties[spec].items``)."""
    if not isinstance(schema, dict):
        return
    yield schema, path
    for key, sub in (schema.get("properties") or {}).items():
        yield from _nodes(sub, f"{path}.properties[{key}]")
    if isinstance(schema.get("items"), dict):
        yield from _nodes(schema["items"], f"{path}.items")
    if isinstance(schema.get("additionalProperties"), dict):
        yield from _nodes(schema["additionalProperties"], f"{path}.additionalProperties")


def _schema_paths(crd: dict[str, Any]) -> Iterator[tuple[Schema, str]]:
    spec = crd.get("spec") or {}
    versions = [v for v in spec.get("versions") or [] if isinstance(v, dict)]
    schemas = [((v.get("schema") or {}).get("openAPIV3Schema")) for v in versions]
    # upstream reports a schema all versions share under spec.validation (its internal form)
    if schemas and all(s == schemas[0] for s in schemas):
        if isinstance(schemas[0], dict):
            yield schemas[0], "spec.validation.openAPIV3Schema"
        return
    for i, sch in enumerate(schemas):
        if isinstance(sch, dict):
            yield sch, f"spec.versions[{i}].schema.openAPIV3Schema"


def _rules(schema: Schema) -> list[dict[str, Any]]:
    rules = schema.get("x-kubernetes-validations")
    return [r for r in rules if isinstance(r, dict)] if isinstance(rules, list) else []


# ------------------------------------------------------------------ compile-time checks
class _CompileError(CelError):
    pass


_SCALARS = {"integer": "int", "number": "double", "string": "string", "boolean": "bool"}


def _static(node: Node, scopes: dict[str, Schema | None]) -> tuple[str, Schema | None]:
    """(CEL type or ``dyn``, schema when known) of ``node``; raises for undeclared fields and
    arithmetic over mismatched known types."""
    op = node.op
    if op == "lit":
        v = node.value
        kind = (
            "null"
            if v is None
            else {bool: "bool", int: "int", float: "double", str: "string"}.get(type(v), "dyn")
        )
        return kind, None
    if op == "ident":
        sch = scopes.get(node.value)
        return _schema_type(sch), sch
    if op in ("select", "has"):
        sel = node if op == "select" else node.args[0]
        _, parent = _static(sel.args[0], scopes)
        sub = _field_schema(parent, sel, sel.value)
        return ("bool", None) if op == "has" else (_schema_type(sub), sub)
    if op == "binary":
        (lt, _), (rt, _) = _static(node.args[0], scopes), _static(node.args[1], scopes)
        sym = node.value
        if sym in ("+", "-", "*", "/", "%", "<", "<=", ">", ">="):
            known = "dyn" not in (lt, rt) and "null" not in (lt, rt)
            if known and lt != rt:
                raise _CompileError(
                    f"found no matching overload for '_{sym}_' applied to '({lt}, {rt})'", node.pos
                )
            if sym in ("+", "-", "*", "/", "%"):
                return (lt if known else "dyn"), None
        return "bool", None
    if op in ("and", "or"):
        for arg in node.args:
            _static(arg, scopes)
        return "bool", None
    if op == "unary":
        t, _ = _static(node.args[0], scopes)
        return ("bool" if node.value == "!" else t), None
    if op == "cond":
        _static(node.args[0], scopes)
        (yt, ys), (nt, _) = _static(node.args[1], scopes), _static(node.args[2], scopes)
        return (yt if yt == nt else "dyn"), ys
    if op == "macro":
        target_t, target = _static(node.args[0], scopes)
        elem = None
        if isinstance(target, dict):
            elem = target.get("items") if target_t == "list" else {"type": "string"}
        inner = {**scopes, node.args[1].value: elem if isinstance(elem, dict) else None}
        for body in node.args[2:]:
            _static(body, inner)
        return ("list" if node.value in ("map", "filter") else "bool"), None
    for arg in node.args:
        if not (arg.op == "lit" and arg.value is NO_TARGET):
            _static(arg, scopes)
    if op == "call" and node.value in ("size", "int", "indexOf", "lastIndexOf"):
        return "int", None
    if op == "call" and node.value in ("startsWith", "endsWith", "contains", "matches"):
        return "bool", None
    if op == "list":
        return "list", None
    return "dyn", None


def _schema_type(schema: Schema | None) -> str:
    if not isinstance(schema, dict) or schema.get("x-kubernetes-int-or-string"):
        return "dyn"
    t = schema.get("type")
    if t == "array":
        return "list"
    if t == "object":
        return "map"
    return _SCALARS.get(str(t), "dyn")


def _field_schema(parent: Schema | None, node: Node, name: str) -> Schema | None:
    if not isinstance(parent, dict):
        return None
    props = parent.get("properties")
    if isinstance(props, dict) and name in props:
        return props[name] if isinstance(props[name], dict) else None
    if isinstance(parent.get("additionalProperties"), dict):
        return dict(parent["additionalProperties"])
    if isinstance(props, dict) and not parent.get("x-kubernetes-preserve-unknown-fields"):
        raise _CompileError(f"undefined field '{name}'", node.pos)
    return None


def _unsupported_in(node: Node) -> str | None:
    """The first function (in reading order) ``node`` calls that the evaluator lacks."""
    for arg in node.args:
        found = _unsupported_in(arg)
        if found:
            return found
    if node.op == "call":
        target = node.args[0]
        is_global = target.op == "lit" and target.value is NO_TARGET
        if node.value not in (SUPPORTED_FUNCTIONS if is_global else SUPPORTED_METHODS):
            return f"function '{node.value}'"
    return None


def _compile(rule: str, scopes: dict[str, Schema | None]) -> str | None:
    """None when ``rule`` compiles, else upstream's error text (without the rule JSON)."""
    try:
        node = parse(rule)
        if _unsupported_in(node) is not None:
            return None
        kind, _ = _static(node, scopes)
    except CelUnsupported:
        return None
    except (CelSyntaxError, _CompileError) as exc:
        what = "Syntax error: " if isinstance(exc, CelSyntaxError) else ""
        line_start = rule.rfind("\n", 0, exc.pos) + 1
        line = rule.count("\n", 0, exc.pos) + 1
        column = exc.pos - line_start
        text_line = rule.split("\n")[line - 1]
        caret = "." * column + "^"
        where = f"<input>:{line}:{column + 1}"
        return f"compilation failed: ERROR: {where}: {what}{exc.message}\n | {text_line}\n | {caret}"
    if kind not in ("bool", "dyn"):
        return "cel expression must evaluate to a bool"
    return None


def _rule_json(rule: dict[str, Any]) -> str:
    return _go_json(
        {
            "Rule": rule.get("rule", ""),
            "Message": rule.get("message", ""),
            "MessageExpression": rule.get("messageExpression", ""),
            "Reason": rule.get("reason"),
            "FieldPath": rule.get("fieldPath", ""),
            "OptionalOldSelf": rule.get("optionalOldSelf"),
        }
    )


def crd_causes(crd: dict[str, Any]) -> list[dict[str, Any]]:
    """Causes for the rules of a CRD that kube-apiserver refuses to compile."""
    out: list[dict[str, Any]] = []
    for root, root_path in _schema_paths(crd):
        for schema, path in _nodes(root, root_path):
            for i, rule in enumerate(_rules(schema)):
                text = rule.get("rule")
                field = f"{path}.x-kubernetes-validations[{i}].rule"
                if not isinstance(text, str) or not text.strip():
                    out.append(_cause("FieldValueRequired", "Required value", field))
                    continue
                error = _compile(text, {"self": schema, "oldSelf": schema})
                if error is not None:
                    out.append(
                        _cause("FieldValueInvalid", f"Invalid value: {_rule_json(rule)}: {error}", field)
                    )
    return out


def unsupported_expression(expression: str) -> str | None:
    """What of ``expression`` this evaluator cannot run (None when it can, or when it does not
    parse: that is an evaluation error of its own)."""
    try:
        return _unsupported_in(parse(expression))
    except CelUnsupported as exc:
        return exc.message
    except CelError:
        return None


def unsupported(crd: dict[str, Any]) -> list[str]:
    """One line per rule of ``crd`` this evaluator cannot run (it is then not enforced)."""
    out: list[str] = []
    for root, root_path in _schema_paths(crd):
        for schema, path in _nodes(root, root_path):
            for i, rule in enumerate(_rules(schema)):
                why: str | None
                try:
                    why = _unsupported_in(parse(str(rule.get("rule", ""))))
                except CelUnsupported as exc:
                    why = exc.message
                except CelError:
                    continue
                if why is None and rule.get("optionalOldSelf"):
                    why = "optionalOldSelf"
                if why is not None:
                    out.append(f"{path}.x-kubernetes-validations[{i}]: {why} is not supported by mcr-envtest")
    return out


# ------------------------------------------------------------------ enforcement
_MISSING = object()


def _uses_old_self(node: Node) -> bool:
    return (node.op == "ident" and node.value == "oldSelf") or any(_uses_old_self(a) for a in node.args)


def _failure(
    rule: dict[str, Any], schema: Schema, value: Any, old: Any, path: str, env: dict[str, Any]
) -> dict[str, Any]:
    message = rule.get("message") if isinstance(rule.get("message"), str) and rule.get("message") else None
    expression = rule.get("messageExpression")
    if isinstance(expression, str) and expression:
        try:
            text = evaluate(parse(expression), env)
            if isinstance(text, str) and text.strip():
                message = text
        except CelError:
            pass
    message = message or f"failed rule: {rule.get('rule')}"
    field_path = rule.get("fieldPath")
    field = path + (field_path if isinstance(field_path, str) and field_path.startswith((".", "[")) else "")
    reason = rule.get("reason") if rule.get("reason") in _REASONS else "FieldValueInvalid"
    word = _REASONS[str(reason)]
    if reason == "FieldValueInvalid" or reason == "FieldValueDuplicate":
        scalar = not isinstance(value, dict | list)
        shown = f"{_go_value(value)}: " if scalar and value is not None else ""
        return _cause(str(reason), f"{word}: {shown}{message}", field)
    return _cause(str(reason), f"{word}: {message}", field)


def _check(schema: Schema, value: Any, old: Any, path: str, out: list[dict[str, Any]]) -> None:
    for rule in _rules(schema):
        text = rule.get("rule")
        if not isinstance(text, str) or rule.get("optionalOldSelf"):
            continue
        try:
            node = parse(text)
        except CelError:
            continue  # refused when the CRD was written, or reported there as not supported
        transition = _uses_old_self(node)
        if transition and old is _MISSING:
            continue
        env = {"self": value, **({"oldSelf": old} if transition else {})}
        try:
            result = evaluate(node, env)
        except CelUnsupported:
            continue
        except CelEvalError as exc:
            what = rule.get("message") or text
            kind = str(schema.get("type") or "object")
            out.append(
                _cause(
                    "FieldValueInvalid",
                    f'Invalid value: "{kind}": {exc.message} evaluating rule: {what}',
                    path,
                )
            )
            continue
        if result is not True:
            out.append(_failure(rule, schema, value, old, path, env))


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _walk(schema: Any, value: Any, old: Any, path: str, out: list[dict[str, Any]]) -> None:
    if not isinstance(schema, dict) or value is None:
        return
    _check(schema, value, old, path, out)
    if isinstance(value, dict):
        props = schema.get("properties")
        addl = schema.get("additionalProperties")
        old_map = old if isinstance(old, dict) else {}
        for key, sub in value.items():
            sub_schema = props.get(key) if isinstance(props, dict) else None
            sub_path = _join(path, key)
            if sub_schema is None and isinstance(addl, dict):
                sub_schema, sub_path = addl, f"{path}[{key}]"
            _walk(sub_schema, sub, old_map.get(key, _MISSING), sub_path, out)
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        items = schema["items"]
        keys = (
            schema.get("x-kubernetes-list-map-keys")
            if schema.get("x-kubernetes-list-type") == "map"
            else None
        )
        old_by_key: dict[Any, Any] = {}
        if isinstance(keys, list) and isinstance(old, list):
            for item in old:
                if isinstance(item, dict):
                    old_by_key[tuple(json.dumps(item.get(k)) for k in keys)] = item
        for i, item in enumerate(value):
            prior: Any = _MISSING
            if isinstance(keys, list) and isinstance(item, dict):
                prior = old_by_key.get(tuple(json.dumps(item.get(k)) for k in keys), _MISSING)
            _walk(items, item, prior, f"{path}[{i}]", out)


def causes(schema: Schema | None, obj: dict[str, Any], old: dict[str, Any] | None) -> list[dict[str, Any]]:
    """Causes for the rules ``obj`` (a custom resource; ``old`` its stored form on an update)
    fails under its version's ``schema``. Rules this evaluator cannot run are skipped (they were
    reported when the CRD was written)."""
    if not isinstance(schema, dict):
        return []
    out: list[dict[str, Any]] = []

    def visible(o: dict[str, Any]) -> dict[str, Any]:
        meta = o.get("metadata") or {}
        return {**o, "metadata": {k: meta[k] for k in ("name", "generateName") if k in meta}}

    _walk(schema, visible(obj), visible(old) if old is not None else _MISSING, "", out)
    return out


# Schema errors after which kube-apiserver runs no rule (values may not have their declared types).
_BLOCKING = frozenset(
    {
        "FieldValueNotSupported",
        "FieldValueRequired",
        "FieldValueTooLong",
        "FieldValueTooMany",
        "FieldValueTypeInvalid",
    }
)
NOT_CHECKED = (
    "Invalid value: null: some validation rules were not checked because the object was invalid; correct the "
    "existing errors to complete validation"
)


def after_schema(
    schema: Schema | None, obj: dict[str, Any], old: dict[str, Any] | None, found: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """The rule causes to add to the schema causes ``found``: the rules' own when no schema
    error blocks them, else (when the schema has rules) kube-apiserver's single "some
    validation rules were not checked" cause."""
    if not any(c.get("type") in _BLOCKING for c in found):
        return causes(schema, obj, old)
    if any(_rules(node) for node, _ in _nodes(schema, "")):
        return [_cause("FieldValueInvalid", NOT_CHECKED, "<nil>")]
    return []
