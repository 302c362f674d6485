"""Converting custom resources between versions through a CRD's conversion webhook.

With ``spec.conversion.strategy: Webhook`` kube-apiserver sends a ConversionReview
(``apiextensions.k8s.io/v1``) for objects read or written at a version other than the one they
are in. :func:`convert` does the same for a batch of objects. The webhook may change only the
labels and annotations of an object's metadata; every other metadata field is kept. A failed
call, a failed result or an unusable answer raises a 500 ``conversion webhook for
<apiVersion>, Kind=<kind> failed: ...`` StatusError. Cancellation propagates.
"""

from __future__ import annotations

import uuid
from typing import Any

from mcr_envtest import errors
from mcr_envtest.store import Store

from .call import CallFailed, post

__all__ = ["TIMEOUT", "convert", "webhook_config"]

TIMEOUT = 30  # seconds; kube-apiserver's conversion webhook timeout


def webhook_config(crd: dict[str, Any] | None) -> dict[str, Any] | None:
    """The conversion webhook's clientConfig of a CRD, or None when it converts by itself."""
    if not crd:
        return None
    conversion = (crd.get("spec") or {}).get("conversion") or {}
    if conversion.get("strategy") != "Webhook":
        return None
    config = (conversion.get("webhook") or {}).get("clientConfig")
    return config if isinstance(config, dict) else {}


def _failed(desired: str, kind: str, why: str) -> errors.StatusError:
    message = f"conversion webhook for {desired}, Kind={kind} failed: {why}"
    return errors.StatusError(
        500,
        "InternalError",
        f"Internal error occurred: {message}",
        details={"causes": [{"message": message}]},
    )


def _restore_metadata(original: dict[str, Any], converted: dict[str, Any]) -> dict[str, Any]:
    meta = dict(original.get("metadata") or {})
    new_meta = converted.get("metadata")
    new_meta = new_meta if isinstance(new_meta, dict) else {}
    for key in ("labels", "annotations"):
        if new_meta.get(key):
            meta[key] = new_meta[key]
        else:
            meta.pop(key, None)
    out = dict(converted)
    out["metadata"] = meta
    return out


async def convert(
    store: Store, crd: dict[str, Any], objects: list[dict[str, Any]], desired: str
) -> list[dict[str, Any]]:
    """``objects`` at ``desired`` (``group/version``), calling the webhook for those in another
    version (none when all are there already); see the module docstring."""
    config = webhook_config(crd)
    todo = [i for i, o in enumerate(objects) if o.get("apiVersion") != desired]
    if config is None or not todo:
        return [o if o.get("apiVersion") == desired else {**o, "apiVersion": desired} for o in objects]
    kind = str(((crd.get("spec") or {}).get("names") or {}).get("kind", ""))
    request = {"uid": str(uuid.uuid4()), "desiredAPIVersion": desired, "objects": [objects[i] for i in todo]}
    review = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview", "request": request}
    try:
        answer = await post(store, config, TIMEOUT, review)
    except CallFailed as exc:
        raise _failed(desired, kind, exc.reason) from None
    resp = answer.get("response")
    if not isinstance(resp, dict):
        raise _failed(desired, kind, "no response provided")
    if resp.get("uid") != request["uid"]:
        raise _failed(desired, kind, f'expected response.uid="{request["uid"]}", got "{resp.get("uid", "")}"')
    result = resp.get("result") if isinstance(resp.get("result"), dict) else {}
    if (result or {}).get("status") != "Success":
        raise _failed(desired, kind, str((result or {}).get("message") or "conversion failed"))
    converted = resp.get("convertedObjects")
    if not isinstance(converted, list) or len(converted) != len(todo):
        got = len(converted) if isinstance(converted, list) else 0
        raise _failed(desired, kind, f"expected {len(todo)} converted objects, got {got}")
    out = list(objects)
    for i, obj in zip(todo, converted, strict=True):
        if not isinstance(obj, dict) or obj.get("apiVersion") != desired:
            version = obj.get("apiVersion") if isinstance(obj, dict) else None
            raise _failed(
                desired, kind, f"invalid converted object: expected apiVersion {desired}, got {version}"
            )
        out[i] = _restore_metadata(objects[i], obj)
    return out
