"""The structural-schema completeness rules kube-apiserver enforces on a CRD's schemas.

:func:`causes` names what makes a CRD's schemas non-structural, as upstream reports it: a root
that is not ``type: object``, and properties, ``additionalProperties`` schemas and array items
without a ``type`` (unless ``x-kubernetes-int-or-string``, ``x-kubernetes-preserve-unknown-fields``
or ``x-kubernetes-embedded-resource``). Schemas identical across versions are reported under
``spec.validation.openAPIV3Schema``, others under ``spec.versions[i].schema.openAPIV3Schema``.
"""

from __future__ import annotations

from typing import Any

__all__ = ["causes"]

Cause = dict[str, Any]
_EXEMPT = (
    "x-kubernetes-int-or-string",
    "x-kubernetes-preserve-unknown-fields",
    "x-kubernetes-embedded-resource",
)


def _required(message: str, field: str) -> Cause:
    return {
        "type": "FieldValueRequired",
        "reason": "FieldValueRequired",
        "message": f"Required value: {message}",
        "field": field,
    }


def _walk(schema: Any, path: str, level: str, out: list[Cause]) -> None:
    if not isinstance(schema, dict):
        return
    if level != "root" and not schema.get("type") and not any(schema.get(k) for k in _EXEMPT):
        what = "array items" if level == "item" else "object fields"
        out.append(_required(f"must not be empty for specified {what}", f"{path}.type"))
    props = schema.get("properties")
    if isinstance(props, dict):
        for name in sorted(props):
            _walk(props[name], f"{path}.properties[{name}]", "field", out)
    extra = schema.get("additionalProperties")
    if isinstance(extra, dict):
        _walk(extra, f"{path}.additionalProperties", "field", out)
    items = schema.get("items")
    if isinstance(items, dict):
        _walk(items, f"{path}.items", "item", out)


def _schema_causes(schema: Any, path: str) -> list[Cause]:
    if not isinstance(schema, dict):
        return []
    out: list[Cause] = []
    kind = schema.get("type")
    if not kind:
        out.append(_required("must not be empty at the root", f"{path}.type"))
    elif kind != "object":
        message = f'Invalid value: "{kind}": must be object at the root'
        out.append(
            {
                "type": "FieldValueInvalid",
                "reason": "FieldValueInvalid",
                "message": message,
                "field": f"{path}.type",
            }
        )
    _walk(schema, path, "root", out)
    return out


def causes(spec: Any) -> list[Cause]:
    """The structural-schema causes of a CRD ``spec`` (empty when every schema is structural)."""
    versions = spec.get("versions") if isinstance(spec, dict) else None
    if not isinstance(versions, list):
        return []
    schemas = [
        ((v.get("schema") or {}).get("openAPIV3Schema") if isinstance(v, dict) else None) for v in versions
    ]
    if not any(s is not None for s in schemas):
        return []
    if all(s == schemas[0] for s in schemas):
        return _schema_causes(schemas[0], "spec.validation.openAPIV3Schema")
    out: list[Cause] = []
    for i, schema in enumerate(schemas):
        out.extend(_schema_causes(schema, f"spec.versions[{i}].schema.openAPIV3Schema"))
    return out
