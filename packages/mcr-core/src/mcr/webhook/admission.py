"""Admission handlers: what a validating or mutating webhook receives and answers.

A handler is a callable, sync or async, taking an :class:`AdmissionRequest`:

- a *validator* returns ``None`` (allowed) or a :class:`Response` (:func:`allowed` with warnings,
  :func:`denied` with a message);
- a *defaulter* changes ``request.object`` in place and returns ``None``, or returns the object
  it wants admitted, or a :class:`Response` (a denial, say). mcr answers with the JSON patch
  (RFC 6902) from the object it received to that object.

A handler that raises is answered as denied with code 500 and the error's message; the request
of the API server is never left without an answer. Cancellation propagates.
"""

from __future__ import annotations

import base64
import copy
import inspect
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import orjson

from mcr.rest.kinds import GVK, to_dict, to_model
from mcr.webhook.patch import diff

if TYPE_CHECKING:
    from mcr.cluster import Cluster

__all__ = [
    "AdmissionRequest",
    "BadReviewError",
    "Handler",
    "Response",
    "admission_review",
    "allowed",
    "denied",
    "parse_review",
    "refusal",
    "run_handler",
]

log = logging.getLogger("mcr.webhook")

REVIEW_VERSIONS = ("admission.k8s.io/v1", "admission.k8s.io/v1beta1")


class BadReviewError(ValueError):
    """A request body that is not a review mcr can answer; the message says what is wrong."""


@dataclass
class Response:
    """An admission answer. ``object`` (mutating only) is the object to admit instead."""

    allowed: bool
    message: str = ""
    code: int = 200
    reason: str = ""
    warnings: Sequence[str] = ()
    object: Any = None


def allowed(message: str = "", *, warnings: Sequence[str] = (), object: Any = None) -> Response:
    """Admit the request (with ``object`` instead of the received one, for a defaulter)."""
    return Response(True, message, 200, "", tuple(warnings), object)


def denied(
    message: str, *, code: int = 403, reason: str = "Forbidden", warnings: Sequence[str] = ()
) -> Response:
    """Refuse the request; the API server returns ``message`` to its client."""
    return Response(False, message, code, reason, tuple(warnings))


@dataclass
class AdmissionRequest:
    """One AdmissionReview request, with the cluster it came from.

    ``object`` and ``old_object`` are dicts, or instances of the model class the handler was
    registered for; ``raw`` is the review's ``request`` as received. ``cluster`` reads that
    cluster's cache (``cluster.client``, ``cluster.cache``) and writes to its API server.
    """

    uid: str
    cluster_name: str
    cluster: Cluster
    kind: GVK
    operation: str
    name: str
    namespace: str
    object: Any
    old_object: Any
    dry_run: bool
    sub_resource: str
    user_info: dict[str, Any]
    options: dict[str, Any] | None
    raw: dict[str, Any] = field(repr=False)


Handler = Callable[[AdmissionRequest], Any]


def parse_review(body: bytes, kind: str) -> tuple[str, dict[str, Any]]:
    """``(apiVersion, request)`` of a review body of ``kind`` (``AdmissionReview`` or
    ``ConversionReview``); :class:`BadReviewError` naming what is missing or wrong."""
    try:
        doc = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise BadReviewError(f"the body is not JSON: {exc}") from None
    if not isinstance(doc, dict):
        raise BadReviewError(f"the body must be a JSON object ({kind}), not {type(doc).__name__}")
    if doc.get("kind") != kind:
        raise BadReviewError(f"the body's kind is {doc.get('kind')!r}, expected {kind!r}")
    api_version = doc.get("apiVersion")
    if not isinstance(api_version, str) or not api_version:
        raise BadReviewError(f"the {kind} has no apiVersion")
    request = doc.get("request")
    if not isinstance(request, dict):
        raise BadReviewError(f"the {kind} has no request object")
    uid = request.get("uid")
    if not isinstance(uid, str) or not uid:
        raise BadReviewError(f"the {kind}'s request has no uid")
    return api_version, request


def admission_review(
    api_version: str, uid: str, response: Response, patch: list[dict[str, Any]] | None
) -> bytes:
    """The AdmissionReview body answering ``uid``."""
    out: dict[str, Any] = {"uid": uid, "allowed": response.allowed}
    if not response.allowed or response.message:
        status: dict[str, Any] = {"code": response.code}
        if response.message:
            status["message"] = response.message
        if response.reason:
            status["reason"] = response.reason
        if not response.allowed:
            status["status"] = "Failure"
        out["status"] = status
    if response.warnings:
        out["warnings"] = list(response.warnings)
    if patch:
        out["patchType"] = "JSONPatch"
        out["patch"] = base64.b64encode(orjson.dumps(patch)).decode()
    return orjson.dumps({"apiVersion": api_version, "kind": "AdmissionReview", "response": out})


def refusal(message: str, code: int, reason: str) -> Response:
    """A denial the server itself gives (unknown cluster, no handler)."""
    return Response(False, message, code, reason)


def _decode(model: type[Any] | None, obj: Any) -> Any:
    if obj is None:
        return None
    return copy.deepcopy(obj) if model is None else to_model(model, obj)


def build_request(
    raw: dict[str, Any], cluster_name: str, cluster: Cluster, model: type[Any] | None
) -> AdmissionRequest:
    """The handler's view of a review's ``request``; :class:`BadReviewError` for missing fields."""
    kind = raw.get("kind")
    if not isinstance(kind, dict) or not isinstance(kind.get("kind"), str):
        raise BadReviewError("the AdmissionReview's request has no kind")
    operation = raw.get("operation")
    if not isinstance(operation, str):
        raise BadReviewError("the AdmissionReview's request has no operation")
    return AdmissionRequest(
        uid=raw["uid"],
        cluster_name=cluster_name,
        cluster=cluster,
        kind=GVK(kind.get("group", ""), kind.get("version", ""), kind["kind"]),
        operation=operation,
        name=raw.get("name") or "",
        namespace=raw.get("namespace") or "",
        object=_decode(model, raw.get("object")),
        old_object=_decode(model, raw.get("oldObject")),
        dry_run=bool(raw.get("dryRun")),
        sub_resource=raw.get("subResource") or "",
        user_info=raw.get("userInfo") or {},
        options=raw.get("options"),
        raw=raw,
    )


async def run_handler(
    handler: Handler, request: AdmissionRequest, *, mutating: bool, model: type[Any] | None, where: str
) -> tuple[Response, list[dict[str, Any]] | None]:
    """Call ``handler`` and turn what it returns into a response and (mutating) a patch.

    A handler's exception becomes a denial with code 500 naming ``where``; a result of the wrong
    type is one too.
    """
    try:
        result = handler(request)
        if inspect.isawaitable(result):
            result = await result
    except Exception as exc:  # the API server must get an answer, not a dropped call
        log.exception("admission handler %s failed", where, extra={"cluster": request.cluster_name})
        return refusal(f"{where}: {type(exc).__name__}: {exc}", 500, "InternalError"), None
    if result is None:
        response = allowed(object=request.object if mutating else None)
    elif isinstance(result, Response):
        response = result
    elif mutating:
        response = allowed(object=result)
    else:
        return refusal(
            f"{where}: a validator returned {type(result).__name__}, not a Response or None",
            500,
            "InternalError",
        ), None
    if not mutating or not response.allowed or response.object is None:
        return response, None
    received = request.raw.get("object")
    if model is not None and received is not None:
        # Compare model to model: a decode and encode alone must not show up as changes.
        received = to_dict(to_model(model, received))
    return response, diff(received, to_dict(response.object))
