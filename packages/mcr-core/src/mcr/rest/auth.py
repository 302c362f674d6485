"""Per-cluster credential sources: static tokens, token files, exec plugins, auth providers.

Each :class:`Credentials` object belongs to one cluster's :class:`~mcr.rest.config.RestConfig` and
caches what it obtained until it expires; the transport asks it for the ``Authorization`` header
before each request and calls :meth:`Credentials.refresh` once after a 401. Nothing here touches
the ``kubernetes`` package's process-global default configuration, and no credential value is ever
logged or shown by ``repr()``.
"""

from __future__ import annotations

import asyncio
import base64
import datetime as dt
import logging
import os
import time
import weakref
from collections.abc import Callable, Mapping
from typing import Any

import orjson

from mcr.errors import ConfigError

__all__ = [
    "Credentials",
    "ExecCredentials",
    "NoCredentials",
    "ProviderCredentials",
    "StaticToken",
    "TokenFile",
]

log = logging.getLogger("mcr.auth")

#: Refresh an exec credential this long before its expirationTimestamp, so a request rarely
#: carries a token that expires on the way (a 401 still triggers one refresh and retry).
EXPIRY_SKEW = 1.0


class Credentials:
    """Where a cluster's ``Authorization`` header comes from (base: no credentials)."""

    #: True if :meth:`refresh` can produce different credentials (worth retrying a 401).
    refreshable = False

    async def authorization(self) -> str | None:
        """The ``Authorization`` header value to send, or ``None``. Cached until it expires."""
        return None

    async def refresh(self, rejected: str | None = None) -> None:
        """Drop what is cached so the next :meth:`authorization` obtains fresh credentials.

        ``rejected``: the ``Authorization`` value the server answered 401 to, if the caller knows
        it; a source shared by several callers keeps credentials that already replaced it.
        """

    async def client_certificate(self) -> tuple[bytes, bytes] | None:
        """PEM ``(certificate, key)`` the credential source issued (exec plugins), if any."""
        return None

    @property
    def cert_generation(self) -> int:
        """Changes whenever :meth:`client_certificate` would return a different pair; the
        transport then opens a new TLS session pool."""
        return 0

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class NoCredentials(Credentials):
    """Anonymous access (or client certificates only)."""


class StaticToken(Credentials):
    """A fixed bearer token or basic-auth pair from the kubeconfig."""

    def __init__(self, header: str) -> None:
        self._header = header

    @classmethod
    def bearer(cls, token: str) -> StaticToken:
        return cls(f"Bearer {token}")

    @classmethod
    def basic(cls, username: str, password: str) -> StaticToken:
        return cls("Basic " + base64.b64encode(f"{username}:{password}".encode()).decode())

    async def authorization(self) -> str | None:
        return self._header


class TokenFile(Credentials):
    """A bearer token read from a file and re-read every ``period`` seconds (bound SA tokens rotate)."""

    refreshable = True

    def __init__(
        self, path: str, *, period: float = 60.0, source: str = "", field: str = "tokenFile"
    ) -> None:
        self.path = path
        self.period = period
        self._source = source
        self._field = field
        self._token: str | None = None
        self._read_at = 0.0
        self._lock = asyncio.Lock()

    def _read(self) -> str:
        try:
            with open(self.path, encoding="utf-8") as f:
                return f.read().strip()
        except OSError as exc:
            raise ConfigError(
                f"cannot read token file {self.path}: {exc.strerror}", source=self._source, field=self._field
            ) from None

    async def authorization(self) -> str | None:
        async with self._lock:
            if self._token is None or time.monotonic() - self._read_at >= self.period:
                self._token = await asyncio.to_thread(self._read)
                self._read_at = time.monotonic()
            return f"Bearer {self._token}" if self._token else None

    async def refresh(self, rejected: str | None = None) -> None:
        async with self._lock:
            self._token = None

    def __repr__(self) -> str:
        return f"TokenFile(path={self.path!r})"


def _parse_time(value: str) -> float:
    """RFC 3339 → POSIX seconds."""
    return dt.datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()


class _ExecState:
    """What one exec plugin configuration issued, shared by every cluster naming it."""

    __slots__ = (
        "__weakref__",
        "cert",
        "cert_gen",
        "ended",
        "expires_at",
        "failure",
        "fetched",
        "header",
        "lock",
        "runs",
    )

    def __init__(self) -> None:
        self.lock = asyncio.Lock()
        self.header: str | None = None
        self.cert: tuple[bytes, bytes] | None = None
        self.expires_at: float | None = None
        self.fetched = False
        self.cert_gen = 0
        self.runs = 0
        self.ended = 0  # runs that have ended, with a credential or an error
        # The last run's error, if it failed: (detail, field suffix after ``users[<u>].exec``).
        self.failure: tuple[str, str] | None = None


# Per event loop (an asyncio.Lock serves one loop), per plugin configuration: held weakly, so a
# configuration's state lives while some cluster's credentials use it.
_EXEC_STATES: weakref.WeakKeyDictionary[
    asyncio.AbstractEventLoop, weakref.WeakValueDictionary[tuple[Any, ...], _ExecState]
] = weakref.WeakKeyDictionary()


