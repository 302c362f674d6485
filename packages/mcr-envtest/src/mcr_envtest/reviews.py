"""Answers of the review and token endpoints: SelfSubjectAccessReview (``kubectl auth can-i``),
SelfSubjectRulesReview (``kubectl auth can-i --list``), SelfSubjectReview (``kubectl auth
whoami``), TokenRequest (``kubectl create token``), and the delegated TokenReview and
SubjectAccessReview that servers use to authenticate and authorize their own callers."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

from . import errors
from .auth import Authenticator, Authorizer, RequestAttributes, Unauthenticated, UserInfo

__all__ = [
    "self_subject_access_review",
    "self_subject_review",
    "self_subject_rules_review",
    "subject_access_review",
    "token_request",
    "token_review",
]


def _now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


async def self_subject_access_review(
    authorizer: Authorizer, user: UserInfo, body: dict[str, Any]
) -> dict[str, Any]:
    """Answer a SelfSubjectAccessReview (``kubectl auth can-i``) for ``user``.

    Raises :class:`errors.StatusError` 422 unless exactly one of ``spec.resourceAttributes`` and
    ``spec.nonResourceAttributes`` is given.
    """
    spec = body.get("spec") if isinstance(body.get("spec"), dict) else {}
    assert isinstance(spec, dict)
    _metadata_empty(body)
    attrs = _attributes(spec)
    allowed, reason = authorizer.authorize(user, attrs)
    status: dict[str, Any] = {"allowed": allowed}
    if reason:
        status["reason"] = reason
    md = dict(body.get("metadata") or {})
    return {
        "kind": "SelfSubjectAccessReview",
        "apiVersion": "authorization.k8s.io/v1",
        "metadata": md,
        "spec": spec,
        "status": status,
    }


async def self_subject_rules_review(
    authorizer: Authorizer, user: UserInfo, body: dict[str, Any]
) -> dict[str, Any]:
    """Answer a SelfSubjectRulesReview (``kubectl auth can-i --list``) for ``spec.namespace``."""
    spec = body.get("spec") if isinstance(body.get("spec"), dict) else {}
    assert isinstance(spec, dict)
    resource_rules, non_resource_rules = authorizer.rules_for(user, str(spec.get("namespace") or ""))
    md = dict(body.get("metadata") or {})
    md["creationTimestamp"] = _now()
    return {
        "kind": "SelfSubjectRulesReview",
        "apiVersion": "authorization.k8s.io/v1",
        "metadata": md,
        "spec": spec,
        "status": {
            "resourceRules": resource_rules,
            "nonResourceRules": non_resource_rules,
            "incomplete": False,
        },
    }


def self_subject_review(user: UserInfo, body: dict[str, Any]) -> dict[str, Any]:
    """Answer a SelfSubjectReview (``kubectl auth whoami``) with ``user``'s attributes."""
    info: dict[str, Any] = {"username": user.name, "groups": list(user.groups)}
    if user.uid:
        info["uid"] = user.uid
    if user.extra:
        info["extra"] = {k: list(v) for k, v in user.extra}
    md = dict((body or {}).get("metadata") or {})
    md["creationTimestamp"] = _now()
    return {
        "kind": "SelfSubjectReview",
        "apiVersion": "authentication.k8s.io/v1",
        "metadata": md,
        "status": {"userInfo": info},
    }


def token_request(
    authenticator: Authenticator, namespace: str, sa_name: str, sa_uid: str, body: dict[str, Any]
) -> dict[str, Any]:
    """Issue a token for ServiceAccount ``namespace/sa_name`` (``kubectl create token``).

    ``spec.expirationSeconds`` defaults to 3600 and must be at least 600; ``spec.audiences``
    defaults to the server's issuer. Raises :class:`errors.StatusError` 422 for invalid specs.
    """
    spec = dict((body or {}).get("spec") or {})
    expiration = spec.get("expirationSeconds", 3600)
    if not isinstance(expiration, int) or isinstance(expiration, bool) or expiration < 600:
        msg = f"Invalid value: {expiration}: may not specify a duration less than 10 minutes"
        raise errors.StatusError(
            422,
            "Invalid",
            f'TokenRequest.authentication.k8s.io "" is invalid: spec.expirationSeconds: {msg}',
            details={
                "group": "authentication.k8s.io",
                "kind": "TokenRequest",
                "causes": [
                    {
                        "reason": "FieldValueInvalid",
                        "type": "FieldValueInvalid",
                        "message": msg,
                        "field": "spec.expirationSeconds",
                    }
                ],
            },
        )
    expiration = min(expiration, 48 * 3600)
    audiences = spec.get("audiences") or [authenticator.issuer]
    token, expires = authenticator.issue_service_account_token(
        namespace, sa_name, sa_uid, audiences=[str(a) for a in audiences], expiration_seconds=expiration
    )
    spec["audiences"] = audiences
    spec["expirationSeconds"] = expiration
    spec.setdefault("boundObjectRef", None)
    return {
        "kind": "TokenRequest",
        "apiVersion": "authentication.k8s.io/v1",
        "metadata": {"name": sa_name, "namespace": namespace, "creationTimestamp": _now()},
        "spec": spec,
        "status": {"token": token, "expirationTimestamp": expires},
    }


