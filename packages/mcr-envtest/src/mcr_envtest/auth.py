"""Authentication (tokens, client certificates) and RBAC authorization (first cut: allow all)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class UserInfo:
    """An authenticated user."""

    name: str
    groups: tuple[str, ...]
    uid: str = ""


@dataclass(frozen=True)
class RequestAttributes:
    """What a request wants to do, as RBAC sees it."""

    verb: str
    group: str
    resource: str
    subresource: str
    namespace: str
    name: str
    path: str
    resource_request: bool


class Unauthenticated(Exception):
    """Credentials were presented but are invalid (401)."""


class Authenticator:
    """Maps request credentials to users."""

    def __init__(self) -> None:
        self._tokens: dict[str, UserInfo] = {}

    def add_token(self, token: str, user: UserInfo) -> None:
        self._tokens[token] = user

    def authenticate(self, request: Any) -> UserInfo | None:
        header = request.headers.get("Authorization", "")
        if header.startswith("Bearer "):
            user = self._tokens.get(header[7:].strip())
            if user is None:
                raise Unauthenticated("invalid bearer token")
            return user
        return None


class Authorizer:
    """RBAC authorizer reading Roles and bindings from the store."""

    def __init__(self, store: Any) -> None:
        self._store = store

    def authorize(self, user: UserInfo, attrs: RequestAttributes) -> tuple[bool, str]:
        return True, ""


async def self_subject_access_review(
    authorizer: Authorizer, user: UserInfo, body: dict[str, Any]
) -> dict[str, Any]:
    out = dict(body)
    out["status"] = {"allowed": True}
    return out


def self_subject_review(user: UserInfo, body: dict[str, Any]) -> dict[str, Any]:
    return {
        "kind": "SelfSubjectReview",
        "apiVersion": "authentication.k8s.io/v1",
        "metadata": {},
        "status": {"userInfo": {"username": user.name, "groups": list(user.groups), "uid": user.uid}},
    }


def token_request(
    authenticator: Authenticator, namespace: str, sa_name: str, sa_uid: str, body: dict[str, Any]
) -> dict[str, Any]:
    raise NotImplementedError("TokenRequest is not implemented yet")
