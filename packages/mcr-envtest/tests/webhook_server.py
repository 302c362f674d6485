"""A small HTTPS admission and conversion webhook server for the webhook tests.

It serves on 127.0.0.1 with a serving certificate of its own test CA, records every
AdmissionReview request it receives, and answers per path with the behaviour a test installs.
Objects whose name starts with ``probe`` are always allowed unchanged: tests create them (dry
run) to learn that kube-apiserver has picked up a configuration.
"""

from __future__ import annotations

import asyncio
import base64
import itertools
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from mcr.testing import eventually
from mcr_envtest import certs

Behaviour = Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]

_probes = itertools.count()


class Hooks:
    """The server; :meth:`start` and :meth:`close` bound its life."""

    def __init__(self) -> None:
        self.ca = certs.CA("webhook-test-ca")
        self.seen: list[tuple[str, dict[str, Any]]] = []
        self.behaviour: dict[str, Behaviour] = {}
        self.conversions: list[dict[str, Any]] = []
        self.convert: Callable[[dict[str, Any], str], dict[str, Any]] | None = None
        self._runner: web.AppRunner | None = None
        self.url = ""

    @property
    def ca_bundle(self) -> str:
        return base64.b64encode(self.ca.cert_pem).decode()

    async def start(self, tmp: Any) -> None:
        import ssl

        pair = self.ca.serving(("127.0.0.1",))
        cert, key = tmp / "hook.crt", tmp / "hook.key"
        cert.write_bytes(pair.cert_pem)
        key.write_bytes(pair.key_pem)
        ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        ctx.load_cert_chain(cert, key)
        app = web.Application()
        app.router.add_post("/convert", self._convert)
        app.router.add_post("/{path:.*}", self._admit)
        self._runner = web.AppRunner(app, shutdown_timeout=0.2, handler_cancellation=True)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0, ssl_context=ctx)
        await site.start()
        port = self._runner.addresses[0][1]
        self.url = f"https://127.0.0.1:{port}"

    async def close(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    def requests(self, path: str, name: str | None = None) -> list[dict[str, Any]]:
        """The requests received on ``path`` (for objects named ``name``), oldest first."""
        return [r for p, r in self.seen if p == path and (name is None or r.get("name") == name)]

    async def _admit(self, request: web.Request) -> web.Response:
        review = await request.json()
        req = review["request"]
        self.seen.append((request.path, req))
        obj = req.get("object") or req.get("oldObject") or {}
        answer: dict[str, Any] = {}
        if not str((obj.get("metadata") or {}).get("name", "")).startswith("probe"):
            fn = self.behaviour.get(request.path)
            if fn is not None:
                answer = await fn(req)
        response = {"uid": req["uid"], "allowed": True, **answer}
        return _closing(
            web.json_response(
                {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response}
            )
        )

    async def _convert(self, request: web.Request) -> web.Response:
        review = await request.json()
        req = review["request"]
        self.conversions.append(req)
        response: dict[str, Any] = {"uid": req["uid"]}
        if self.convert is None:
            response["result"] = {"status": "Failure", "message": "conversions are switched off"}
        else:
            response["result"] = {"status": "Success"}
            response["convertedObjects"] = [self.convert(o, req["desiredAPIVersion"]) for o in req["objects"]]
        return _closing(
            web.json_response(
                {"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview", "response": response}
            )
        )

    async def active(self, raw: Any, namespace: str, paths: list[str]) -> None:
        """Wait until the server's configurations call every one of ``paths`` for a ConfigMap
        created (dry run) in ``namespace``."""

        async def called() -> bool:
            name = f"probe-{next(_probes)}"
            body = {"metadata": {"name": name, "labels": {"hooked": "yes"}}}
            await raw.json("POST", f"/api/v1/namespaces/{namespace}/configmaps?dryRun=All", json=body)
            return all(self.requests(p, name) for p in paths)

        await eventually(called, timeout=30, interval=0.1, message=f"webhooks {paths} are called")


def _closing(resp: web.Response) -> web.Response:
    """No keep-alive: a kube-apiserver holds no connection to the server past the answer, so
    closing the server leaves no socket behind."""
    resp.force_close()
    return resp


async def sleep_then_allow(seconds: float) -> dict[str, Any]:
    await asyncio.sleep(seconds)
    return {}
