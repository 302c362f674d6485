"""Routing: URL parsing, content negotiation, authn/authz, faults, errors → Status.

One catch-all aiohttp route hands every request to :meth:`Api.dispatch`, which parses the
Kubernetes URL layout (F1), applies injected faults, authenticates and authorizes, then calls the
verb handlers in :mod:`.read` (get, list), :mod:`.watch` and :mod:`.write` (create, update,
patch, delete, subresources). Any :class:`~mcr_envtest.errors.StatusError` becomes a
Status response; any other exception becomes a 500 Status (the server never crashes on input).
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING, Any

import orjson
from aiohttp import web

from mcr_envtest import discovery, errors, health, metrics, openapi, openapi_v2
from mcr_envtest.auth import Authenticator, Authorizer, RequestAttributes, Unauthenticated, UserInfo
from mcr_envtest.faults import Faults, LoggedRequest
from mcr_envtest.impersonation import impersonate
from mcr_envtest.resources import Registry, deprecation_warning
from mcr_envtest.schema.protobuf import supported as protobuf_supported

from . import read, watch, write
from .context import Ctx, json_response, status_response
from .render import negotiate, prefers_protobuf

if TYPE_CHECKING:
    from mcr_envtest.store import Store
    from mcr_envtest.writer import Writer

__all__ = ["Api"]

log = logging.getLogger(__name__)

MAX_BODY = errors.MAX_REQUEST_BODY_BYTES
NON_RESOURCE_PUBLIC = ("/healthz", "/livez", "/readyz", "/version")


_METRIC_LABELS = web.RequestKey("mcr_envtest.metric_labels", metrics.RequestLabels)


def _not_found_json() -> errors.StatusError:
    """kube-apiserver's JSON 404 for a path under a served API it has no handler for."""
    return errors.StatusError(
        404, "NotFound", "the server could not find the requested resource", details=errors.EMPTY_DETAILS
    )


_METRIC_VERBS = {"create": "POST", "update": "PUT", "deletecollection": "DELETECOLLECTION"}


def _request_labels(ctx: Ctx) -> metrics.RequestLabels:
    verb = _METRIC_VERBS.get(ctx.verb, ctx.verb.upper())
    if verb == "PATCH" and ctx.request.content_type == "application/apply-patch+yaml":
        verb = "APPLY"
    scope = "resource" if ctx.name or ctx.verb == "create" else "namespace" if ctx.namespace else "cluster"
    return metrics.RequestLabels(
        verb=verb,
        group=ctx.info.group,
        version=ctx.info.version,
        resource=ctx.info.plural,
        subresource=ctx.subresource,
        scope=scope,
        dry_run="dryRun" in ctx.query,
    )