class ExecCredentials(Credentials):
    """Credentials issued by a kubeconfig ``exec`` plugin (client.authentication.k8s.io).

    The plugin runs (as a subprocess, without blocking the loop) on first use, again when the
    issued token reaches its ``expirationTimestamp`` (minus a small skew), and again after a 401.
    Concurrent callers share one run, and so do the clusters of a process whose kubeconfigs name
    the same plugin configuration (command, arguments, environment, API version and, with
    ``provideClusterInfo``, the cluster), as client-go shares one authenticator: a fleet whose
    contexts share one exec user runs the plugin once, not once per cluster. ``runs`` counts how
    many times the plugin was started for this configuration. Failures raise
    :class:`ConfigError` naming the kubeconfig, context and ``users[<u>].exec``.
    """

    refreshable = True

    def __init__(
        self,
        exec_config: Mapping[str, Any],
        *,
        source: str,
        context: str | None,
        user: str,
        base_dir: str | None = None,
        cluster_info: Mapping[str, Any] | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._source = source
        self._context = context
        self._field = f"users[{user}].exec"
        for key in ("command", "apiVersion"):
            if not exec_config.get(key):
                raise ConfigError(
                    f"exec plugin is missing {key!r}", source=source, context=context, field=self._field
                )
        command = str(exec_config["command"])
        if base_dir and os.sep in command and not os.path.isabs(command):
            command = os.path.normpath(os.path.join(base_dir, command))
        self._argv = [command, *(str(a) for a in exec_config.get("args") or [])]
        self._env = {str(e["name"]): str(e["value"]) for e in exec_config.get("env") or []}
        self._api_version = str(exec_config["apiVersion"])
        self._provide_cluster_info = bool(exec_config.get("provideClusterInfo"))
        self._cluster_info = dict(cluster_info or {})
        self._clock = clock
        self._key = (
            tuple(self._argv),
            tuple(sorted(self._env.items())),
            self._api_version,
            repr(self._cluster_info) if self._provide_cluster_info else "",  # never raises, any YAML
        )
        self._st = _ExecState()  # replaced by the shared state on first use in a loop
        self._st_loop: weakref.ReferenceType[asyncio.AbstractEventLoop] | None = None

    def _state(self) -> _ExecState:
        """The state shared with every credential of the same plugin configuration in this loop."""
        loop = asyncio.get_running_loop()
        if self._st_loop is None or self._st_loop() is not loop:
            states = _EXEC_STATES.get(loop)
            if states is None:
                states = _EXEC_STATES[loop] = weakref.WeakValueDictionary()
            state = states.get(self._key)
            if state is None:
                state = states[self._key] = _ExecState()
            self._st, self._st_loop = state, weakref.ref(loop)
        return self._st

    @property
    def runs(self) -> int:
        """How many times the plugin was started for this configuration (in the current loop)."""
        return self._st.runs

    def _valid(self, st: _ExecState) -> bool:
        if not st.fetched:
            return False
        return st.expires_at is None or self._clock() < st.expires_at - EXPIRY_SKEW

    async def _run(self, st: _ExecState) -> None:
        spec: dict[str, Any] = {"interactive": False}
        if self._provide_cluster_info and self._cluster_info:
            spec["cluster"] = self._cluster_info
        info = {"apiVersion": self._api_version, "kind": "ExecCredential", "spec": spec}
        env = {**os.environ, **self._env, "KUBERNETES_EXEC_INFO": orjson.dumps(info).decode()}
        st.runs += 1
        try:
            proc = await asyncio.create_subprocess_exec(
                *self._argv,
                env=env,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
            )
        except OSError as exc:
            raise ConfigError(
                f"cannot run exec plugin {self._argv[0]!r}: {exc.strerror}",
                source=self._source,
                context=self._context,
                field=f"{self._field}.command",
            ) from None
        try:
            stdout, stderr = await proc.communicate()
        except asyncio.CancelledError:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
            raise
        if proc.returncode != 0:
            tail = stderr.decode(errors="replace").strip()[-500:]
            raise ConfigError(
                f"exec plugin {self._argv[0]!r} exited with {proc.returncode}"
                + (f": {tail}" if tail else ""),
                source=self._source,
                context=self._context,
                field=self._field,
            )
        try:
            data = orjson.loads(stdout)
            status = data["status"]
        except (orjson.JSONDecodeError, KeyError, TypeError):
            raise ConfigError(
                f"exec plugin {self._argv[0]!r} did not print an ExecCredential with a status",
                source=self._source,
                context=self._context,
                field=self._field,
            ) from None
        token = status.get("token")
        cert = status.get("clientCertificateData")
        key = status.get("clientKeyData")
        if not token and not (cert and key):
            raise ConfigError(
                "exec plugin returned neither a token nor clientCertificateData+clientKeyData",
                source=self._source,
                context=self._context,
                field=self._field,
            )
        expiry = status.get("expirationTimestamp")
        try:
            expires_at = _parse_time(expiry) if expiry else None
        except ValueError:
            raise ConfigError(
                f"exec plugin returned a malformed expirationTimestamp {expiry!r}",
                source=self._source,
                context=self._context,
                field=self._field,
            ) from None
        st.header = f"Bearer {token}" if token else None
        new_cert = (cert.encode(), key.encode()) if cert and key else None
        if new_cert != st.cert:
            st.cert = new_cert
            st.cert_gen += 1
        st.expires_at = expires_at
        st.fetched = True

    async def _ensure(self) -> _ExecState:
        st = self._state()
        ended = st.ended
        async with st.lock:
            if self._valid(st):
                return st
            if st.ended != ended and st.failure is not None:
                # The run that ended while this caller waited failed: its error, for this cluster
                # (a broken plugin fails once for the fleet, not once per cluster in turn).
                detail, suffix = st.failure
                raise ConfigError(
                    detail, source=self._source, context=self._context, field=self._field + suffix
                )
            st.failure = None
            try:
                await self._run(st)
            except ConfigError as exc:
                st.failure = (exc.detail, (exc.field or self._field).removeprefix(self._field))
                raise
            finally:
                st.ended += 1
        return st

    async def authorization(self) -> str | None:
        return (await self._ensure()).header

    async def client_certificate(self) -> tuple[bytes, bytes] | None:
        return (await self._ensure()).cert

    @property
    def cert_generation(self) -> int:
        return self._st.cert_gen

    async def refresh(self, rejected: str | None = None) -> None:
        st = self._state()
        async with st.lock:
            # Other clusters of this plugin configuration may have re-run it since this caller's
            # request went out (their own 401s): then the rejected token is already replaced.
            if rejected is None or rejected == st.header:
                st.fetched = False

    def __repr__(self) -> str:
        return f"ExecCredentials(command={self._argv[0]!r})"


class ProviderCredentials(Credentials):
    """An ``auth-provider`` (oidc, gcp) handled by ``kubernetes.aio.config``'s KubeConfigLoader.

    The loader works on a private copy of the kubeconfig and a fresh ``Configuration`` it owns, so
    the process-global default configuration is never touched. The token is re-derived every
    ``period`` seconds and after a 401. A still-valid OIDC id-token is used as it is; an expired
    one is refreshed by the loader with the refresh token.
    """

    refreshable = True

    def __init__(
        self, kubeconfig: Mapping[str, Any], context: str, *, source: str, user: str, period: float = 60.0
    ) -> None:
        self._kubeconfig = orjson.loads(orjson.dumps(kubeconfig))
        self._context = context
        self._source = source
        self._field = f"users[{user}].auth-provider"
        self._user = user
        self._period = period
        self._header: str | None = None
        self._at = 0.0
        self._lock = asyncio.Lock()

    def _oidc_token(self) -> str | None:
        """The kubeconfig's OIDC id-token if it is a JWT that is still valid, else ``None``."""
        for user in self._kubeconfig.get("users") or []:
            if user.get("name") != self._user:
                continue
            provider = (user.get("user") or {}).get("auth-provider") or {}
            if provider.get("name") != "oidc":
                return None
            token = (provider.get("config") or {}).get("id-token")
            if not isinstance(token, str) or token.count(".") != 2:
                return None
            try:
                payload = token.split(".")[1]
                claims = orjson.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
                exp = float(claims["exp"])
            except (ValueError, KeyError, TypeError, orjson.JSONDecodeError):
                return None
            return token if time.time() < exp - EXPIRY_SKEW else None
        return None

    async def _from_loader(self) -> str | None:
        from kubernetes.aio.client import Configuration
        from kubernetes.aio.config.config_exception import ConfigException
        from kubernetes.aio.config.kube_config import KubeConfigLoader

        conf = Configuration()
        try:
            # The loader mutates our private kubeconfig copy in place (refreshed id-tokens stay).
            loader = KubeConfigLoader(self._kubeconfig, self._context)  # type: ignore[no-untyped-call]  # kubernetes.aio's loader has no type hints
            await loader.load_and_set(conf)  # type: ignore[no-untyped-call]  # kubernetes.aio's loader has no type hints
        except (ConfigException, ValueError, KeyError, TypeError, OSError, RuntimeError) as exc:
            # the loader raises assorted types; report them as config errors (without the values)
            raise ConfigError(
                f"auth provider failed: {type(exc).__name__}",
                source=self._source,
                context=self._context,
                field=self._field,
            ) from None
        key = conf.api_key.get("BearerToken") or conf.api_key.get("authorization")
        return str(key) if key else None

    async def authorization(self) -> str | None:
        async with self._lock:
            if self._header is None or time.monotonic() - self._at >= self._period:
                token = self._oidc_token()
                self._header = f"Bearer {token}" if token else await self._from_loader()
                self._at = time.monotonic()
            return self._header

    async def refresh(self, rejected: str | None = None) -> None:
        async with self._lock:
            self._header = None

    def __repr__(self) -> str:
        return "ProviderCredentials()"
