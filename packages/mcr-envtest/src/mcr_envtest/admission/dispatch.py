"""Running the admission webhooks of the stored webhook configurations for one request.

:func:`mutate` calls the matching mutating webhooks one after another (configurations by name,
webhooks in their order), applies each JSONPatch, and calls a webhook with
``reinvocationPolicy: IfNeeded`` once more when a later webhook changed the object.
:func:`validate` calls the matching validating webhooks concurrently. Both return the warnings
the webhooks gave, and raise :class:`~mcr_envtest.errors.StatusError` as kube-apiserver answers:
a denial carries the webhook's code (at least 400) and ``admission webhook "NAME" denied the
request: ...``; a failed call under ``failurePolicy: Fail`` is a 500 ``failed calling webhook``;
under ``Ignore`` it is logged and skipped. A dry-run request reaching a webhook whose
sideEffects are neither None nor NoneOnDryRun is a 400. Cancellation propagates and cancels the
calls in flight.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import logging
import uuid
from typing import Any

import jsonpatch
import orjson

from mcr_envtest import errors
from mcr_envtest.store import Store

from .call import CallFailed, post
from .match import Attributes, ConditionError, conditions_match, matches

__all__ = ["configured", "mutate", "validate"]

log = logging.getLogger(__name__)

GROUP = "admissionregistration.k8s.io"
MUTATING = "mutatingwebhookconfigurations"
VALIDATING = "validatingwebhookconfigurations"


def _webhooks(store: Store, resource: str) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    configs = sorted(store.list_objects(GROUP, resource), key=lambda c: c["metadata"]["name"])
    for config in configs:
        out.extend(w for w in config.get("webhooks") or [] if isinstance(w, dict))
    return out


def configured(store: Store) -> bool:
    """True when any webhook configuration exists (the fast path skips admission otherwise)."""
    return bool(store.list_objects(GROUP, MUTATING) or store.list_objects(GROUP, VALIDATING))


def _request(attrs: Attributes, obj: dict[str, Any] | None) -> dict[str, Any]:
    kind = {"group": attrs.group, "version": attrs.version, "kind": attrs.kind}
    resource = {"group": attrs.group, "version": attrs.version, "resource": attrs.resource}
    req: dict[str, Any] = {
        "uid": str(uuid.uuid4()),
        "kind": kind,
        "resource": resource,
        "requestKind": kind,
        "requestResource": resource,
    }
    if attrs.subresource:
        req["subResource"] = req["requestSubResource"] = attrs.subresource
    if attrs.name:
        req["name"] = attrs.name
    if attrs.namespace:
        req["namespace"] = attrs.namespace
    req["operation"] = attrs.operation
    req["userInfo"] = attrs.user
    if obj is not None:
        req["object"] = obj
    if attrs.old is not None:
        req["oldObject"] = attrs.old
    req["dryRun"] = attrs.dry_run
    req["options"] = attrs.options
    return req


def _internal(message: str) -> errors.StatusError:
    return errors.StatusError(
        500,
        "InternalError",
        f"Internal error occurred: {message}",
        details={"causes": [{"message": message}]},
    )


def _denied(name: str, result: Any) -> errors.StatusError:
    result = result if isinstance(result, dict) else {}
    code = result.get("code") if isinstance(result.get("code"), int) else 0
    code = code if code >= 400 else 400
    reason, message = str(result.get("reason") or ""), str(result.get("message") or "")
    denied = f'admission webhook "{name}" denied the request'
    if message:
        text = f"{denied}: {message}"
    elif reason:
        text = f"{denied}: {reason}"
    else:
        text = f"{denied} without explanation"
    details = result.get("details") if isinstance(result.get("details"), dict) else None
    return errors.StatusError(code, reason, text, details=details)


def _check_response(answer: dict[str, Any], uid: str) -> dict[str, Any]:
    api_version, kind = answer.get("apiVersion"), answer.get("kind")
    if api_version != "admission.k8s.io/v1" or kind != "AdmissionReview":
        raise CallFailed(
            f"expected webhook response of admission.k8s.io/v1, Kind=AdmissionReview, got {api_version}, "
            f"Kind={kind}",
            invalid=True,
        )
    resp = answer.get("response")
    if not isinstance(resp, dict):
        raise CallFailed("webhook response was absent", invalid=True)
    if resp.get("uid") != uid:
        raise CallFailed(f'expected response.uid="{uid}", got "{resp.get("uid", "")}"', invalid=True)
    return resp


async def _call(
    store: Store, webhook: dict[str, Any], attrs: Attributes, obj: dict[str, Any] | None
) -> dict[str, Any] | None:
    """Call one matching webhook; its AdmissionResponse, or None when it does not apply or
    failed under ``failurePolicy: Ignore``."""
    name = str(webhook.get("name", ""))
    ignore = webhook.get("failurePolicy") == "Ignore"
    request = _request(attrs, obj)
    try:
        if not conditions_match(webhook, request):
            return None
    except ConditionError as exc:
        if ignore:
            log.warning("webhook %s: %s; failing open", name, exc)
            return None
        raise _internal(
            f'failed calling webhook "{name}": failed to evaluate match conditions: {exc}'
        ) from None
    if attrs.dry_run and webhook.get("sideEffects") not in ("None", "NoneOnDryRun"):
        raise errors.bad_request(f'admission webhook "{name}" does not support dry run')
    timeout = webhook.get("timeoutSeconds")
    timeout = timeout if isinstance(timeout, int) and timeout > 0 else 10
    review = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}
    try:
        answer = await post(store, webhook.get("clientConfig") or {}, timeout, review)
        resp = _check_response(answer, request["uid"])
    except CallFailed as exc:
        if ignore:
            log.warning("webhook %s: %s; failing open", name, exc.text())
            return None
        raise _internal(f'failed calling webhook "{name}": {exc.text()}') from None
    if resp.get("allowed") is not True:
        raise _denied(name, resp.get("status"))
    return resp


def _warnings(resp: dict[str, Any]) -> list[str]:
    return [str(w) for w in resp.get("warnings") or [] if w]


def _patched(name: str, obj: dict[str, Any], resp: dict[str, Any]) -> dict[str, Any]:
    patch = resp.get("patch")
    if not patch:
        return obj
    if resp.get("patchType") != "JSONPatch":
        raise _internal(f'failed calling webhook "{name}": unsupported patch type "{resp.get("patchType")}"')
    try:
        ops = orjson.loads(base64.b64decode(str(patch), validate=True))
        out = jsonpatch.JsonPatch(ops).apply(obj)
    except (
        binascii.Error,
        orjson.JSONDecodeError,
        jsonpatch.JsonPatchException,
        TypeError,
        ValueError,
    ) as exc:
        raise _internal(f'failed calling webhook "{name}": the patch could not be applied: {exc}') from None
    if not isinstance(out, dict):
        raise _internal(f'failed calling webhook "{name}": the patched object is not a JSON object')
    return out


async def mutate(store: Store, attrs: Attributes) -> tuple[dict[str, Any] | None, list[str]]:
    """Run the mutating webhooks; (the possibly patched object, warnings). See the module docstring."""
    hooks = [w for w in _webhooks(store, MUTATING) if matches(store, w, attrs)]
    obj, warnings = attrs.obj, []
    seen_after: dict[int, Any] = {}  # index of an IfNeeded webhook -> the object it returned
    for i, webhook in enumerate(hooks):
        resp = await _call(store, webhook, attrs, obj)
        if resp is None:
            continue
        warnings += _warnings(resp)
        if obj is not None:
            obj = _patched(str(webhook.get("name", "")), obj, resp)
        if webhook.get("reinvocationPolicy") == "IfNeeded":
            seen_after[i] = orjson.dumps(obj)
    for i, webhook in enumerate(hooks):
        if i not in seen_after or seen_after[i] == orjson.dumps(obj):
            continue
        resp = await _call(store, webhook, attrs, obj)
        if resp is None:
            continue
        warnings += _warnings(resp)
        if obj is not None:
            obj = _patched(str(webhook.get("name", "")), obj, resp)
    return obj, warnings


async def validate(store: Store, attrs: Attributes) -> list[str]:
    """Run the validating webhooks concurrently; their warnings. See the module docstring."""
    hooks = [w for w in _webhooks(store, VALIDATING) if matches(store, w, attrs)]
    if not hooks:
        return []
    results = await asyncio.gather(
        *(_call(store, w, attrs, attrs.obj) for w in hooks), return_exceptions=True
    )
    warnings: list[str] = []
    for result in results:
        if isinstance(result, BaseException):
            raise result
        if result is not None:
            warnings += _warnings(result)
    return warnings
