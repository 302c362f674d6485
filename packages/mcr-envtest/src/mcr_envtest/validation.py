"""Object validation: names, required fields, schema types and metadata rules, as Status causes.

Every write is checked here before it is stored (F11, F32): one stored object missing a field the
official Python client's models require would break every later list, watch and informer of that
kind. Built-ins are checked against the schemas derived from the ``kubernetes`` models
(:mod:`.schema.builtin`), custom resources against their CRD's ``openAPIV3Schema``.

A cause is ``{"type": T, "reason": T, "message": M, "field": F}``: ``reason`` is the key
upstream's ``StatusCause`` uses on the wire, ``type`` the key the server core reads.
"""

from __future__ import annotations

import datetime as dt
import re
from typing import TYPE_CHECKING, Any

from . import _builtin_rules, crd_structural, limit_rules, object_rules, webhook_rules
from .cel import rules as cel_rules
from .schema import builtin
from .schema.structural import apply_defaults, crd_version_schema, prune_unknown

if TYPE_CHECKING:
    from .resources import Registry, ResourceInfo

__all__ = [
    "apply_defaults",
    "cause",
    "prune_unknown",
    "unknown_fields",
    "validate_labels",
    "validate_name",
    "validate_object",
]

_DNS1123_LABEL = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_SUBDOMAIN = rf"{_DNS1123_LABEL}(\.{_DNS1123_LABEL})*"
_DNS1035_LABEL = "[a-z]([-a-z0-9]*[a-z0-9])?"
_RE_LABEL = re.compile(_DNS1123_LABEL)
_RE_SUBDOMAIN = re.compile(_DNS1123_SUBDOMAIN)
_RE_1035 = re.compile(_DNS1035_LABEL)
_QUALIFIED_NAME = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_RE_QUALIFIED = re.compile(_QUALIFIED_NAME)
_RE_LABEL_VALUE = re.compile(rf"({_QUALIFIED_NAME})?")

_MSG_SUBDOMAIN = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must "
    "start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is "
    f"'{_DNS1123_SUBDOMAIN}')"
)
_MSG_LABEL = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start "
    "and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is "
    f"'{_DNS1123_LABEL}')"
)
_MSG_1035 = (
    "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic "
    "character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for "
    f"validation is '{_DNS1035_LABEL}')"
)

# (group, kind) → name rule; everything else is a DNS-1123 subdomain.
_NAME_RULES: dict[tuple[str, str], str] = {
    ("", "Namespace"): "label",
    ("", "Service"): "dns1035",
    ("rbac.authorization.k8s.io", "Role"): "path",
    ("rbac.authorization.k8s.io", "ClusterRole"): "path",
    ("rbac.authorization.k8s.io", "RoleBinding"): "path",
    ("rbac.authorization.k8s.io", "ClusterRoleBinding"): "path",
    ("apiregistration.k8s.io", "APIService"): "path",  # "<version>.<group>", "v1." for the core group
    ("scheduling.k8s.io", "PriorityClass"): "subdomain",
}


def cause(kind: str, message: str, field: str) -> dict[str, Any]:
    """Return one StatusCause dict (``type`` and ``reason`` both carry ``kind``)."""
    return {"type": kind, "reason": kind, "message": message, "field": field}


def _invalid(value: Any, detail: str, field: str) -> dict[str, Any]:
    return cause("FieldValueInvalid", f"Invalid value: {_go_repr(value)}: {detail}", field)


def _go_repr(value: Any) -> str:
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    return '"' + type(value).__name__ + '"'


def validate_name(info: ResourceInfo, name: str) -> list[dict[str, Any]]:
    """Return the causes that make ``name`` invalid for ``info``'s kind (empty when valid).

    Namespaces need a DNS-1123 label, Services a DNS-1035 label, RBAC objects only a valid path
    segment; every other kind (custom resources included) a DNS-1123 subdomain.
    """
    field = "metadata.name"
    if not name:
        return [cause("FieldValueRequired", "Required value: name or generateName is required", field)]
    rule = _NAME_RULES.get((info.group, info.kind), "subdomain")
    if rule == "path":
        for bad in (".", ".."):
            if name == bad:
                return [_invalid(name, f"may not be '{bad}'", field)]
        return [_invalid(name, f"may not contain '{c}'", field) for c in ("/", "%") if c in name]
    causes: list[dict[str, Any]] = []
    limit = 253 if rule == "subdomain" else 63
    if len(name) > limit:
        causes.append(_invalid(name, f"must be no more than {limit} characters", field))
        if info.group_resource == ("", "namespaces"):  # the kubernetes.io/metadata.name label's value
            causes.append(_invalid(name, "must be no more than 63 bytes", "metadata.labels"))
    regex, msg = {
        "subdomain": (_RE_SUBDOMAIN, _MSG_SUBDOMAIN),
        "label": (_RE_LABEL, _MSG_LABEL),
        "dns1035": (_RE_1035, _MSG_1035),
    }[rule]
    if not regex.fullmatch(name):
        causes.append(_invalid(name, msg, field))
    return causes


