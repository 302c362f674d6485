"""The token webhook through which real control planes accept users added at run time.

kube-apiserver reads ``--token-auth-file`` only when it starts, so bearer tokens registered later
with ``Server.add_user(..., token=...)`` are checked by a TokenReview webhook this process
serves over HTTPS (a serving certificate of mcr-envtest's CA) on loopback. Each control plane
has its own path; the webhook answers from the token table of the server currently holding that
control plane (:meth:`TokenWebhook.bind`), and with "not authenticated" when none holds it.
"""

from __future__ import annotations

import json
import ssl
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from mcr_envtest import certs, kubeconfig
from mcr_envtest.auth import UserInfo

__all__ = ["Lookup", "TokenWebhook"]

Lookup = Callable[[str], UserInfo | None]


class TokenWebhook:
    """An HTTPS TokenReview server on 127.0.0.1 (daemon thread; :meth:`close` stops it)."""

    def __init__(self, work: Path) -> None:
        self._lookups: dict[str, Lookup] = {}
        ca = certs.process_ca()
        pair = ca.serving(("127.0.0.1",))
        cert, key = work / "webhook.crt", work / "webhook.key"
        cert.write_bytes(pair.cert_pem)
        key.touch(mode=0o600)
        key.write_bytes(pair.key_pem)
        ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        ctx.load_cert_chain(cert, key)
        key.unlink()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                try:
                    review = json.loads(self.rfile.read(length))
                    token = str(review["spec"]["token"])
                except (ValueError, KeyError, TypeError):
                    self.send_error(400, "not a TokenReview")
                    return
                lookup = owner._lookups.get(self.path.partition("?")[0].strip("/"))
                user = lookup(token) if lookup is not None else None
                status: dict[str, Any] = {"authenticated": user is not None}
                if user is not None:
                    status["user"] = {"username": user.name, "uid": user.uid, "groups": list(user.groups)}
                body = json.dumps(
                    {"apiVersion": review.get("apiVersion"), "kind": "TokenReview", "status": status}
                ).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                return  # requests carry credentials; nothing is logged

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        # the handshake happens in each request's thread, not in the accepting loop
        self._server.socket = ctx.wrap_socket(
            self._server.socket, server_side=True, do_handshake_on_connect=False
        )
        self.port = int(self._server.server_address[1])
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="mcr-envtest-token-webhook", daemon=True
        )
        self._thread.start()

    def config(self, path: Path, name: str) -> Path:
        """Write the webhook kubeconfig kube-apiserver ``name`` reads (its own URL path)."""
        doc = kubeconfig.build(
            server=f"https://127.0.0.1:{self.port}/{name}",
            ca_pem=certs.process_ca().cert_pem,
            user="kube-apiserver",
            cluster_name="mcr-envtest-token-webhook",
        )
        return kubeconfig.write(doc, path)

    def bind(self, name: str, lookup: Lookup | None) -> None:
        """Answer for control plane ``name`` from ``lookup`` (None: nobody is authenticated)."""
        if lookup is None:
            self._lookups.pop(name, None)
        else:
            self._lookups[name] = lookup

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
