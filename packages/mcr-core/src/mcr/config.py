"""Cluster connection settings (:class:`RestConfig`) from kubeconfig files, dicts, in-cluster files
or a ``kubernetes`` ``Configuration``.

Every :class:`RestConfig` owns its credentials: exec plugins, token files and auth providers are
refreshed per cluster, never through the ``kubernetes`` package's process-global default
configuration. Loading fails with :class:`~mcr.errors.ConfigError` naming the file, the context
and the field at fault. Credential values never appear in ``repr()``/``str()`` or in logs.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import dataclasses
import os
import ssl
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from mcr._auth import Credentials, ExecCredentials, NoCredentials, ProviderCredentials, StaticToken, TokenFile
from mcr._tls import SSL_CONTEXTS
from mcr._version import __version__
from mcr.errors import ConfigError

if TYPE_CHECKING:
    from mcr.transport import Transport

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
            paths = _default_kubeconfig_paths()
            if not paths:
                raise ConfigError(_no_kubeconfig_reason())
            doc, where, base_dir = _merge_files(paths)
        elif isinstance(kubeconfig, Mapping):
            doc, where, base_dir = dict(kubeconfig), source or "<dict>", None
        else:
            path = os.fspath(kubeconfig)
            doc, where, base_dir = _read_file(path), path, os.path.dirname(os.path.abspath(path))
        return _from_document(doc, source=where, context=context, base_dir=base_dir)

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
        doc = _parse_document(text, source)
        return _from_document(doc, source=source, context=context, base_dir=None)

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

        Reading and parsing the YAML and checking the certificates takes ~13 ms per kubeconfig, too
        long to block the loop for (a provider engaging hundreds of clusters would stall every
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
        ca = _read_pem_file(ca_path, source="<in-cluster>", context=None, field="ca.crt")
        _check_certificates(ca, source="<in-cluster>", context=None, field="ca.crt")
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
            ca = _read_pem_file(configuration.ssl_ca_cert, source=source, context=None, field="ssl_ca_cert")
            _check_certificates(ca, source=source, context=None, field="ssl_ca_cert")
        cert = key = None
        if getattr(configuration, "cert_file", None):
            cert = _read_pem_file(configuration.cert_file, source=source, context=None, field="cert_file")
            _check_certificates(cert, source=source, context=None, field="cert_file")
        if getattr(configuration, "key_file", None):
            key = _read_pem_file(configuration.key_file, source=source, context=None, field="key_file")
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
        """A new :class:`~mcr.transport.Transport` for these settings (close it when done)."""
        from mcr.transport import Transport

        return Transport(self, cluster_name=cluster_name)

    def copy(self, **changes: Any) -> RestConfig:
        """A copy with some fields changed (credentials objects are shared)."""
        return dataclasses.replace(self, **changes)

    async def ssl_context(self) -> ssl.SSLContext | None:
        """The TLS context for this server (``None`` for plain HTTP).

        Contexts are shared by every config with the same CA, client certificate and verify
        setting, and are built in a worker thread (loading a system CA bundle takes ~15 ms).
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
    if _default_kubeconfig_paths():
        return RestConfig.from_kubeconfig(None, context=context)
    if os.environ.get("KUBECONFIG"):
        # Set but naming nothing that exists: a typo, not a request for in-cluster settings.
        raise ConfigError(_no_kubeconfig_reason())
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


# --- kubeconfig parsing -----------------------------------------------------------------------


def _default_kubeconfig_paths() -> list[str]:
    env = os.environ.get("KUBECONFIG")
    if env:
        return [p for p in env.split(os.pathsep) if p and os.path.exists(p)]
    home = os.path.join(os.path.expanduser("~"), ".kube", "config")
    return [home] if os.path.exists(home) else []


def _no_kubeconfig_reason() -> str:
    env = os.environ.get("KUBECONFIG")
    if env:
        listed = [p for p in env.split(os.pathsep) if p]
        return f"$KUBECONFIG names {', '.join(listed) or repr(env)}, but no such file exists"
    return "no kubeconfig found ($KUBECONFIG unset and ~/.kube/config missing)"


def _read_file(path: str) -> dict[str, Any]:
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as exc:
        raise ConfigError(f"cannot read kubeconfig: {exc.strerror}", source=path) from None
    return _parse_document(text, path)


_SafeLoader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def load_yaml(data: str | bytes) -> Any:
    """One YAML document parsed as ``yaml.safe_load`` does, with libyaml's C parser when PyYAML
    has it (its wheels do): a kubeconfig with embedded certificates takes about 0.2 ms instead
    of 3. Parsing holds the GIL, so with hundreds of kubeconfigs the pure-Python parser would
    also stall the event loop while a worker thread parses. Raises ``yaml.YAMLError`` (with
    ``problem_mark`` where the parser knows the position) for malformed input.
    """
    return yaml.load(data, Loader=_SafeLoader)  # a safe loader: no arbitrary objects


