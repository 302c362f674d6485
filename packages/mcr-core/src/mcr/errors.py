"""The mcr exception hierarchy.

Every error mcr raises derives from :class:`MCRError`. API errors are named by the Kubernetes
``Status`` reason (``NotFound`` → :class:`NotFoundError`, ``Conflict`` → :class:`ConflictError`, …)
and carry the server's ``Status`` object, so callers can branch on the class or on the
``is_*`` helpers. Messages always name the thing at fault: the file, the context, the cluster,
the URL, the object key.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = [
    "APIError",
    "AlreadyExistsError",
    "BadRequestError",
    "ClusterNotFoundError",
    "ConfigError",
    "ConflictError",
    "ForbiddenError",
    "GoneError",
    "InternalError",
    "InvalidError",
    "MCRError",
    "MethodNotAllowedError",
    "NoKindMatchError",
    "NotAcceptableError",
    "NotFoundError",
    "RequestEntityTooLargeError",
    "ServerTimeoutError",
    "ServiceUnavailableError",
    "TerminalError",
    "TooManyRequestsError",
    "TransportError",
    "UnauthorizedError",
    "UnsupportedMediaTypeError",
    "api_error_from_status",
    "is_already_exists",
    "is_conflict",
    "is_forbidden",
    "is_gone",
    "is_invalid",
    "is_not_found",
    "is_server_timeout",
    "is_service_unavailable",
    "is_too_many_requests",
    "is_unauthorized",
]


class MCRError(Exception):
    """Base class of every error raised by mcr."""


class ConfigError(MCRError):
    """A cluster configuration (kubeconfig, in-cluster files, credentials) cannot be used.

    ``source`` is the kubeconfig file path (or ``"<dict>"``, ``"<in-cluster>"``), ``context`` the
    kubeconfig context involved (or ``None``), ``field`` the offending field, e.g.
    ``users[admin].client-certificate``. The message never contains credential values.
    """

    def __init__(
        self,
        message: str,
        *,
        source: str | None = None,
        context: str | None = None,
        field: str | None = None,
    ) -> None:
        self.source = source
        self.context = context
        self.field = field
        self.detail = message
        parts = []
        if source is not None:
            parts.append(f"kubeconfig {source}")
        if context is not None:
            parts.append(f"context {context!r}")
        if field is not None:
            parts.append(f"field {field!r}")
        prefix = ", ".join(parts)
        super().__init__(f"{prefix}: {message}" if prefix else message)


class TransportError(MCRError):
    """The API server could not be reached or the connection failed (refused, reset, timed out).

    ``cluster`` is the cluster name (``""`` for the local cluster), ``url`` the request URL and
    ``method`` the HTTP verb.
    """

    def __init__(self, message: str, *, cluster: str = "", url: str = "", method: str = "") -> None:
        self.cluster = cluster
        self.url = url
        self.method = method
        where = f"cluster {cluster!r}: " if cluster else ""
        target = f"{method} {url}: " if url else ""
        super().__init__(f"{where}{target}{message}")


class TerminalError(MCRError):
    """A reconcile error that must not be retried: the controller records it and forgets the item."""


class ClusterNotFoundError(MCRError, LookupError):
    """A provider or manager does not know (or no longer engages) the named cluster."""

    def __init__(self, cluster_name: str, message: str | None = None) -> None:
        self.cluster_name = cluster_name
        super().__init__(message or f"cluster {cluster_name!r} not found")


class NoKindMatchError(MCRError, LookupError):
    """No resource served by the cluster matches the kind (even after refreshing discovery).

    ``hint`` says what the cluster does serve nearby (the kinds of that group-version, a kind
    whose name differs only in case, the versions of that group), when discovery tells.
    """

    def __init__(self, what: str, *, cluster: str = "", hint: str = "") -> None:
        self.what = what
        self.cluster = cluster
        self.hint = hint
        where = f" in cluster {cluster!r}" if cluster else ""
        super().__init__(f"no matches for kind {what}{where}" + (f": {hint}" if hint else ""))


class APIError(MCRError):
    """The API server answered with a non-success status.

    ``status`` is the ``Status`` object the server sent (or one synthesised from a non-JSON
    body); ``code``, ``reason``, ``message`` and ``details`` are its fields; ``retry_after`` is
    the delay in seconds the server asked for (``Retry-After`` header or
    ``details.retryAfterSeconds``), if any.
    """

    def __init__(
        self,
        status: Mapping[str, Any],
        *,
        method: str = "",
        url: str = "",
        retry_after: float | None = None,
        cluster: str = "",
    ) -> None:
        self.status: dict[str, Any] = dict(status)
        self.code: int = int(status.get("code") or 0)
        self.reason: str = str(status.get("reason") or "")
        self.message: str = str(status.get("message") or "")
        details = status.get("details")
        self.details: dict[str, Any] = dict(details) if isinstance(details, Mapping) else {}
        if retry_after is None and self.details.get("retryAfterSeconds"):
            retry_after = float(self.details["retryAfterSeconds"])
        self.retry_after = retry_after
        self.method = method
        self.url = url
        self.cluster = cluster
        where = f"cluster {cluster!r}: " if cluster else ""
        target = f"{method} {url}: " if url else ""
        reason = f" {self.reason}" if self.reason else ""
        super().__init__(f"{where}{target}{self.code}{reason}: {self.message}")

    @property
    def causes(self) -> list[dict[str, Any]]:
        """The field-level causes of the failure (``details.causes``), possibly empty."""
        causes = self.details.get("causes")
        return list(causes) if isinstance(causes, list) else []


class BadRequestError(APIError):
    """400 BadRequest."""


class UnauthorizedError(APIError):
    """401 Unauthorized: missing or expired credentials."""


class ForbiddenError(APIError):
    """403 Forbidden: authenticated but not allowed."""


class NotFoundError(APIError, LookupError):
    """404 NotFound."""


class MethodNotAllowedError(APIError):
    """405 MethodNotAllowed."""


class NotAcceptableError(APIError):
    """406 NotAcceptable."""


class AlreadyExistsError(APIError):
    """409 AlreadyExists: create of an object whose name is taken."""


class ConflictError(APIError):
    """409 Conflict: stale resourceVersion, failed precondition or server-side apply conflict."""


class GoneError(APIError):
    """410 Expired/Gone: the resourceVersion or continue token is too old."""


class RequestEntityTooLargeError(APIError):
    """413 RequestEntityTooLarge."""


class UnsupportedMediaTypeError(APIError):
    """415 UnsupportedMediaType (e.g. strategic merge patch on a custom resource)."""


class InvalidError(APIError):
    """422 Invalid: the object failed validation; :attr:`causes` lists the fields."""


class TooManyRequestsError(APIError):
    """429 TooManyRequests."""


class InternalError(APIError):
    """500 InternalError."""


class ServiceUnavailableError(APIError):
    """503 ServiceUnavailable."""


class ServerTimeoutError(APIError):
    """504 Timeout or reason ServerTimeout."""


_BY_REASON: dict[str, type[APIError]] = {
    "BadRequest": BadRequestError,
    "Unauthorized": UnauthorizedError,
    "Forbidden": ForbiddenError,
    "NotFound": NotFoundError,
    "MethodNotAllowed": MethodNotAllowedError,
    "NotAcceptable": NotAcceptableError,
    "AlreadyExists": AlreadyExistsError,
    "Conflict": ConflictError,
    "Gone": GoneError,
    "Expired": GoneError,
    "RequestEntityTooLarge": RequestEntityTooLargeError,
    "UnsupportedMediaType": UnsupportedMediaTypeError,
    "Invalid": InvalidError,
    "TooManyRequests": TooManyRequestsError,
    "InternalError": InternalError,
    "ServiceUnavailable": ServiceUnavailableError,
    "Timeout": ServerTimeoutError,
    "ServerTimeout": ServerTimeoutError,
}

_BY_CODE: dict[int, type[APIError]] = {
    400: BadRequestError,
    401: UnauthorizedError,
    403: ForbiddenError,
    404: NotFoundError,
    405: MethodNotAllowedError,
    406: NotAcceptableError,
    409: ConflictError,
    410: GoneError,
    413: RequestEntityTooLargeError,
    415: UnsupportedMediaTypeError,
    422: InvalidError,
    429: TooManyRequestsError,
    500: InternalError,
    503: ServiceUnavailableError,
    504: ServerTimeoutError,
}


_MULTI_CODE_REASONS = frozenset({"AlreadyExists", "ServerTimeout", "Timeout"})


def _retry_after_header(headers: Mapping[str, str] | None) -> float | None:
    if not headers:
        return None
    value = headers.get("Retry-After") or headers.get("retry-after")
    if value is None:
        return None
    try:
        seconds = float(value)
    except ValueError:
        return None  # an HTTP-date: Kubernetes never sends one, treat as absent
    return max(seconds, 0.0)


def api_error_from_status(
    status: Mapping[str, Any],
    *,
    method: str = "",
    url: str = "",
    headers: Mapping[str, str] | None = None,
    cluster: str = "",
) -> APIError:
    """Build the :class:`APIError` subclass matching a ``Status`` object (reason first, then code)."""
    reason = str(status.get("reason") or "")
    code = int(status.get("code") or 0)
    by_reason, by_code = _BY_REASON.get(reason), _BY_CODE.get(code)
    # A reason that contradicts the HTTP code (a proxy or a broken server): trust the code,
    # except for reasons that legitimately come with several codes.
    if (
        by_reason is not None
        and by_code is not None
        and not issubclass(by_reason, by_code)
        and reason not in _MULTI_CODE_REASONS
    ):
        by_reason = None
    cls = by_reason or by_code or APIError
    return cls(status, method=method, url=url, retry_after=_retry_after_header(headers), cluster=cluster)


def _is(exc: BaseException | None, cls: type[APIError], code: int) -> bool:
    if isinstance(exc, cls):
        return True
    return isinstance(exc, APIError) and type(exc) is APIError and exc.code == code


def is_not_found(exc: BaseException | None) -> bool:
    """True if ``exc`` is a 404 NotFound API error."""
    return _is(exc, NotFoundError, 404)


def is_conflict(exc: BaseException | None) -> bool:
    """True if ``exc`` is a 409 Conflict (stale write, precondition, apply conflict)."""
    return isinstance(exc, ConflictError)


def is_already_exists(exc: BaseException | None) -> bool:
    """True if ``exc`` is a 409 AlreadyExists."""
    return isinstance(exc, AlreadyExistsError)


def is_gone(exc: BaseException | None) -> bool:
    """True if ``exc`` is a 410 Expired/Gone."""
    return _is(exc, GoneError, 410)


def is_invalid(exc: BaseException | None) -> bool:
    """True if ``exc`` is a 422 Invalid."""
    return _is(exc, InvalidError, 422)


def is_forbidden(exc: BaseException | None) -> bool:
    """True if ``exc`` is a 403 Forbidden."""
    return _is(exc, ForbiddenError, 403)


def is_unauthorized(exc: BaseException | None) -> bool:
    """True if ``exc`` is a 401 Unauthorized."""
    return _is(exc, UnauthorizedError, 401)


def is_too_many_requests(exc: BaseException | None) -> bool:
    """True if ``exc`` is a 429 TooManyRequests."""
    return _is(exc, TooManyRequestsError, 429)


def is_service_unavailable(exc: BaseException | None) -> bool:
    """True if ``exc`` is a 503 ServiceUnavailable."""
    return _is(exc, ServiceUnavailableError, 503)


def is_server_timeout(exc: BaseException | None) -> bool:
    """True if ``exc`` is a 504 / ServerTimeout."""
    return _is(exc, ServerTimeoutError, 504)
