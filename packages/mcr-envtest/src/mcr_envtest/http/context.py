"""What every verb handler is given: the parsed request (:class:`Ctx`), the parts of its server
it may use (:class:`Backend`), and the JSON and Status responses it answers with."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import orjson
from aiohttp import web

from mcr_envtest import errors
from mcr_envtest.schema.protobuf import PROTOBUF
from mcr_envtest.schema.protobuf_encode import encode_object

if TYPE_CHECKING:
    from mcr_envtest.auth import Authenticator, Authorizer, UserInfo
    from mcr_envtest.faults import Faults
    from mcr_envtest.resources import Registry, ResourceInfo
    from mcr_envtest.store import Store
    from mcr_envtest.writer import Writer

__all__ = ["JSON", "PROTOBUF", "Backend", "Ctx", "json_response", "protobuf_response", "status_response"]

JSON = "application/json"


class Backend(Protocol):
    """The parts of a server the verb handlers use; :class:`~mcr_envtest.http.routes.Api`
    provides them. ``active_streams`` holds the watch responses being streamed."""

    store: Store
    registry: Registry
    writer: Writer
    faults: Faults
    authenticator: Authenticator
    authorizer: Authorizer
    watch_timeout: tuple[float, float]
    bookmark_interval: float
    active_streams: set[web.StreamResponse]


@dataclass
class Ctx:
    """A parsed resource request."""

    request: web.Request
    info: ResourceInfo
    namespace: str  # "" for cluster scope or "all namespaces"
    name: str
    subresource: str
    verb: str
    user: UserInfo
    all_namespaces: bool = False
    output: str = "json"  # json | table | pom | yaml | protobuf
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def query(self) -> Any:
        return self.request.query


def json_response(obj: Any, status: int = 200, headers: dict[str, str] | None = None) -> web.Response:
    """A JSON response (``obj`` may be pre-encoded bytes), newline-terminated as upstream's
    encoder writes every body."""
    body = obj if isinstance(obj, bytes) else orjson.dumps(obj, option=orjson.OPT_APPEND_NEWLINE)
    if not body.endswith(b"\n"):
        body += b"\n"
    return web.Response(body=body, status=status, content_type=JSON, headers=headers)


def status_response(exc: errors.StatusError, *, protobuf: bool = False) -> web.Response:
    """The Status of ``exc`` encoded byte for byte as kube-apiserver does (as protobuf when
    ``protobuf``: the request's Accept prefers it)."""
    if isinstance(exc, errors.PageNotFound):
        return web.Response(status=404, text="404 page not found\n", content_type="text/plain")
    if protobuf:
        return protobuf_response(encode_object(exc.status), exc.code, dict(exc.headers))
    return web.Response(
        body=errors.encode_status(exc.status), status=exc.code, content_type=JSON, headers=dict(exc.headers)
    )


def protobuf_response(body: bytes, status: int = 200, headers: dict[str, str] | None = None) -> web.Response:
    """A ``application/vnd.kubernetes.protobuf`` response of an encoded body."""
    resp = web.Response(body=body, status=status, headers=headers)
    resp.headers["Content-Type"] = PROTOBUF
    return resp
