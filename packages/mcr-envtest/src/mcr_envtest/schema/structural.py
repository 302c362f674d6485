"""A CRD version's schema and the rewrites it drives: pruning unknown fields and structural
defaulting of custom resources.

Upstream's apiextensions server drops every field a CRD's structural schema does not declare
(unless ``x-kubernetes-preserve-unknown-fields`` keeps it) and fills in ``default`` values for
missing properties of objects that are present (F27). ``metadata``, ``apiVersion`` and ``kind``
are never touched here.
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any

from . import builtin

if TYPE_CHECKING:
    from mcr_envtest.resources import ResourceInfo

__all__ = ["apply_defaults", "crd_version_schema", "prune_unknown", "undeclared_field"]

_ENVELOPE = ("apiVersion", "kind", "metadata")


def crd_version_schema(crd: dict[str, Any], version: str) -> dict[str, Any] | None:
    """Return the ``openAPIV3Schema`` of one version of a CRD, or None when it declares none."""
    spec = crd.get("spec") or {}
    for v in spec.get("versions") or []:
        if v.get("name") == version:
            schema = (v.get("schema") or {}).get("openAPIV3Schema")
            if isinstance(schema, dict):
                return schema
            top = (spec.get("validation") or {}).get("openAPIV3Schema")
            return top if isinstance(top, dict) else None
    return None


def _crd_schema(info: ResourceInfo) -> dict[str, Any] | None:
    return crd_version_schema(info.crd, info.version) if info.crd is not None else None


def prune_unknown(info: ResourceInfo, obj: dict[str, Any]) -> dict[str, Any]:
    """Return ``obj`` without the fields its CRD schema does not declare (a new dict; ``obj`` is
    not modified). Built-ins and CRDs without a schema are returned unchanged (same object)."""
    schema = _crd_schema(info)
    if schema is None:
        return obj
    out = {k: v for k, v in obj.items() if k in _ENVELOPE}
    body = _prune(
        {**schema, "properties": dict(schema.get("properties") or {})},
        {k: v for k, v in obj.items() if k not in _ENVELOPE},
    )
    if isinstance(body, dict):
        out.update(body)
    return out


def undeclared_field(info: ResourceInfo, obj: dict[str, Any]) -> str | None:
    """The path (``.spec.x``) of the first field of ``obj`` its CRD schema does not declare and
    does not preserve, or None (always None for built-ins and CRDs without a schema)."""
    schema = _crd_schema(info)
    if schema is None:
        return None
    body = {k: v for k, v in obj.items() if k not in _ENVELOPE}
    return _undeclared({**schema, "properties": dict(schema.get("properties") or {})}, body, "")


def _undeclared(schema: dict[str, Any], value: Any, path: str) -> str | None:
    schema = builtin.resolve(schema)
    if isinstance(value, dict):
        props = schema.get("properties")
        addl = schema.get("additionalProperties")
        keep_all = bool(schema.get("x-kubernetes-preserve-unknown-fields")) or addl is True
        for key, sub in value.items():
            if isinstance(props, dict) and isinstance(props.get(key), dict):
                found = _undeclared(props[key], sub, f"{path}.{key}")
            elif isinstance(addl, dict):
                found = _undeclared(addl, sub, f"{path}.{key}")
            elif keep_all or (schema.get("x-kubernetes-embedded-resource") and key in _ENVELOPE):
                found = None
            else:
                found = f"{path}.{key}"
            if found is not None:
                return found
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for item in value:
            found = _undeclared(schema["items"], item, path)
            if found is not None:
                return found
    return None


def _prune(schema: dict[str, Any], value: Any) -> Any:
    schema = builtin.resolve(schema)
    if isinstance(value, dict):
        props = schema.get("properties")
        addl = schema.get("additionalProperties")
        keep_all = bool(schema.get("x-kubernetes-preserve-unknown-fields")) or addl is True
        out: dict[str, Any] = {}
        for key, sub in value.items():
            if isinstance(props, dict) and isinstance(props.get(key), dict):
                out[key] = _prune(props[key], sub)
            elif isinstance(addl, dict):
                out[key] = _prune(addl, sub)
            elif keep_all or (schema.get("x-kubernetes-embedded-resource") and key in _ENVELOPE):
                out[key] = sub
        return out
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        return [_prune(schema["items"], item) for item in value]
    return value


def apply_defaults(info: ResourceInfo, obj: dict[str, Any]) -> dict[str, Any]:
    """Return ``obj`` with its CRD schema's ``default`` values filled in where a property is
    missing and its parent object exists (a new dict; ``obj`` is not modified). Built-ins and
    CRDs without a schema are returned unchanged (same object)."""
    schema = _crd_schema(info)
    if schema is None:
        return obj
    out = copy.deepcopy(obj)
    _default(schema, out, top=True)
    return out


def _default(schema: dict[str, Any], value: Any, *, top: bool = False) -> None:
    schema = builtin.resolve(schema)
    if isinstance(value, dict):
        props = schema.get("properties")
        if isinstance(props, dict):
            for key, sub in props.items():
                if (top and key in _ENVELOPE) or not isinstance(sub, dict):
                    continue
                if key not in value and "default" in sub:
                    value[key] = copy.deepcopy(sub["default"])
                if key in value:
                    _default(sub, value[key])
        addl = schema.get("additionalProperties")
        if isinstance(addl, dict):
            for key in value:
                if not (isinstance(props, dict) and key in props):
                    _default(addl, value[key])
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for item in value:
            _default(schema["items"], item)