def _parse_document(text: str, source: str) -> dict[str, Any]:
    try:
        doc = load_yaml(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        raise ConfigError(f"malformed YAML{where}", source=source) from None
    if doc is None:
        doc = {}
    if not isinstance(doc, dict):
        raise ConfigError("a kubeconfig must be a YAML mapping", source=source)
    return doc


def _merge_files(paths: list[str]) -> tuple[dict[str, Any], str, str | None]:
    if len(paths) == 1:
        return _read_file(paths[0]), paths[0], os.path.dirname(os.path.abspath(paths[0]))
    merged: dict[str, Any] = {"clusters": [], "users": [], "contexts": []}
    seen: dict[str, set[str]] = {"clusters": set(), "users": set(), "contexts": set()}
    for path in paths:
        doc = _read_file(path)
        base = os.path.dirname(os.path.abspath(path))
        if "current-context" not in merged and doc.get("current-context"):
            merged["current-context"] = doc["current-context"]
        for section in ("clusters", "users", "contexts"):
            for item in doc.get(section) or []:
                if isinstance(item, dict) and str(item.get("name")) not in seen[section]:
                    seen[section].add(str(item.get("name")))
                    merged[section].append(_absolutize(section, item, base))
    return merged, os.pathsep.join(paths), None


_PATH_FIELDS = {
    "clusters": ("certificate-authority",),
    "users": ("client-certificate", "client-key", "tokenFile"),
}


def _absolutize(section: str, item: dict[str, Any], base: str) -> dict[str, Any]:
    inner_key = {"clusters": "cluster", "users": "user"}.get(section)
    if inner_key is None or not isinstance(item.get(inner_key), dict):
        return item
    inner = dict(item[inner_key])
    for key in _PATH_FIELDS[section]:
        if isinstance(inner.get(key), str) and not os.path.isabs(inner[key]):
            inner[key] = os.path.join(base, inner[key])
    return {**item, inner_key: inner}


def _named(
    doc: Mapping[str, Any], section: str, name: str, *, source: str, context: str | None
) -> dict[str, Any]:
    entries = doc.get(section) or []
    if not isinstance(entries, list):
        raise ConfigError(f"{section} must be a list", source=source, context=context, field=section)
    for entry in entries:
        if isinstance(entry, Mapping) and entry.get("name") == name:
            inner = entry.get(section[:-1])
            if not isinstance(inner, Mapping):
                raise ConfigError(
                    f"entry has no {section[:-1]!r} mapping",
                    source=source,
                    context=context,
                    field=f"{section}[{name}]",
                )
            return dict(inner)
    known = sorted(str(e.get("name")) for e in entries if isinstance(e, Mapping))
    raise ConfigError(
        f"no {section[:-1]} named {name!r} (known: {', '.join(known) or 'none'})",
        source=source,
        context=context,
        field=section,
    )


def _from_document(
    doc: Mapping[str, Any], *, source: str, context: str | None, base_dir: str | None
) -> RestConfig:
    ctx_name = context or doc.get("current-context")
    if not ctx_name:
        raise ConfigError(
            "no context given and current-context is not set", source=source, field="current-context"
        )
    ctx_name = str(ctx_name)
    contexts = doc.get("contexts") or []
    if not any(isinstance(c, Mapping) and c.get("name") == ctx_name for c in contexts):
        known = sorted(str(c.get("name")) for c in contexts if isinstance(c, Mapping))
        raise ConfigError(
            f"unknown context (known: {', '.join(known) or 'none'})",
            source=source,
            context=ctx_name,
            field="current-context" if context is None else "contexts",
        )
    ctx = _named(doc, "contexts", ctx_name, source=source, context=ctx_name)
    cluster_name = ctx.get("cluster")
    if not cluster_name:
        raise ConfigError(
            "context names no cluster", source=source, context=ctx_name, field=f"contexts[{ctx_name}].cluster"
        )
    cluster = _named(doc, "clusters", str(cluster_name), source=source, context=ctx_name)
    user_name = ctx.get("user")
    user = _named(doc, "users", str(user_name), source=source, context=ctx_name) if user_name else {}

    cfield = f"clusters[{cluster_name}]"
    ufield = f"users[{user_name}]"
    server = cluster.get("server")
    if not server:
        raise ConfigError(
            "cluster has no server URL", source=source, context=ctx_name, field=f"{cfield}.server"
        )
    host = str(server)

    def path_of(value: str) -> str:
        if base_dir and not os.path.isabs(value):
            return os.path.join(base_dir, value)
        return value

    def pem(section: Mapping[str, Any], key: str, field_prefix: str, *, check: bool = True) -> bytes | None:
        data_key = f"{key}-data"
        field = f"{field_prefix}.{data_key}"
        if section.get(data_key):
            try:
                data = base64.b64decode(str(section[data_key]), validate=True)
            except (binascii.Error, ValueError):
                raise ConfigError("not valid base64", source=source, context=ctx_name, field=field) from None
        elif section.get(key):
            field = f"{field_prefix}.{key}"
            data = _read_pem_file(path_of(str(section[key])), source=source, context=ctx_name, field=field)
        else:
            return None
        if check:
            _check_certificates(data, source=source, context=ctx_name, field=field)
        else:
            _check_key(data, source=source, context=ctx_name, field=field)
        return data

    ca = pem(cluster, "certificate-authority", cfield)
    cert = pem(user, "client-certificate", ufield)
    key = pem(user, "client-key", ufield, check=False)
    if (cert is None) != (key is None):
        missing = "client-key" if key is None else "client-certificate"
        raise ConfigError(
            "a client certificate needs both client-certificate and client-key",
            source=source,
            context=ctx_name,
            field=f"{ufield}.{missing}",
        )

    creds: Credentials = NoCredentials()
    if isinstance(user.get("auth-provider"), Mapping):
        creds = ProviderCredentials(doc, ctx_name, source=source, user=str(user_name))
    elif isinstance(user.get("exec"), Mapping):
        creds = ExecCredentials(
            user["exec"],
            source=source,
            context=ctx_name,
            user=str(user_name),
            base_dir=base_dir,
            cluster_info=_exec_cluster_info(cluster, host, ca),
        )
    elif user.get("token"):
        creds = StaticToken.bearer(str(user["token"]))
    elif user.get("tokenFile"):
        token_path = path_of(str(user["tokenFile"]))
        if not os.path.isfile(token_path):
            raise ConfigError(
                f"token file {token_path} does not exist",
                source=source,
                context=ctx_name,
                field=f"{ufield}.tokenFile",
            )
        creds = TokenFile(token_path, source=source, field=f"{ufield}.tokenFile")
    elif user.get("username") and user.get("password"):
        creds = StaticToken.basic(str(user["username"]), str(user["password"]))

    return RestConfig(
        host=host,
        ca_data=ca,
        client_cert_data=cert,
        client_key_data=key,
        verify_ssl=not bool(cluster.get("insecure-skip-tls-verify")),
        tls_server_name=cluster.get("tls-server-name"),
        proxy=cluster.get("proxy-url"),
        credentials=creds,
        source=source,
        context=ctx_name,
        namespace=str(ctx["namespace"]) if ctx.get("namespace") else None,
    )


EXEC_EXTENSION = "client.authentication.k8s.io/exec"
"""The kubeconfig cluster extension whose value an exec plugin receives as ``spec.cluster.config``."""


def _exec_cluster_info(cluster: Mapping[str, Any], host: str, ca: bytes | None) -> dict[str, Any]:
    """``spec.cluster`` of the ExecCredential an exec plugin receives with ``provideClusterInfo``.

    The fields client-go sends: the server, TLS settings, proxy and, from the cluster's
    ``client.authentication.k8s.io/exec`` extension, ``config`` (KEP-5339 access providers pass
    per-cluster settings to their plugin this way).
    """
    info: dict[str, Any] = {"server": host}
    if cluster.get("tls-server-name"):
        info["tls-server-name"] = str(cluster["tls-server-name"])
    if cluster.get("insecure-skip-tls-verify"):
        info["insecure-skip-tls-verify"] = True
    if ca is not None:
        info["certificate-authority-data"] = base64.b64encode(ca).decode()
    if cluster.get("proxy-url"):
        info["proxy-url"] = str(cluster["proxy-url"])
    if cluster.get("disable-compression"):
        info["disable-compression"] = True
    for ext in cluster.get("extensions") or ():
        if isinstance(ext, Mapping) and ext.get("name") == EXEC_EXTENSION:
            info["config"] = ext.get("extension")
    return info


def _read_pem_file(path: str, *, source: str, context: str | None, field: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise ConfigError(
            f"cannot read {path}: {exc.strerror or exc}", source=source, context=context, field=field
        ) from None


def _check_certificates(data: bytes, *, source: str, context: str | None, field: str) -> None:
    from cryptography import x509

    try:
        x509.load_pem_x509_certificates(data)
    except ValueError:
        raise ConfigError("not a PEM certificate", source=source, context=context, field=field) from None


def _check_key(data: bytes, *, source: str, context: str | None, field: str) -> None:
    from cryptography.hazmat.primitives.serialization import load_pem_private_key

    try:
        load_pem_private_key(data, password=None)
    except (ValueError, TypeError):
        raise ConfigError(
            "not an unencrypted PEM private key", source=source, context=context, field=field
        ) from None
