"""Status objects and the exception handlers raise to answer with one.

Every error the server returns is a ``Status`` (``kind: Status``) with upstream's ``reason``,
``code`` and ``details`` (``details.kind`` is the resource *plural*, as upstream does). Handlers
raise :class:`StatusError`; the HTTP layer turns it into a response.
"""

from __future__ import annotations

from typing import Any

import orjson

from .resources import ResourceInfo

__all__ = ["EMPTY_DETAILS", "PageNotFound", "StatusError", "encode_status", "status_object"]

# pass as ``details`` for kube-apiserver's ``"details":{}`` (other empty details are omitted)
EMPTY_DETAILS: dict[str, Any] = {}

Cause = dict[str, str]


def _cause(c: dict[str, Any]) -> dict[str, Any]:
    """A StatusCause as upstream serializes it: ``reason`` (the cause type), ``message``, ``field``,
    each omitted when empty."""
    out: dict[str, Any] = {}
    reason = c.get("reason") or c.get("type")
    for key, value in (("reason", reason), ("message", c.get("message")), ("field", c.get("field"))):
        if value:
            out[key] = value
    return out


_DETAIL_KEYS = ("name", "group", "kind", "uid", "causes", "retryAfterSeconds")


def status_object(
    code: int,
    reason: str,
    message: str,
    *,
    details: dict[str, Any] | None = None,
    metadata: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A failure ``Status`` dict with upstream's key order: kind, apiVersion, metadata, status,
    message, reason, details (name, group, kind, uid, causes, retryAfterSeconds), code; empty
    values are omitted as Go's ``omitempty`` does."""
    out: dict[str, Any] = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": metadata or {},
        "status": "Failure",
    }
    if message:
        out["message"] = message
    if reason:
        out["reason"] = reason
    if details or details is EMPTY_DETAILS:
        d: dict[str, Any] = {}
        for key in _DETAIL_KEYS:
            value = details.get(key)
            if key == "causes" and value:
                d["causes"] = [_cause(c) for c in value]
            elif value:
                d[key] = value
        if d or details is EMPTY_DETAILS:
            out["details"] = d
    if code:
        out["code"] = code
    return out


_GO_ESCAPES = ((b"<", b"\\u003c"), (b">", b"\\u003e"), (b"&", b"\\u0026"))


def encode_status(status: dict[str, Any], *, newline: bool = True) -> bytes:
    """A Status as kube-apiserver's JSON encoder writes it: compact, ``<``, ``>`` and ``&``
    escaped as ``\\u003c``, ``\\u003e``, ``\\u0026``, and a trailing newline."""
    body = orjson.dumps(status)
    for raw, escaped in _GO_ESCAPES:
        if raw in body:
            body = body.replace(raw, escaped)
    return body + b"\n" if newline else body


class StatusError(Exception):
    """An API error answered as a Status object with HTTP ``code`` and optional extra headers."""

    def __init__(
        self,
        code: int,
        reason: str,
        message: str,
        *,
        details: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.details = details
        self.headers = headers or {}
        self.metadata = metadata

    @property
    def status(self) -> dict[str, Any]:
        """The Status dict for this error."""
        return status_object(
            self.code, self.reason, self.message, details=self.details, metadata=self.metadata
        )


class PageNotFound(StatusError):
    """A path nothing is served at: kube-apiserver answers ``404 page not found`` as plain text."""

    def __init__(self) -> None:
        super().__init__(404, "NotFound", "404 page not found")


def _details(info: ResourceInfo | None, name: str, **extra: Any) -> dict[str, Any]:
    d: dict[str, Any] = {}
    if name:
        d["name"] = name
    if info is not None:
        if info.group:
            d["group"] = info.group
        d["kind"] = info.plural
    d.update({k: v for k, v in extra.items() if v})
    return d


def not_found(info: ResourceInfo | None, name: str, *, plural: str = "") -> StatusError:
    what = info.describe() if info is not None else plural
    return StatusError(404, "NotFound", f'{what} "{name}" not found', details=_details(info, name))


def namespace_not_found(name: str) -> StatusError:
    return StatusError(
        404, "NotFound", f'namespaces "{name}" not found', details={"name": name, "kind": "namespaces"}
    )


def already_exists(info: ResourceInfo, name: str) -> StatusError:
    return StatusError(
        409, "AlreadyExists", f'{info.describe()} "{name}" already exists', details=_details(info, name)
    )


def conflict(info: ResourceInfo, name: str, why: str) -> StatusError:
    return StatusError(
        409,
        "Conflict",
        f'Operation cannot be fulfilled on {info.describe()} "{name}": {why}',
        details=_details(info, name),
    )


STALE = "the object has been modified; please apply your changes to the latest version and try again"


def invalid(info: ResourceInfo, name: str, causes: list[dict[str, Any]]) -> StatusError:
    parts = []
    for c in causes:
        f = c.get("field", "")
        parts.append(f"{f}: {c.get('message', '')}" if f else str(c.get("message", "")))
    kind_name = f"{info.kind}.{info.group}" if info.group else info.kind
    joined = parts[0] if len(parts) == 1 else "[" + ", ".join(parts) + "]"
    message = f'{kind_name} "{name}" is invalid: {joined}'
    details: dict[str, Any] = {"name": name, "kind": info.kind, "causes": causes}
    if info.group:
        details["group"] = info.group
    return StatusError(422, "Invalid", message, details=details)


def options_invalid(kind: str, causes: list[dict[str, Any]]) -> StatusError:
    """kube-apiserver's 422 for invalid request options (``ListOptions``, ``DeleteOptions``,
    ...): the unnamed ``<kind>.meta.k8s.io`` object is what is invalid."""
    parts = [f"{c.get('field', '')}: {c.get('message', '')}" for c in causes]
    joined = parts[0] if len(parts) == 1 else "[" + ", ".join(parts) + "]"
    return StatusError(
        422,
        "Invalid",
        f'{kind}.meta.k8s.io "" is invalid: {joined}',
        details={"group": "meta.k8s.io", "kind": kind, "causes": causes},
    )


def bad_request(message: str) -> StatusError:
    return StatusError(400, "BadRequest", message)


def forbidden(
    message: str, info: ResourceInfo | None = None, name: str = "", causes: list[Cause] | None = None
) -> StatusError:
    details = _details(info, name) if info is not None or name else {}
    if causes:
        details["causes"] = causes
    return StatusError(403, "Forbidden", message, details=details or None)


def method_not_allowed(
    message: str = "the server does not allow this method on the requested resource",
) -> StatusError:
    return StatusError(405, "MethodNotAllowed", message, details=EMPTY_DETAILS)


def expired(message: str, *, metadata: dict[str, Any] | None = None) -> StatusError:
    return StatusError(410, "Expired", message, metadata=metadata)


def unsupported_media_type(accepted: list[str]) -> StatusError:
    return StatusError(
        415,
        "UnsupportedMediaType",
        "the body of the request was in an unknown format - accepted media types include: "
        + ", ".join(accepted),
    )


MAX_REQUEST_BODY_BYTES = 3 * 1024 * 1024


def request_entity_too_large(limit: int = MAX_REQUEST_BODY_BYTES) -> StatusError:
    """413 for a write whose body exceeds kube-apiserver's request body limit (3 MiB)."""
    return StatusError(413, "RequestEntityTooLarge", f"Request entity too large: limit is {limit}")


def storage_too_large() -> StatusError:
    """What kube-apiserver answers when etcd refuses an object as too large: a 500 without a
    reason, carrying etcd's own message."""
    return StatusError(500, "", "etcdserver: request is too large")