def _metadata_empty(body: dict[str, Any]) -> None:
    """An access review may carry no metadata (but the managedFields recorded for its writer);
    otherwise a 422."""
    md = body.get("metadata")
    # what decodes to an empty ObjectMeta (kubectl sends ``creationTimestamp: null``) is empty
    sent = (
        {k: v for k, v in md.items() if k != "managedFields" and v not in (None, "", 0, {}, [])}
        if isinstance(md, dict)
        else md
    )
    if sent:
        message = f"Invalid value: {json.dumps(md, separators=(',', ':'))}: must be empty"
        raise errors.StatusError(
            422,
            "Invalid",
            f'.authorization.k8s.io "" is invalid: metadata: {message}',
            details={
                "group": "authorization.k8s.io",
                "causes": [{"reason": "FieldValueInvalid", "message": message, "field": "metadata"}],
            },
        )


def _attributes(spec: dict[str, Any]) -> RequestAttributes:
    res, non = spec.get("resourceAttributes"), spec.get("nonResourceAttributes")
    if (res is None) == (non is None):
        message = (
            "Invalid value: null: exactly one of nonResourceAttributes or resourceAttributes "
            "must be specified"
        )
        # kube-apiserver names no kind here (it reads it from the decoded internal object)
        raise errors.StatusError(
            422,
            "Invalid",
            f'.authorization.k8s.io "" is invalid: spec: {message}',
            details={
                "group": "authorization.k8s.io",
                "causes": [{"reason": "FieldValueInvalid", "message": message, "field": "spec"}],
            },
        )
    if isinstance(res, dict):
        return RequestAttributes(
            verb=str(res.get("verb", "")),
            group=str(res.get("group", "")),
            resource=str(res.get("resource", "")),
            subresource=str(res.get("subresource", "")),
            namespace=str(res.get("namespace", "")),
            name=str(res.get("name", "")),
            path="",
            resource_request=True,
        )
    assert isinstance(non, dict)
    return RequestAttributes(
        verb=str(non.get("verb", "")),
        group="",
        resource="",
        subresource="",
        namespace="",
        name="",
        path=str(non.get("path", "")),
        resource_request=False,
    )


def token_review(authenticator: Authenticator, body: dict[str, Any]) -> dict[str, Any]:
    """Answer a TokenReview: who ``spec.token`` stands for, as the server authenticates it.

    ``spec.audiences`` (default: the server's issuer) must include the server's issuer for the
    token to authenticate. An invalid token is not an error: the answer says ``authenticated:
    false`` with the reason in ``status.error``.
    """
    spec = dict((body or {}).get("spec") or {})
    token = str(spec.get("token") or "")
    wanted = [str(a) for a in spec.get("audiences") or []]
    status: dict[str, Any] = {"user": {}}
    try:
        if not token:
            raise Unauthenticated("token is empty")
        if wanted and authenticator.issuer not in wanted:
            raise Unauthenticated("token audiences are invalid for the target audiences")
        user = authenticator.user_for_token(token)
    except Unauthenticated as exc:
        status["error"] = f"[invalid bearer token, {exc}]"
    else:
        info: dict[str, Any] = {"username": user.name, "groups": list(user.groups)}
        if user.uid:
            info["uid"] = user.uid
        if user.extra:
            info["extra"] = {k: list(v) for k, v in user.extra}
        status = {"authenticated": True, "user": info, "audiences": wanted or [authenticator.issuer]}
    md = dict((body or {}).get("metadata") or {})
    md["creationTimestamp"] = _now()
    return {
        "kind": "TokenReview",
        "apiVersion": "authentication.k8s.io/v1",
        "metadata": md,
        "spec": spec,
        "status": status,
    }


async def subject_access_review(authorizer: Authorizer, body: dict[str, Any]) -> dict[str, Any]:
    """Answer a SubjectAccessReview: may ``spec.user`` (with ``spec.groups``) do what is asked?

    Raises :class:`errors.StatusError` 422 when neither ``spec.user`` nor ``spec.groups`` is
    given, or unless exactly one of the resource and non-resource attributes is.
    """
    spec = body.get("spec") if isinstance(body.get("spec"), dict) else {}
    assert isinstance(spec, dict)
    name, groups = str(spec.get("user") or ""), [str(g) for g in spec.get("groups") or []]
    if not name and not groups:
        raise errors.StatusError(
            422,
            "Invalid",
            'SubjectAccessReview.authorization.k8s.io "" is invalid: spec.user: Invalid value: "": '
            "at least one of user or group must be specified",
            details={
                "group": "authorization.k8s.io",
                "kind": "SubjectAccessReview",
                "causes": [
                    {
                        "reason": "FieldValueInvalid",
                        "message": 'Invalid value: "": at least one of user or group must be specified',
                        "field": "spec.user",
                    }
                ],
            },
        )
    _metadata_empty(body)
    attrs = _attributes(spec)
    extra = spec.get("extra") if isinstance(spec.get("extra"), dict) else {}
    assert isinstance(extra, dict)
    user = UserInfo(
        name,
        tuple(groups),
        str(spec.get("uid") or ""),
        tuple((str(k), tuple(str(v) for v in vs or [])) for k, vs in extra.items()),
    )
    allowed, reason = authorizer.authorize(user, attrs)
    status: dict[str, Any] = {"allowed": allowed}
    if reason:
        status["reason"] = reason
    md = dict(body.get("metadata") or {})
    md["creationTimestamp"] = _now()
    return {
        "kind": "SubjectAccessReview",
        "apiVersion": "authorization.k8s.io/v1",
        "metadata": md,
        "spec": spec,
        "status": status,
    }
