"""Posting a review to a webhook over HTTPS, failing as kube-apiserver reports failures.

:func:`post` never blocks the event loop: the request is an aiohttp call bounded by the
webhook's timeout. Every failure (unreachable, untrusted certificate, timeout, non-200 answer,
body that is not a review) raises :class:`CallFailed` whose text is what kube-apiserver puts
after ``failed to call webhook:``/``received invalid webhook response:``.
"""

from __future__ import annotations

import base64
import binascii
import functools
import ssl
from typing import Any

import aiohttp
import orjson

from mcr_envtest.store import Store

__all__ = ["CallFailed", "post", "target_url"]


class CallFailed(Exception):
    """The webhook could not be called or answered with something unusable."""

    def __init__(self, reason: str, *, invalid: bool = False) -> None:
        super().__init__(reason)
        self.reason = reason
        self.invalid = invalid  # the call succeeded, the answer was not a usable review

    def text(self) -> str:
        prefix = "received invalid webhook response" if self.invalid else "failed to call webhook"
        return f"{prefix}: {self.reason}"


def target_url(store: Store, client_config: dict[str, Any], timeout: int) -> tuple[str, str]:
    """(the URL to post to, the URL as named in error messages) for a webhook clientConfig.

    A ``service`` reference is resolved to the Service's cluster IP, as kube-apiserver does
    without aggregator routing; a missing Service raises :class:`CallFailed`.
    """
    query = f"?timeout={timeout}s"
    url = client_config.get("url")
    if isinstance(url, str) and url:
        sep = "&" if "?" in url else ""
        full = url + (sep + query[1:] if sep else query)
        return full, full
    svc = client_config.get("service")
    if not isinstance(svc, dict):
        raise CallFailed("webhook clientConfig names neither a url nor a service")
    name, namespace = str(svc.get("name") or ""), str(svc.get("namespace") or "")
    port = int(svc.get("port") or 443)
    path = str(svc.get("path") or "")
    shown = f"https://{name}.{namespace}.svc:{port}{path}{query}"
    obj = store.get("", "services", namespace, name)
    if obj is None:
        raise CallFailed(f'Post "{shown}": service "{name}" not found')
    ip = str((obj.get("spec") or {}).get("clusterIP") or "")
    if not ip or ip == "None":
        raise CallFailed(f'Post "{shown}": service "{name}" has no cluster IP')
    host = f"[{ip}]" if ":" in ip else ip
    return f"https://{host}:{port}{path}{query}", shown


@functools.lru_cache(maxsize=64)
def _context_for(bundle: str) -> ssl.SSLContext:
    """A verifying client context trusting ``bundle`` (base64 PEM), or the system's roots for ""
    (kept: loading trust stores is file I/O)."""
    if not bundle:
        return ssl.create_default_context()
    pem = base64.b64decode(bundle, validate=True).decode()
    return ssl.create_default_context(cadata=pem)


def _ssl_context(client_config: dict[str, Any]) -> ssl.SSLContext:
    try:
        return _context_for(str(client_config.get("caBundle") or ""))
    except (binascii.Error, UnicodeDecodeError, ssl.SSLError, ValueError) as exc:
        raise CallFailed(f"unable to load the caBundle: {exc}") from None


def _tls_reason(exc: ssl.SSLCertVerificationError) -> str:
    if exc.verify_code in (2, 19, 20, 21):  # issuer unknown, self-signed in chain, unable to verify
        return "tls: failed to verify certificate: x509: certificate signed by unknown authority"
    if exc.verify_code == 62:  # hostname mismatch
        return f"tls: failed to verify certificate: x509: {exc.verify_message}"
    return f"tls: failed to verify certificate: {exc.verify_message or exc}"


async def post(
    store: Store, client_config: dict[str, Any], timeout: int, review: dict[str, Any]
) -> dict[str, Any]:
    """POST ``review`` to the webhook and return its decoded answer; see the module docstring.

    Cancellation propagates (the connection is closed); the call ends after ``timeout`` seconds.
    """
    url, shown = target_url(store, client_config, timeout)
    ctx = _ssl_context(client_config)
    where = f'Post "{shown}"'
    try:
        async with (
            aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(ssl=ctx, force_close=True),
                timeout=aiohttp.ClientTimeout(total=timeout),
            ) as session,
            session.post(
                url,
                data=orjson.dumps(review),
                headers={"Content-Type": "application/json", "Accept": "application/json"},
            ) as resp,
        ):
            body = await resp.read()
            status = resp.status
    except TimeoutError:
        raise CallFailed(f"{where}: context deadline exceeded") from None
    except aiohttp.ClientConnectorCertificateError as exc:
        cert_error = exc.certificate_error
        if isinstance(cert_error, ssl.SSLCertVerificationError):
            raise CallFailed(f"{where}: {_tls_reason(cert_error)}") from None
        raise CallFailed(f"{where}: tls: {cert_error}") from None
    except aiohttp.ClientConnectorError as exc:
        if isinstance(exc.os_error, ConnectionRefusedError):
            raise CallFailed(
                f"{where}: dial tcp {exc.host}:{exc.port}: connect: connection refused"
            ) from None
        raise CallFailed(f"{where}: {exc.os_error}") from None
    except (aiohttp.ClientError, ssl.SSLError, OSError) as exc:
        raise CallFailed(f"{where}: {exc}") from None
    if status != 200:
        text = body.decode(errors="replace").strip()
        raise CallFailed(f"the server responded with status {status}: {text}")
    try:
        answer = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise CallFailed(f"the response is not JSON: {exc}", invalid=True) from None
    if not isinstance(answer, dict):
        raise CallFailed("the response is not a JSON object", invalid=True)
    return answer