def validate_labels(labels: Any, field: str = "metadata.labels") -> list[dict[str, Any]]:
    """Return causes for label keys (qualified names) and values (≤ 63 characters, name-like)."""
    if labels is None:
        return []
    if not isinstance(labels, dict):
        return [_invalid(labels, "must be a map of strings", field)]
    causes: list[dict[str, Any]] = []
    for key, value in labels.items():
        causes.extend(_qualified_name(key, field))
        if not isinstance(value, str):
            causes.append(_invalid(value, "label values must be strings", f"{field}"))
            continue
        if len(value) > 63 or not _RE_LABEL_VALUE.fullmatch(value):
            causes.append(
                _invalid(
                    value,
                    "a valid label must be an empty string or consist of alphanumeric characters, "
                    "'-', '_' or '.', and must start and end with an alphanumeric character (e.g. "
                    "'MyValue',  or 'my_value',  or '12345', regex used for validation is "
                    f"'({_QUALIFIED_NAME})?')",
                    field,
                )
            )
    return causes


def _qualified_name(key: str, field: str) -> list[dict[str, Any]]:
    prefix, slash, name = key.rpartition("/")
    bad: list[str] = []
    if slash and not prefix:
        bad.append("prefix part must be non-empty")
    elif slash and (len(prefix) > 253 or not _RE_SUBDOMAIN.fullmatch(prefix)):
        bad.append("prefix part " + _MSG_SUBDOMAIN)
    if not name or len(name) > 63 or not _RE_QUALIFIED.fullmatch(name):
        bad.append(
            "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end "
            "with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for "
            "validation is "
            f"'{_QUALIFIED_NAME}')"
        )
    return [_invalid(key, b, field) for b in bad]


def _parse_time(value: Any) -> dt.datetime | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        return dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


def _metadata_causes(
    info: ResourceInfo, obj: dict[str, Any], old: dict[str, Any] | None
) -> list[dict[str, Any]]:
    md = obj.get("metadata")
    if not isinstance(md, dict):
        return [cause("FieldValueRequired", "Required value", "metadata")]
    causes = validate_labels(md.get("labels"))
    annotations = md.get("annotations")
    if annotations is not None:
        if not isinstance(annotations, dict) or not all(isinstance(v, str) for v in annotations.values()):
            causes.append(_invalid("map", "annotations must be a map of strings", "metadata.annotations"))
        else:
            for key in annotations:
                causes.extend(_qualified_name(key, "metadata.annotations"))
            if sum(len(k) + len(v) for k, v in annotations.items()) > 256 * 1024:
                causes.append(
                    cause(
                        "FieldValueTooLong",
                        "Too long: may not be more than 262144 bytes",
                        "metadata.annotations",
                    )
                )
    finalizers = md.get("finalizers")
    if finalizers is not None and not (
        isinstance(finalizers, list) and all(isinstance(f, str) for f in finalizers)
    ):
        causes.append(_invalid("list", "finalizers must be a list of strings", "metadata.finalizers"))
    causes.extend(object_rules.owner_reference_causes(md.get("ownerReferences")))
    if old is None:
        return causes
    old_md = old.get("metadata") or {}
    for key in ("name", "namespace", "uid"):
        new_v, old_v = md.get(key), old_md.get(key)
        if key == "uid" and not new_v:
            continue
        if (new_v or "") != (old_v or ""):
            causes.append(
                _invalid(new_v if new_v is not None else "", "field is immutable", f"metadata.{key}")
            )
    new_ct, old_ct = md.get("creationTimestamp"), old_md.get("creationTimestamp")
    if new_ct and old_ct and new_ct != old_ct and _parse_time(new_ct) != _parse_time(old_ct):
        causes.append(_invalid(new_ct, "field is immutable", "metadata.creationTimestamp"))
    if old_md.get("deletionTimestamp") and isinstance(finalizers, list):
        added = [f for f in finalizers if f not in set(old_md.get("finalizers") or [])]
        if added:
            shown = ", ".join(_go_repr(f) for f in added)
            causes.append(
                cause(
                    "FieldValueForbidden",
                    "Forbidden: no new finalizers can be added if the object is being deleted, "
                    f"found new finalizers []string{{{shown}}}",
                    "metadata.finalizers",
                )
            )
    return causes


