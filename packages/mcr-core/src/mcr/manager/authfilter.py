"""Authentication and authorization of ``/metrics`` scrapers, delegated to the local cluster.

:func:`with_authentication_and_authorization` is a filter provider for the manager's
``metrics_filter_provider`` (controller-runtime's ``filters.WithAuthenticationAndAuthorization``):
the scraper's bearer token is checked with a TokenReview, then whether that user may ``get`` the
non-resource URL of the request (``/metrics``) with a SubjectAccessReview. The operator's own
credentials need ``create`` on ``tokenreviews`` (authentication.k8s.io) and
``subjectaccessreviews`` (authorization.k8s.io), as the ``system:auth-delegator`` ClusterRole grants.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from aiohttp import web

from mcr.errors import MCRError
from mcr.rest.config import RestConfig
from mcr.rest.transport import Transport

__all__ = ["FilterProvider", "RequestFilter", "with_authentication_and_authorization"]

log = logging.getLogger("mcr.manager")

_TOKEN_REVIEWS = "/apis/authentication.k8s.io/v1/tokenreviews"
_ACCESS_REVIEWS = "/apis/authorization.k8s.io/v1/subjectaccessreviews"


class RequestFilter(Protocol):
    """Decides whether a request reaches its handler.

    Calling it answers ``None`` to let the request through, or the response to send instead.
    ``close()`` releases what it holds; the server calls it once when it stops.
    """

    def __call__(self, request: web.Request) -> Awaitable[web.StreamResponse | None]: ...

    async def close(self) -> None: ...


FilterProvider = Callable[[RestConfig], RequestFilter]
"""Builds a :class:`RequestFilter` from the local cluster's config when the server starts."""


class _TTLCache:
    def __init__(self, ttl: float, size: int = 1024) -> None:
        self.ttl = ttl
        self.size = size
        self._items: OrderedDict[str, tuple[float, Any]] = OrderedDict()

    def get(self, key: str) -> Any:
        hit = self._items.get(key)
        if hit is None or hit[0] < time.monotonic():
            self._items.pop(key, None)
            return None
        return hit[1]

    def put(self, key: str, value: Any) -> None:
        self._items[key] = (time.monotonic() + self.ttl, value)
        self._items.move_to_end(key)
        while len(self._items) > self.size:
            self._items.popitem(last=False)


def _text(status: int, message: str) -> web.Response:
    headers = {"WWW-Authenticate": 'Bearer realm="mcr metrics"'} if status == 401 else None
    return web.Response(status=status, text=message + "\n", headers=headers)


class _AuthFilter:
    def __init__(self, config: RestConfig, cache_ttl: float) -> None:
        self._transport: Transport = config.transport(cluster_name="")
        self._users = _TTLCache(cache_ttl)
        self._decisions = _TTLCache(cache_ttl)

    async def close(self) -> None:
        await self._transport.close()

    async def _create(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        resp = await self._transport.request(
            "POST", path, body=json.dumps(body).encode(), content_type="application/json"
        )
        out = resp.json()
        return out if isinstance(out, dict) else {}

    async def _user(self, token: str) -> dict[str, Any] | None:
        key = hashlib.sha256(token.encode()).hexdigest()
        cached = self._users.get(key)
        if cached is not None:
            return cached or None
        review = await self._create(
            _TOKEN_REVIEWS,
            {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": token}},
        )
        status = review.get("status") or {}
        user = status.get("user") if status.get("authenticated") else None
        self._users.put(key, user or {})
        return user if isinstance(user, dict) and user else None

    async def _allowed(self, user: dict[str, Any], verb: str, path: str) -> bool:
        spec: dict[str, Any] = {
            "user": user.get("username", ""),
            "groups": user.get("groups") or [],
            "nonResourceAttributes": {"path": path, "verb": verb},
        }
        if user.get("uid"):
            spec["uid"] = user["uid"]
        if user.get("extra"):
            spec["extra"] = user["extra"]
        key = hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()
        cached = self._decisions.get(key)
        if cached is not None:
            return bool(cached)
        review = await self._create(
            _ACCESS_REVIEWS,
            {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": spec},
        )
        allowed = bool((review.get("status") or {}).get("allowed"))
        self._decisions.put(key, allowed)
        return allowed

    async def __call__(self, request: web.Request) -> web.StreamResponse | None:
        scheme, _, token = request.headers.get("Authorization", "").partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token:
            return _text(401, "Unauthorized: a bearer token is required")
        try:
            user = await self._user(token)
            if user is None:
                return _text(401, "Unauthorized")
            verb = "get" if request.method in ("GET", "HEAD") else request.method.lower()
            if not await self._allowed(user, verb, request.path):
                return _text(
                    403, f"Forbidden: user {user.get('username', '')!r} may not {verb} {request.path}"
                )
        except MCRError as exc:
            # The review itself failed (no RBAC for reviews, server unreachable): not the caller's fault.
            log.error("metrics authentication or authorization failed: %s", exc)
            return _text(500, "Internal Server Error: authentication or authorization failed")
        return None


def with_authentication_and_authorization(*, cache_ttl: float = 10.0) -> FilterProvider:
    """A filter provider admitting requests whose bearer token the local cluster authenticates and
    whose user it authorizes to ``get`` the request's path.

    Answers 401 without a bearer token or for one the TokenReview rejects, 403 when the
    SubjectAccessReview denies, and 500 when a review cannot be made. Review results are cached for
    ``cache_ttl`` seconds per token and per decision (tokens are kept only as digests).
    """
    if cache_ttl < 0:
        raise ValueError(f"cache_ttl must not be negative, got {cache_ttl}")

    def provide(config: RestConfig) -> RequestFilter:
        return _AuthFilter(config, cache_ttl)

    return provide
