"""Status objects and the exception handlers raise to answer with one.

Every error the server returns is a ``Status`` (``kind: Status``) with upstream's ``reason``,
``code`` and ``details`` (``details.kind`` is the resource *plural*, as upstream does). Handlers
raise :class:`StatusError`; the HTTP layer turns it into a response.
"""

from __future__ import annotations

from typing import Any

from .resources import ResourceInfo

__all__ = ["StatusError", "status_object"]

Cause = dict[str, str]


def status_object(
    code: int,
    reason: str,
    message: str,
    *,
    details: dict[str, Any] | None = None,
    metadata: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A failure ``Status`` dict."""
    out: dict[str, Any] = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": metadata or {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }
    if details:
        out["details"] = details
    return out


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
    return StatusError(405, "MethodNotAllowed", message)


def expired(message: str, *, metadata: dict[str, Any] | None = None) -> StatusError:
    return StatusError(410, "Expired", message, metadata=metadata)


def unsupported_media_type(content_type: str, accepted: list[str]) -> StatusError:
    return StatusError(
        415,
        "UnsupportedMediaType",
        "the body of the request was in an unknown format - accepted media types include: "
        + ", ".join(accepted),
        details={"causes": [{"type": "UnsupportedMediaType", "message": content_type}]}
        if content_type
        else None,
    )