def validate_object(
    info: ResourceInfo, obj: dict[str, Any], *, old: dict[str, Any] | None, registry: Registry | None
) -> list[dict[str, Any]]:
    """Return the causes that make ``obj`` invalid as a create (``old`` None) or an update.

    Checks metadata rules (immutable name/namespace/uid/creationTimestamp, no new finalizers
    while deleting, label syntax), the required fields and JSON types of the kind's schema, for
    CRDs that ``metadata.name`` is ``<plural>.<group>`` and that their CEL rules compile, and for
    custom resources their CRD's ``x-kubernetes-validations`` rules. Never raises for malformed input: a wrong
    shape is itself reported as a cause. The name itself is checked by :func:`validate_name`.
    """
    causes = _metadata_causes(info, obj, old)
    causes.extend(_data_size_causes(info, obj))
    schema = _schema_for(info)
    if schema is not None:
        body = {k: v for k, v in obj.items() if k not in ("metadata", "apiVersion", "kind")}
        props = dict(schema.get("properties") or {})
        for k in ("metadata", "apiVersion", "kind"):
            props.pop(k, None)
        top = {
            **schema,
            "properties": props,
            "required": [r for r in schema.get("required") or [] if r != "metadata"],
        }
        _walk(top, body, "", causes, custom=info.crd is not None)
    if info.group == "apiextensions.k8s.io" and info.kind == "CustomResourceDefinition":
        causes.extend(_crd_causes(obj))
        causes.extend(cel_rules.crd_causes(obj))
    if info.group_resource in webhook_rules.KINDS:  # upstream's words for the webhooks' fields
        causes = [c for c in causes if not webhook_rules.replaces(c)] + webhook_rules.causes(obj)
    if info.crd is None and info.group_resource == limit_rules.KIND:  # upstream's words for a missing type
        causes = [c for c in causes if not limit_rules.replaces(c)]
    causes.extend(_builtin_rules.causes(info, obj, old))
    if info.group_resource == ("networking.k8s.io", "ingresses"):
        for c in causes:  # upstream says why
            if c.get("field", "").endswith(".pathType") and c.get("message") == "Required value":
                c["message"] = "Required value: pathType must be specified"
    if info.crd is not None and schema is not None:
        causes.extend(cel_rules.after_schema(schema, obj, old, causes))
    return causes


MAX_DATA_BYTES = 1024 * 1024  # upstream's MaxSecretSize, the limit of ConfigMap and Secret data


def _data_size_causes(info: ResourceInfo, obj: dict[str, Any]) -> list[dict[str, Any]]:
    """ConfigMaps and Secrets hold at most 1 MiB of data (values, decoded for binary data)."""
    if info.group or info.plural not in ("configmaps", "secrets"):
        return []
    total = 0
    for key in ("data", "binaryData", "stringData"):
        values = obj.get(key)
        if not isinstance(values, dict):
            continue
        binary = key == "binaryData" or (key == "data" and info.plural == "secrets")
        for v in values.values():
            if isinstance(v, str):
                total += len(v) * 3 // 4 if binary else len(v.encode())
    if total <= MAX_DATA_BYTES:
        return []
    return [cause("FieldValueTooLong", f"Too long: may not be more than {MAX_DATA_BYTES} bytes", "[]")]


def _schema_for(info: ResourceInfo) -> dict[str, Any] | None:
    if info.crd is not None:
        return crd_version_schema(info.crd, info.version)
    if info.model is not None and builtin.model_class(info.model) is not None:
        return builtin.model_schema(info.model)
    return None


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


_TYPE_NAMES = {"object": dict, "array": list, "string": str, "boolean": bool}


