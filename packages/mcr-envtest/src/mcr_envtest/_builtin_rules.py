"""Field rules of built-in kinds that their OpenAPI schemas do not express (required values
kube-apiserver's validation adds), as Status causes."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .resources import ResourceInfo

__all__ = ["causes"]


def _required(field: str) -> dict[str, Any]:
    return {
        "type": "FieldValueRequired",
        "reason": "FieldValueRequired",
        "message": "Required value",
        "field": field,
    }


def _persistent_volume(obj: dict[str, Any]) -> list[dict[str, Any]]:
    spec = obj.get("spec")
    return [] if isinstance(spec, dict) and spec.get("accessModes") else [_required("spec.accessModes")]


_RULES = {
    ("", "persistentvolumes"): _persistent_volume,
}


def causes(info: ResourceInfo, obj: dict[str, Any]) -> list[dict[str, Any]]:
    """The causes that make ``obj`` invalid under its kind's extra rules (none for other kinds)."""
    rule = _RULES.get((info.group, info.plural))
    return rule(obj) if rule is not None and info.crd is None else []
