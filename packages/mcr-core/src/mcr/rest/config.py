"""Cluster connection settings (:class:`RestConfig`) from kubeconfig files, dicts, in-cluster files
or a ``kubernetes`` ``Configuration``.

Every :class:`RestConfig` owns its credentials: exec plugins, token files and auth providers are
refreshed per cluster, never through the ``kubernetes`` package's process-global default
configuration. Loading fails with :class:`~mcr.errors.ConfigError` naming the file, the context
and the field at fault. Credential values never appear in ``repr()``/``str()`` or in logs.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import ssl
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from mcr._version import __version__
from mcr.errors import ConfigError
from mcr.rest.auth import Credentials, NoCredentials, StaticToken, TokenFile
from mcr.rest.kubeconfig import (
    check_certificates,
    context_settings,
    default_kubeconfig_paths,
    load_yaml,
    merge_kubeconfig_files,
    no_kubeconfig_reason,
    parse_kubeconfig,
    read_kubeconfig_file,
    read_pem_file,
)
from mcr.rest.tls import SSL_CONTEXTS
from mcr.rest.transport import Transport

__all__ = ["RestConfig", "load_config", "load_config_async", "load_yaml"]

SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
DEFAULT_USER_AGENT = f"mcr/{__version__}"


@dataclasses.dataclass(repr=False, eq=False)
class RestConfig:
    """How to reach and authenticate to one API server.

    ``ca_data``, ``client_cert_data`` and ``client_key_data`` are PEM bytes. ``qps``/``burst``
    enable a client-side token bucket (off when ``qps`` is ``None``, as controller-runtime
    defaults). ``timeout`` bounds each non-streaming request, ``connect_timeout`` how long an
    unreachable server is tried before :class:`~mcr.errors.TransportError`. ``source`` and
    ``context`` say where the settings came from, for error messages; ``namespace`` is the
    context's default namespace (or the pod's namespace in-cluster), if any.
    """

    host: str
    ca_data: bytes | None = None
    client_cert_data: bytes | None = None
    client_key_data: bytes | None = None
    verify_ssl: bool = True
    tls_server_name: str | None = None
    proxy: str | None = None
    credentials: Credentials = dataclasses.field(default_factory=NoCredentials)
    qps: float | None = None
    burst: int = 10
    timeout: float = 60.0
    connect_timeout: float = 10.0
    max_retries: int = 10
    user_agent: str = DEFAULT_USER_AGENT
    source: str = "<config>"
    context: str | None = None
    namespace: str | None = None

    def __post_init__(self) -> None:
        self.host = self.host.rstrip("/")

    def __repr__(self) -> str:
        return (
            f"RestConfig(host={self.host!r}, context={self.context!r}, source={self.source!r}, "
            f"auth={type(self.credentials).__name__}, client_cert={self.client_cert_data is not None})"
        )

    __str__ = __repr__

    # --- constructors --------------------------------------------------------------------------

    @classmethod
    def from_kubeconfig(
        cls,
        kubeconfig: str | os.PathLike[str] | Mapping[str, Any] | None = None,
        *,
        context: str | None = None,
        source: str | None = None,
    ) -> RestConfig:
        """Settings for ``context`` (default: ``current-context``) of a kubeconfig file or dict.

        ``None`` reads ``$KUBECONFIG`` (several files separated by ``os.pathsep`` are merged, the
        first definition of each name wins) or ``~/.kube/config``. ``source`` names a dict's origin
        in errors and in :attr:`source` (default ``"<dict>"``; files are named by their path).
        """
        if kubeconfig is None:
            paths = default_kubeconfig_paths()
            if not paths:
                raise ConfigError(no_kubeconfig_reason())
            doc, where, base_dir = merge_kubeconfig_files(paths)
        elif isinstance(kubeconfig, Mapping):
            doc, where, base_dir = dict(kubeconfig), source or "<dict>", None
        else:
            path = os.fspath(kubeconfig)
            doc, where, base_dir = read_kubeconfig_file(path), path, os.path.dirname(os.path.abspath(path))
        return cls(**context_settings(doc, source=where, context=context, base_dir=base_dir))

    @classmethod
    def from_kubeconfig_data(
        cls, data: bytes | str, *, source: str, context: str | None = None
    ) -> RestConfig:
        """Settings from the text of a kubeconfig (YAML or JSON), e.g. the data of a Secret.

        ``source`` names where the text came from (``"Secret fleet/prod key 'kubeconfig'"``) in
        every :class:`~mcr.errors.ConfigError`, which is raised for malformed YAML, a document that
        is not a mapping, or any unusable context, cluster or user. Relative file paths in it are
        taken relative to the working directory. Parsing is CPU work: on the event loop, call it
        through :func:`asyncio.to_thread` (see :meth:`from_kubeconfig_data_async`).
        """
        text = data.decode("utf-8", errors="replace") if isinstance(data, bytes) else data
        doc = parse_kubeconfig(text, source)
        return cls(**context_settings(doc, source=source, context=context, base_dir=None))

    @classmethod
    async def from_kubeconfig_data_async(
        cls, data: bytes | str, *, source: str, context: str | None = None
    ) -> RestConfig:
        """:meth:`from_kubeconfig_data` in a worker thread (same result and errors)."""
        return await asyncio.to_thread(cls.from_kubeconfig_data, data, source=source, context=context)

    @classmethod
    async def from_kubeconfig_async(
        cls,
        kubeconfig: str | os.PathLike[str] | Mapping[str, Any] | None = None,
        *,
        context: str | None = None,
        source: str | None = None,
    ) -> RestConfig:
        """:meth:`from_kubeconfig` in a worker thread, for code running on the event loop.

        Reading and parsing the YAML and checking the certificates takes too long to block the loop
        for (a provider engaging hundreds of clusters would stall every
        watch and reconcile). Same result and errors; a dict argument must not be mutated until
        this returns. On cancel the parse still finishes in its thread, its result is dropped.
        """
        return await asyncio.to_thread(cls.from_kubeconfig, kubeconfig, context=context, source=source)

    @classmethod
    def in_cluster(
        cls, *, token_path: str | None = None, ca_path: str | None = None, token_period: float = 60.0
    ) -> RestConfig:
        """Settings of the pod's service account (``KUBERNETES_SERVICE_HOST``/``_PORT``).

        The token file is re-read every ``token_period`` seconds and after a 401, so rotated bound
        tokens are picked up.
        """
        host = os.environ.get("KUBERNETES_SERVICE_HOST")
        port = os.environ.get("KUBERNETES_SERVICE_PORT")
        if not host or not port:
            raise ConfigError(
                "not running in a cluster: KUBERNETES_SERVICE_HOST/KUBERNETES_SERVICE_PORT are not set",
                source="<in-cluster>",
            )
        token_path = token_path or os.path.join(SERVICE_ACCOUNT_DIR, "token")
        ca_path = ca_path or os.path.join(SERVICE_ACCOUNT_DIR, "ca.crt")
        if not os.path.isfile(token_path):
            raise ConfigError(f"token file {token_path} does not exist", source="<in-cluster>", field="token")
        ca = read_pem_file(ca_path, source="<in-cluster>", context=None, field="ca.crt")
        check_certificates(ca, source="<in-cluster>", context=None, field="ca.crt")
        if ":" in host:
            host = f"[{host}]"
        ns_path = os.path.join(os.path.dirname(token_path), "namespace")
        namespace = Path(ns_path).read_text().strip() if os.path.isfile(ns_path) else None
        return cls(
            host=f"https://{host}:{port}",
            ca_data=ca,
            credentials=TokenFile(token_path, period=token_period, source="<in-cluster>", field="token"),
            source="<in-cluster>",
            namespace=namespace or None,
        )

    @classmethod
    def from_configuration(cls, configuration: Any) -> RestConfig:
        """Settings copied from a ``kubernetes`` (sync or aio) ``Configuration`` object.

        File paths are read now. A ``refresh_api_key_hook`` is not carried over: use a kubeconfig
        (exec plugin, token file) for credentials that rotate.
        """
        source = "<Configuration>"
        host = str(configuration.host)
        ca = None
        if getattr(configuration, "ssl_ca_cert", None):
            ca = read_pem_file(configuration.ssl_ca_cert, source=source, context=None, field="ssl_ca_cert")
            check_certificates(ca, source=source, context=None, field="ssl_ca_cert")
        cert = key = None
        if getattr(configuration, "cert_file", None):
            cert = read_pem_file(configuration.cert_file, source=source, context=None, field="cert_file")
            check_certificates(cert, source=source, context=None, field="cert_file")
        if getattr(configuration, "key_file", None):
            key = read_pem_file(configuration.key_file, source=source, context=None, field="key_file")
        creds: Credentials = NoCredentials()
        api_key = getattr(configuration, "api_key", None) or {}
        prefixes = getattr(configuration, "api_key_prefix", None) or {}
        for name in ("BearerToken", "authorization"):
            if api_key.get(name):
                value = str(api_key[name])
                prefix = prefixes.get(name)
                creds = StaticToken(f"{prefix} {value}" if prefix else value)
                break
        else:
            if getattr(configuration, "username", None) and getattr(configuration, "password", None):
                creds = StaticToken.basic(configuration.username, configuration.password)
        return cls(
            host=host,
            ca_data=ca,
            client_cert_data=cert,
            client_key_data=key,
            verify_ssl=bool(getattr(configuration, "verify_ssl", True)),
            tls_server_name=getattr(configuration, "tls_server_name", None),
            proxy=getattr(configuration, "proxy", None),
            credentials=creds,
            source=source,
        )

    # --- use -----------------------------------------------------------------------------------

    def transport(self, cluster_name: str = "") -> Transport:
        """A new :class:`~mcr.rest.transport.Transport` for these settings (close it when done)."""
        return Transport(self, cluster_name=cluster_name)

    def copy(self, **changes: Any) -> RestConfig:
        """A copy with some fields changed (credentials objects are shared)."""
        return dataclasses.replace(self, **changes)

    async def ssl_context(self) -> ssl.SSLContext | None:
        """The TLS context for this server (``None`` for plain HTTP).

        Contexts are shared by every config with the same CA, client certificate and verify
        setting, and are built in a worker thread (loading a system CA bundle is slow).
        Client certificates issued by an exec plugin are fetched here.
        """
        if not self.host.startswith("https://"):
            return None
        cert, key = self.client_cert_data, self.client_key_data
        issued = await self.credentials.client_certificate()
        if issued is not None:
            cert, key = issued
        return await SSL_CONTEXTS.get(
            self.ca_data, cert, key, self.verify_ssl, source=self.source, context=self.context
        )


def load_config(
    kubeconfig: str | os.PathLike[str] | Mapping[str, Any] | None = None, *, context: str | None = None
) -> RestConfig:
    """The settings to use: the kubeconfig given, else ``$KUBECONFIG``/``~/.kube/config``, else in-cluster."""
    if kubeconfig is not None:
        return RestConfig.from_kubeconfig(kubeconfig, context=context)
    if default_kubeconfig_paths():
        return RestConfig.from_kubeconfig(None, context=context)
    if os.environ.get("KUBECONFIG"):
        # Set but naming nothing that exists: a typo, not a request for in-cluster settings.
        raise ConfigError(no_kubeconfig_reason())
    if os.environ.get("KUBERNETES_SERVICE_HOST"):
        return RestConfig.in_cluster()
    raise ConfigError(
        "no configuration found: pass a kubeconfig, set $KUBECONFIG, create ~/.kube/config "
        "or run in a cluster"
    )


async def load_config_async(
    kubeconfig: str | os.PathLike[str] | Mapping[str, Any] | None = None, *, context: str | None = None
) -> RestConfig:
    """:func:`load_config` in a worker thread (file reads, YAML parsing, certificate checks off the loop)."""
    return await asyncio.to_thread(load_config, kubeconfig, context=context)