def _type_ok(expected: str, value: Any, *, custom: bool) -> bool:
    if expected == "integer":
        return (isinstance(value, int) and not isinstance(value, bool)) or (
            isinstance(value, float) and value.is_integer()
        )
    if expected == "number":
        return isinstance(value, int | float) and not isinstance(value, bool)
    if expected == "string" and not custom:
        # Built-in quantities and similar fields accept JSON numbers (Go's custom unmarshalers do).
        return isinstance(value, str | int | float) and not isinstance(value, bool)
    py = _TYPE_NAMES.get(expected)
    return py is None or isinstance(value, py)


def _walk(
    schema: dict[str, Any], value: Any, path: str, causes: list[dict[str, Any]], *, custom: bool
) -> None:
    schema = builtin.resolve(schema)
    if value is None:
        if custom and not schema.get("nullable") and schema.get("type"):
            causes.append(_invalid("null", f'{path} in body must be of type {schema["type"]}: "null"', path))
        return
    if schema.get("x-kubernetes-int-or-string"):
        if not (isinstance(value, int | str) and not isinstance(value, bool)):
            causes.append(
                _invalid(
                    value,
                    f"{path} in body must be of type integer,string: {_go_repr(type(value).__name__)}",
                    path,
                )
            )
        return
    expected = schema.get("type")
    if isinstance(expected, str) and not _type_ok(expected, value, custom=custom):
        got = (
            "null"
            if value is None
            else {dict: "object", list: "array", bool: "boolean", str: "string"}.get(
                type(value), "number" if isinstance(value, int | float) else "object"
            )
        )
        causes.append(
            cause(
                "FieldValueTypeInvalid",
                f"Invalid value: {_go_repr(got)}: {path} in body must be of type {expected}: {_go_repr(got)}",
                path,
            )
        )
        return
    if custom:
        _constraints(schema, value, path, causes)
        causes.extend(object_rules.duplicate_items(schema, value, path))
    if isinstance(value, dict):
        props = schema.get("properties")
        for req in schema.get("required") or []:
            if value.get(req) is None:
                causes.append(cause("FieldValueRequired", "Required value", _join(path, req)))
        if isinstance(props, dict):
            for key, sub in value.items():
                sub_schema = props.get(key)
                if isinstance(sub_schema, dict):
                    _walk(sub_schema, sub, _join(path, key), causes, custom=custom)
                elif isinstance(schema.get("additionalProperties"), dict):
                    _walk(schema["additionalProperties"], sub, f"{path}[{key}]", causes, custom=custom)
        elif isinstance(schema.get("additionalProperties"), dict):
            for key, sub in value.items():
                _walk(schema["additionalProperties"], sub, f"{path}[{key}]", causes, custom=custom)
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for i, item in enumerate(value):
            _walk(schema["items"], item, f"{path}[{i}]", causes, custom=custom)


def _constraints(schema: dict[str, Any], value: Any, path: str, causes: list[dict[str, Any]]) -> None:
    enum = schema.get("enum")
    if isinstance(enum, list) and value not in enum:
        allowed = ", ".join(_go_repr(e) for e in enum)
        causes.append(
            cause(
                "FieldValueNotSupported",
                f"Unsupported value: {_go_repr(value)}: supported values: {allowed}",
                path,
            )
        )
    if isinstance(value, int | float) and not isinstance(value, bool):
        lo, hi = schema.get("minimum"), schema.get("maximum")
        if isinstance(lo, int | float) and (value < lo or (schema.get("exclusiveMinimum") and value == lo)):
            causes.append(_invalid(value, f"{path} in body should be greater than or equal to {lo}", path))
        if isinstance(hi, int | float) and (value > hi or (schema.get("exclusiveMaximum") and value == hi)):
            causes.append(_invalid(value, f"{path} in body should be less than or equal to {hi}", path))
    if isinstance(value, str):  # upstream reports the first of these a string fails
        pattern = schema.get("pattern")
        if isinstance(schema.get("maxLength"), int) and len(value) > schema["maxLength"]:
            causes.append(
                cause(
                    "FieldValueTooLong", f"Too long: may not be more than {schema['maxLength']} bytes", path
                )
            )
        elif isinstance(schema.get("minLength"), int) and len(value) < schema["minLength"]:
            causes.append(
                _invalid(value, f"{path} in body should be at least {schema['minLength']} chars long", path)
            )
        elif isinstance(pattern, str) and not _matches(pattern, value):
            causes.append(_invalid(value, f"{path} in body should match '{pattern}'", path))
    if isinstance(value, list):
        if isinstance(schema.get("maxItems"), int) and len(value) > schema["maxItems"]:
            causes.append(
                cause(
                    "FieldValueTooMany",
                    f"Too many: {len(value)}: must have at most {schema['maxItems']} items",
                    path,
                )
            )
        if isinstance(schema.get("minItems"), int) and len(value) < schema["minItems"]:
            causes.append(
                _invalid(len(value), f"{path} in body should have at least {schema['minItems']} items", path)
            )