class Api:
    """The request handlers of one server, over its store, registry and writer."""

    def __init__(
        self,
        store: Store,
        registry: Registry,
        writer: Writer,
        faults: Faults,
        authenticator: Authenticator,
        authorizer: Authorizer,
        *,
        host_port: str,
        anonymous: bool = False,
        watch_timeout: tuple[float, float] = (1800.0, 3600.0),
        bookmark_interval: float = 60.0,
    ) -> None:
        self.store = store
        self.registry = registry
        self.writer = writer
        self.faults = faults
        self.authenticator = authenticator
        self.authorizer = authorizer
        self.host_port = host_port
        self.anonymous = anonymous
        self.watch_timeout = watch_timeout
        self.bookmark_interval = bookmark_interval
        self.shutting_down = False
        self.active_streams: set[web.StreamResponse] = set()
        self.metrics = metrics.Metrics()

    def make_app(self) -> web.Application:
        app = web.Application(client_max_size=MAX_BODY + 1024, handler_args={"max_field_size": 65536})
        app.router.add_route("*", "/{tail:.*}", self.dispatch)
        return app

    # ------------------------------------------------------------------ entry
    async def dispatch(self, request: web.Request) -> web.StreamResponse:
        user_name = ""
        who: list[str] = []
        status = 500
        started = time.monotonic()
        self.metrics.request_started(request.method)
        try:
            resp, user_name = await self._dispatch(request, who)
            status = resp.status
            return resp
        except errors.StatusError as exc:
            status = exc.code
            accept = request.headers.get("Accept", "")
            return status_response(exc, protobuf=request.path.startswith("/api") and prefers_protobuf(accept))
        except web.HTTPRequestEntityTooLarge:
            status = 413
            return status_response(errors.request_entity_too_large())
        except (ConnectionResetError, asyncio.CancelledError):
            status = 499
            raise
        except Exception as exc:
            log.exception("envtest: internal error on %s %s", request.method, request.path_qs)
            status = 500
            return status_response(
                errors.StatusError(500, "InternalError", f"Internal error occurred: {exc!r}")
            )
        finally:
            self.metrics.request_finished(
                request.method, request.get(_METRIC_LABELS), status, time.monotonic() - started
            )
            self.faults.request_log.append(
                LoggedRequest(
                    request.method,
                    request.path,
                    request.query_string,
                    status,
                    user_name or (who[-1] if who else ""),
                    time.time(),
                )
            )

    async def _dispatch(self, request: web.Request, who: list[str]) -> tuple[web.StreamResponse, str]:
        faults = self.faults
        if faults.latency_seconds:
            await asyncio.sleep(faults.latency_seconds)
        if self.shutting_down:
            raise errors.StatusError(
                503, "ServiceUnavailable", "apiserver is shutting down", headers={"Retry-After": "1"}
            )
        fail = faults.take_failure(request.method, request.path)
        if fail is not None:
            return self._injected_failure(*fail), ""
        path = request.path
        user = impersonate(request.headers, self._authenticate(request, path), self.authorizer)
        who.append(user.name)  # logged even when the request then fails
        # health paths: anyone authenticated (and anonymous users when allowed) may read them
        if path in ("/healthz", "/livez", "/readyz") or path.startswith(("/healthz/", "/livez/", "/readyz/")):
            return self._health(request), user.name
        segs = [s for s in path.split("/") if s]
        if not segs or segs[0] not in ("api", "apis"):
            return await self._non_resource(request, segs, user), user.name
        ctx = self._parse(request, segs, user)
        if ctx is None:
            return await self._non_resource(request, segs, user), user.name
        self._authorize(ctx)
        request[_METRIC_LABELS] = _request_labels(ctx)
        if ctx.verb == "watch" and not ctx.subresource:
            resp = await watch.handle(self, ctx)
        elif ctx.verb in ("get", "list") and not ctx.subresource:
            resp = await read.handle(self, ctx)
        else:
            resp = await write.handle(self, ctx)
        deprecated = deprecation_warning(ctx.info) if ctx.info.crd is not None else None
        if deprecated and not resp.prepared:  # a watch stream has sent its headers already
            others = resp.headers.popall("Warning", [])
            for text in ['299 - "' + deprecated.replace('"', '\\"') + '"', *others]:
                resp.headers.add("Warning", text)
        return resp, user.name

    @staticmethod
    def _health(request: web.Request) -> web.Response:
        endpoint, _, check = request.path.strip("/").partition("/")
        if check:
            text = health.check_body(endpoint, check)
            if text is None:
                raise errors.PageNotFound
        else:
            verbose = "verbose" in request.query
            text = health.endpoint_body(
                endpoint, verbose=verbose, exclude=request.query.getall("exclude", [])
            )
        resp = web.Response(
            text=text, headers={"Cache-Control": "no-cache, private", "X-Content-Type-Options": "nosniff"}
        )
        resp.content_type = "text/plain"
        resp.charset = "utf-8"
        return resp

    def _injected_failure(self, status: int, retry_after: float | None, text: bool) -> web.Response:
        headers: dict[str, str] = {}
        if retry_after is not None:
            headers["Retry-After"] = (
                str(int(retry_after)) if float(retry_after).is_integer() else str(retry_after)
            )
        if text:
            body = (
                "Too many requests, please try again later.\n" if status == 429 else "Internal Server Error\n"
            )
            return web.Response(status=status, text=body, content_type="text/plain", headers=headers)
        reasons = {
            429: "TooManyRequests",
            500: "InternalError",
            503: "ServiceUnavailable",
            504: "Timeout",
            409: "Conflict",
            502: "InternalError",
            401: "Unauthorized",
            403: "Forbidden",
        }
        details: dict[str, Any] | None = None
        if retry_after is not None:
            details = {"retryAfterSeconds": int(retry_after)}
        message = {
            429: "Too many requests, please try again later.",
            503: "the server is currently unable to handle the request",
        }.get(status, "injected fault")
        exc = errors.StatusError(
            status, reasons.get(status, "InternalError"), message, details=details, headers=headers
        )
        return status_response(exc)

    # ------------------------------------------------------------------ auth
    def _authenticate(self, request: web.Request, path: str) -> UserInfo:
        try:
            user = self.authenticator.authenticate(request)
        except Unauthenticated:
            raise errors.StatusError(401, "Unauthorized", "Unauthorized") from None
        if user is not None:
            return user
        if self.anonymous:  # without anonymous auth, even the health paths need credentials
            return UserInfo("system:anonymous", ("system:unauthenticated",))
        raise errors.StatusError(401, "Unauthorized", "Unauthorized")

    def _authorize(self, ctx: Ctx) -> None:
        user = ctx.user
        if "system:masters" in user.groups:
            return
        attrs = RequestAttributes(
            verb=ctx.verb,
            group=ctx.info.group,
            resource=ctx.info.plural,
            subresource=ctx.subresource,
            namespace=ctx.namespace,
            name=ctx.name,
            path=ctx.request.path,
            resource_request=True,
        )
        allowed, _reason = self.authorizer.authorize(user, attrs)
        if allowed:
            return
        res = ctx.info.plural + (f"/{ctx.subresource}" if ctx.subresource else "")
        scope = f'in the namespace "{ctx.namespace}"' if ctx.namespace else "at the cluster scope"
        what = f'{ctx.info.describe()} "{ctx.name}"' if ctx.name else ctx.info.describe()
        raise errors.forbidden(
            f'{what} is forbidden: User "{user.name}" cannot {ctx.verb} resource "{res}" in API group '
            f'"{ctx.info.group}" {scope}',
            ctx.info,
            ctx.name,
        )

    def _authorize_path(self, request: web.Request, user: UserInfo) -> None:
        if "system:masters" in user.groups or request.path in NON_RESOURCE_PUBLIC:
            return
        attrs = RequestAttributes(
            verb=request.method.lower(),
            group="",
            resource="",
            subresource="",
            namespace="",
            name="",
            path=request.path,
            resource_request=False,
        )
        allowed, _ = self.authorizer.authorize(user, attrs)
        if not allowed:
            message = f'forbidden: User "{user.name}" cannot {request.method.lower()} path "{request.path}"'
            raise errors.StatusError(403, "Forbidden", message, details=errors.EMPTY_DETAILS)

    # ------------------------------------------------------------------ parse
    def _parse(self, request: web.Request, segs: list[str], user: UserInfo) -> Ctx | None:
        if segs[0] == "api":
            if len(segs) < 3:
                return None
            group, version, rest = "", segs[1], segs[2:]
        else:
            if len(segs) < 4:
                return None
            group, version, rest = segs[1], segs[2], segs[3:]
        namespace = ""
        legacy_watch = rest[0] == "watch" and len(rest) > 1  # deprecated /watch/ path prefix
        if legacy_watch:
            rest = rest[1:]
        if rest[0] == "namespaces" and len(rest) >= 3 and rest[2] not in ("status", "finalize"):
            namespace = rest[1]
            rest = rest[2:]
        plural = rest[0]
        name = rest[1] if len(rest) > 1 else ""
        sub = rest[2] if len(rest) > 2 else ""
        info = self.registry.lookup(group, version, plural) if len(rest) <= 3 else None
        if info is None:
            if not self.registry.resources_for(group, version):
                raise errors.PageNotFound  # no such group-version
            raise _not_found_json()
        if namespace and not info.namespaced:
            raise _not_found_json()
        if sub and sub not in info.subresources:
            raise _not_found_json()
        method = request.method
        q = request.query
        collection = not name
        if method in ("GET", "HEAD"):
            if legacy_watch:
                verb = "watch"
            elif collection:
                verb = "watch" if q.get("watch", "") in ("1", "true", "True") else "list"
            else:
                verb = "get"
        elif method == "POST":
            verb = "create"
            if not collection and sub != "token":
                raise errors.method_not_allowed()
        elif method == "PUT":
            verb = "update"
        elif method == "PATCH":
            verb = "patch"
        elif method == "DELETE":
            verb = "deletecollection" if collection else "delete"
        else:
            raise errors.method_not_allowed()
        if collection and verb in ("update", "patch"):
            raise errors.method_not_allowed()
        check = "create" if (sub == "token" and verb == "create") else verb
        if not sub and check not in info.verbs:
            raise errors.method_not_allowed()
        if verb != "watch" or not q.get("watch"):
            pass
        encodable = info.crd is None and protobuf_supported(info.api_version, info.kind)
        output = negotiate(
            request.headers.get("Accept", ""),
            protobuf=encodable,
            builtin=info.crd is None,
            collection=not name and not sub,
        )
        return Ctx(
            request,
            info,
            namespace,
            name,
            sub,
            verb,
            user,
            all_namespaces=info.namespaced and not namespace,
            output=output,
        )

    # ------------------------------------------------------------------ non-resource
    async def _non_resource(
        self, request: web.Request, segs: list[str], user: UserInfo
    ) -> web.StreamResponse:
        self._authorize_path(request, user)
        if request.method not in ("GET", "HEAD"):
            raise errors.method_not_allowed()
        accept = request.headers.get("Accept", "")
        path = "/" + "/".join(segs)
        if path == "/version":  # indented and without a final newline, as kube-apiserver writes it
            body = orjson.dumps(discovery.version_info(), option=orjson.OPT_INDENT_2)
            return web.Response(body=body, content_type="application/json")
        if path == "/api":
            if discovery.wants_aggregated(accept):
                return self._aggregated(request, core=True)
            return json_response(discovery.api_versions(self.host_port))
        if path == "/apis":
            if discovery.wants_aggregated(accept):
                return self._aggregated(request, core=False)
            return json_response(discovery.api_group_list(self.registry))
        if len(segs) == 2 and segs[0] == "api":
            doc = discovery.api_resource_list(self.registry, "", segs[1])
            if doc is not None:
                return json_response(doc)
            raise _not_found_json()  # the core group is known, its version is not
        if len(segs) == 2 and segs[0] == "apis":
            for g, versions in self.registry.groups():
                if g == segs[1] and g:
                    return json_response(discovery.api_group(g, versions))
        if len(segs) == 3 and segs[0] == "apis":
            doc = discovery.api_resource_list(self.registry, segs[1], segs[2])
            if doc is not None:
                return json_response(doc)
            if any(g == segs[1] for g, _ in self.registry.groups()):
                raise _not_found_json()  # a known group, an unknown version
        if path == "/metrics":
            counts = {
                (f"{i.plural}.{i.group}" if i.group else i.plural): len(
                    self.store.list_objects(i.group, i.plural)
                )
                for i in self.registry.all()
                if self.registry.is_builtin(i) or i.crd is not None
            }
            resp = web.Response(
                body=self.metrics.exposition(counts), headers={"Cache-Control": "no-cache, private"}
            )
            resp.headers["Content-Type"] = metrics.CONTENT_TYPE
            return resp
        if path == "/openapi/v2":
            return self._openapi_v2(request, accept)
        if segs[:2] == ["openapi", "v3"]:
            return self._openapi_v3(request, segs[2:], accept)
        raise errors.PageNotFound

    def _openapi_v3(self, request: web.Request, rest: list[str], accept: str) -> web.Response:
        if not rest:  # the index, served as kube-apiserver serves it: JSON labelled text/plain
            body = orjson.dumps(openapi.root_document(self.registry))
            resp = web.Response(body=body, headers={"Cache-Control": "no-cache, private"})
            resp.content_type = "text/plain"
            resp.charset = "utf-8"
            return resp
        gv: tuple[str, str] | None = None
        if len(rest) == 2 and rest[0] == "api":
            gv = ("", rest[1])
        elif len(rest) == 3 and rest[0] == "apis":
            gv = (rest[1], rest[2])
        doc = openapi.group_version_document(self.registry, *gv) if gv is not None else None
        digest = openapi.group_version_hash(self.registry, *gv) if gv is not None else ""
        if len(rest) == 1 and rest[0] in openapi.STATIC_DOCUMENTS:
            doc, digest = openapi.STATIC_DOCUMENTS[rest[0]], openapi.STATIC_HASHES[rest[0]]
        if doc is None:  # kube-apiserver's OpenAPI v3 handler answers an empty 404 here
            resp = web.Response(status=404)
            resp.content_type = "application/octet-stream"
            return resp
        headers = {"Cache-Control": "no-cache, private", "Vary": "Accept"}
        if openapi_v2.negotiate(accept) is None:  # (kube-apiserver also serves gnostic protobuf)
            return web.Response(status=406, headers=headers)
        etag = f'"{digest}"'
        headers.update({"ETag": etag, "Accept-Ranges": "bytes"})
        if "hash" in request.query:
            headers["Cache-Control"] = "public, immutable"
            headers["Expires"] = time.strftime(
                "%a, %d %b %Y %H:%M:%S UTC", time.gmtime(time.time() + 365 * 86400)
            )
        if request.headers.get("If-None-Match") == etag:
            return web.Response(status=304, headers=headers)
        return json_response(doc, headers=headers)

    def _openapi_v2(self, request: web.Request, accept: str) -> web.Response:
        # kube-apiserver answers a type it cannot produce with an empty 406
        headers = {"Cache-Control": "no-cache, private", "Vary": "Accept-Encoding"}
        if openapi_v2.negotiate(accept) is None:
            return web.Response(status=406, headers=headers)
        body, etag = openapi_v2.document(self.registry)
        headers.update({"ETag": etag, "Accept-Ranges": "bytes"})
        if request.headers.get("If-None-Match") == etag:
            return web.Response(status=304, headers=headers)
        resp = web.Response(body=body, headers=headers)
        resp.content_type = openapi_v2.JSON
        return resp

    def _aggregated(self, request: web.Request, *, core: bool) -> web.Response:
        version = discovery.aggregated_version(request.headers.get("Accept", ""))
        body = orjson.dumps(discovery.aggregated(self.registry, core=core, version=version))
        tag = discovery.etag(body)
        headers = {"ETag": tag, "Vary": "Accept", "Cache-Control": "public"}
        ctype = discovery.AGGREGATED_CONTENT_TYPE.replace("v=v2;", f"v={version};")
        if request.headers.get("If-None-Match") == tag:
            return web.Response(status=304, headers=headers)
        resp = web.Response(body=body, headers=headers)
        resp.headers["Content-Type"] = ctype
        return resp
