"""Field rules of built-in kinds that their OpenAPI schemas do not express (required values,
config keys, immutability kube-apiserver's validation adds), as Status causes."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .builtin_validation import RULES as _SPEC_RULES
from .builtin_validation import pod_spec_causes
from .limit_rules import RULES as _LIMIT_RULES
from .object_rules import RULES as _OBJECT_RULES
from .object_rules import secret_type_causes
from .policy_rules import RULES as _POLICY_RULES

if TYPE_CHECKING:
    from .resources import ResourceInfo

__all__ = ["causes"]

Obj = dict[str, Any]
Rule = Callable[[Obj, "Obj | None"], list[dict[str, Any]]]

_CONFIG_KEY = re.compile(r"[-._a-zA-Z0-9]+")
_MSG_CONFIG_KEY = (
    "a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or "
    "'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')"
)
_IMMUTABLE_SET = "Forbidden: field is immutable when `immutable` is set"


def _cause(kind: str, message: str, field: str) -> dict[str, Any]:
    return {"type": kind, "reason": kind, "message": message, "field": field}


def _required(field: str) -> dict[str, Any]:
    return _cause("FieldValueRequired", "Required value", field)


def _quoted(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _persistent_volume(obj: Obj, old: Obj | None) -> list[dict[str, Any]]:
    spec = obj.get("spec")
    return [] if isinstance(spec, dict) and spec.get("accessModes") else [_required("spec.accessModes")]


def _at(obj: Any, *keys: str) -> Any:
    for key in keys:
        if not isinstance(obj, dict):
            return None
        obj = obj.get(key)
    return obj


def _pod_rule(*keys: str) -> Rule:
    """The rule for a kind whose pod spec sits at ``keys`` (``spec`` for a Pod)."""
    path = ".".join(keys)

    def rule(obj: Obj, old: Obj | None) -> list[dict[str, Any]]:
        return pod_spec_causes(_at(obj, *keys), path)

    return rule


_POD_MUTABLE = (
    "`spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,"
    "`spec.tolerations` (only additions to existing tolerations),`spec.terminationGracePeriodSeconds` "
    "(allow it to be set to 1 if it was previously negative)"
)


def _pod_spec_frozen(spec: Any) -> Any:
    """A pod spec without the fields an update may change."""
    if not isinstance(spec, dict):
        return spec
    out = {
        k: v
        for k, v in spec.items()
        if k
        not in ("activeDeadlineSeconds", "tolerations", "terminationGracePeriodSeconds", "schedulingGates")
    }
    for key in ("containers", "initContainers"):
        if isinstance(out.get(key), list):
            out[key] = [
                {k: v for k, v in c.items() if k != "image"} if isinstance(c, dict) else c for c in out[key]
            ]
    return out


def _pod(obj: Obj, old: Obj | None) -> list[dict[str, Any]]:
    out = pod_spec_causes(obj.get("spec"), "spec")
    if old is not None and _pod_spec_frozen(obj.get("spec")) != _pod_spec_frozen(old.get("spec")):
        out.append(
            _cause(
                "FieldValueForbidden",
                f"Forbidden: pod updates may not change fields other than {_POD_MUTABLE}",
                "spec",
            )
        )
    return out


def _config_keys(obj: Obj, fields: tuple[str, ...]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for field in fields:
        values = obj.get(field)
        if not isinstance(values, dict):
            continue
        for key in values:
            if len(key) > 253:
                out.append(
                    _cause(
                        "FieldValueInvalid",
                        f"Invalid value: {_quoted(key)}: must be no more than 253 characters",
                        f"{field}[{key}]",
                    )
                )
            elif not _CONFIG_KEY.fullmatch(key) or key in (".", ".."):
                detail = _MSG_CONFIG_KEY if _CONFIG_KEY.fullmatch(key) is None else f"must not be '{key}'"
                out.append(
                    _cause("FieldValueInvalid", f"Invalid value: {_quoted(key)}: {detail}", f"{field}[{key}]")
                )
    return out


def _immutable(obj: Obj, old: Obj | None, fields: tuple[str, ...]) -> list[dict[str, Any]]:
    """Once ``immutable: true`` is stored, the flag and the data fields may not change."""
    if old is None or old.get("immutable") is not True:
        return []
    out: list[dict[str, Any]] = []
    if obj.get("immutable") is not True:
        out.append(_cause("FieldValueForbidden", _IMMUTABLE_SET, "immutable"))
    for field in fields:
        if (obj.get(field) or {}) != (old.get(field) or {}):
            out.append(_cause("FieldValueForbidden", _IMMUTABLE_SET, field))
    return out


def _config_map(obj: Obj, old: Obj | None) -> list[dict[str, Any]]:
    out = _immutable(obj, old, ("data", "binaryData"))
    out.extend(_config_keys(obj, ("data", "binaryData")))
    data, binary = obj.get("data"), obj.get("binaryData")
    if isinstance(data, dict) and isinstance(binary, dict):
        for key in data:
            if key in binary:
                out.append(
                    _cause(
                        "FieldValueInvalid",
                        f"Invalid value: {_quoted(key)}: duplicate of key present in binaryData",
                        f"data[{key}]",
                    )
                )
    return out


def _secret(obj: Obj, old: Obj | None) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    if old is not None and (obj.get("type") or "Opaque") != (old.get("type") or "Opaque"):
        out.append(
            _cause(
                "FieldValueInvalid",
                f"Invalid value: {_quoted(str(obj.get('type')))}: field is immutable",
                "type",
            )
        )
    out.extend(_immutable(obj, old, ("data",)))
    out.extend(_config_keys(obj, ("data",)))
    out.extend(secret_type_causes(obj))
    return out


_TEMPLATE = ("spec", "template", "spec")
_RULES: dict[tuple[str, str], Rule] = {
    ("", "persistentvolumes"): _persistent_volume,
    ("", "configmaps"): _config_map,
    ("", "secrets"): _secret,
    ("", "pods"): _pod,
    ("", "podtemplates"): _pod_rule("template", "spec"),
    ("", "replicationcontrollers"): _pod_rule(*_TEMPLATE),
    **_SPEC_RULES,
    **_OBJECT_RULES,
    **_POLICY_RULES,
    **_LIMIT_RULES,
}


def causes(info: ResourceInfo, obj: Obj, old: Obj | None = None) -> list[dict[str, Any]]:
    """The causes that make ``obj`` invalid under its kind's extra rules, as a create (``old``
    None) or an update of ``old`` (none for other kinds and for custom resources)."""
    rule = _RULES.get((info.group, info.plural))
    return rule(obj, old) if rule is not None and info.crd is None else []
