"""The error hierarchy: classes by Status reason, helpers, and messages that name the culprit."""

from __future__ import annotations

import pytest

from mcr import errors as e


def status(code: int, reason: str, message: str = "m", **details: object) -> dict[str, object]:
    return {
        "kind": "Status",
        "status": "Failure",
        "code": code,
        "reason": reason,
        "message": message,
        "details": details,
    }


@pytest.mark.parametrize(
    ("code", "reason", "cls", "helper"),
    [
        (404, "NotFound", e.NotFoundError, e.is_not_found),
        (409, "Conflict", e.ConflictError, e.is_conflict),
        (409, "AlreadyExists", e.AlreadyExistsError, e.is_already_exists),
        (410, "Expired", e.GoneError, e.is_gone),
        (410, "Gone", e.GoneError, e.is_gone),
        (422, "Invalid", e.InvalidError, e.is_invalid),
        (403, "Forbidden", e.ForbiddenError, e.is_forbidden),
        (401, "Unauthorized", e.UnauthorizedError, e.is_unauthorized),
        (429, "TooManyRequests", e.TooManyRequestsError, e.is_too_many_requests),
        (503, "ServiceUnavailable", e.ServiceUnavailableError, e.is_service_unavailable),
        (500, "ServerTimeout", e.ServerTimeoutError, e.is_server_timeout),
        (504, "Timeout", e.ServerTimeoutError, e.is_server_timeout),
    ],
)
def test_class_by_reason(code: int, reason: str, cls: type[e.APIError], helper: object) -> None:
    err = e.api_error_from_status(status(code, reason), method="GET", url="https://h/api/v1/x", cluster="c1")
    assert type(err) is cls
    assert isinstance(err, e.MCRError)
    assert callable(helper)
    assert helper(err)
    assert err.code == code
    assert err.reason == reason
    assert "cluster 'c1'" in str(err)
    assert "GET https://h/api/v1/x" in str(err)


def test_code_wins_over_a_contradicting_reason() -> None:
    err = e.api_error_from_status(status(404, "InternalError"))
    assert isinstance(err, e.NotFoundError)
    assert isinstance(err, LookupError)


def test_unknown_reason_falls_back_to_code_then_base() -> None:
    assert type(e.api_error_from_status(status(422, ""))) is e.InvalidError
    odd = e.api_error_from_status(status(418, "Teapot"))
    assert type(odd) is e.APIError
    assert not e.is_not_found(odd)
    assert not e.is_conflict(ValueError("x"))
    assert not e.is_not_found(None)


def test_retry_after_and_causes() -> None:
    err = e.api_error_from_status(status(429, "TooManyRequests", retryAfterSeconds=3))
    assert err.retry_after == 3.0
    err = e.api_error_from_status(status(429, "TooManyRequests"), headers={"Retry-After": "7"})
    assert err.retry_after == 7.0
    invalid = e.api_error_from_status(
        status(422, "Invalid", causes=[{"type": "FieldValueRequired", "field": "spec.x"}])
    )
    assert invalid.causes == [{"type": "FieldValueRequired", "field": "spec.x"}]


def test_config_and_transport_errors_name_the_culprit() -> None:
    c = e.ConfigError("cannot read x", source="/k/config", context="prod", field="users[a].client-key")
    assert str(c) == "kubeconfig /k/config, context 'prod', field 'users[a].client-key': cannot read x"
    assert (c.source, c.context, c.field) == ("/k/config", "prod", "users[a].client-key")
    t = e.TransportError("unreachable", cluster="east", url="https://e/api", method="GET")
    assert str(t) == "cluster 'east': GET https://e/api: unreachable"
    assert isinstance(e.ClusterNotFoundError("x"), LookupError)
    assert "no matches for kind v1/Foo" in str(e.NoKindMatchError("v1/Foo"))