def _matches(pattern: str, value: str) -> bool:
    try:
        return re.search(pattern, value) is not None
    except re.error:
        return True


def _crd_causes(obj: dict[str, Any]) -> list[dict[str, Any]]:
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return []
    causes: list[dict[str, Any]] = []
    names = spec.get("names") or {}
    group = spec.get("group")
    name = (obj.get("metadata") or {}).get("name", "")
    plural = names.get("plural") if isinstance(names, dict) else None
    if isinstance(group, str) and plural and name != f"{plural}.{group}":
        causes.append(_invalid(name, 'must be spec.names.plural+"."+spec.group', "metadata.name"))
    if isinstance(group, str) and "." not in group:
        causes.append(_invalid(group, "should be a domain with at least one dot", "spec.group"))
    scope = spec.get("scope")
    if scope not in ("Namespaced", "Cluster"):
        causes.append(
            cause(
                "FieldValueNotSupported",
                f'Unsupported value: {_go_repr(scope)}: supported values: "Cluster", "Namespaced"',
                "spec.scope",
            )
        )
    versions = spec.get("versions")
    if isinstance(versions, list):
        storage = [v for v in versions if isinstance(v, dict) and v.get("storage")]
        if versions and len(storage) != 1:
            causes.append(
                _invalid(
                    versions and len(storage),
                    "must have exactly one version marked as storage version",
                    "spec.versions",
                )
            )
    return causes + crd_structural.causes(spec)


def unknown_fields(info: ResourceInfo, obj: dict[str, Any]) -> list[str]:
    """Return the paths of fields the kind's schema does not declare (for ``fieldValidation``).

    Paths look like upstream's strict-decoding messages: ``.spec.foo``. Fields under
    ``x-kubernetes-preserve-unknown-fields`` or free-form maps are never unknown. Custom resources
    without a schema report nothing.
    """
    schema = _schema_for(info)
    if schema is None:
        return []
    out: list[str] = []
    _unknown(schema, {k: v for k, v in obj.items() if k not in ("apiVersion", "kind")}, "", out, top=True)
    return out


_NESTED = frozenset(
    {"properties", "items", "additionalProperties", "$ref", "allOf", "x-kubernetes-preserve-unknown-fields"}
)


def _unknown(schema: dict[str, Any], value: Any, path: str, out: list[str], *, top: bool = False) -> None:
    schema = builtin.resolve(schema)
    free = schema.get("x-kubernetes-preserve-unknown-fields") or schema.get("x-kubernetes-int-or-string")
    if free and not isinstance(schema.get("properties"), dict):
        return
    if isinstance(value, dict):
        props = schema.get("properties")
        addl = schema.get("additionalProperties")
        if not props and isinstance(addl, dict) and not addl.keys() & _NESTED:
            return  # a map of scalars (a ConfigMap's data, labels) has no unknown fields
        for key, sub in value.items():
            if top and key == "metadata":
                _unknown(builtin.model_schema("V1ObjectMeta"), sub, ".metadata", out)
                continue
            if isinstance(props, dict) and isinstance(props.get(key), dict):
                _unknown(props[key], sub, f"{path}.{key}", out)
            elif isinstance(addl, dict):
                _unknown(addl, sub, f"{path}.{key}", out)
            elif addl is True or schema.get("x-kubernetes-preserve-unknown-fields"):
                continue
            elif isinstance(props, dict) or schema.get("type") == "object":
                out.append(f"{path}.{key}")
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for i, item in enumerate(value):
            _unknown(schema["items"], item, f"{path}[{i}]", out)
