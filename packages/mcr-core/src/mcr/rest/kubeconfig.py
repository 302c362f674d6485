"""Kubeconfig files and documents: reading, merging, and one context's connection settings.

The layer below :mod:`mcr.rest.config`: it turns a kubeconfig into the keyword arguments of a
:class:`~mcr.rest.config.RestConfig` (certificates checked, credentials objects of
:mod:`mcr.rest.auth` built). Every :class:`~mcr.errors.ConfigError` names the file (or the
``source`` of a dict), the context and the field at fault; credential values never appear in
messages.
"""

from __future__ import annotations

import base64
import binascii
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from mcr.errors import ConfigError
from mcr.rest.auth import (
    Credentials,
    ExecCredentials,
    NoCredentials,
    ProviderCredentials,
    StaticToken,
    TokenFile,
)

__all__ = [
    "EXEC_EXTENSION",
    "check_certificates",
    "check_private_key",
    "context_settings",
    "default_kubeconfig_paths",
    "load_yaml",
    "merge_kubeconfig_files",
    "no_kubeconfig_reason",
    "parse_kubeconfig",
    "read_kubeconfig_file",
    "read_pem_file",
]


def default_kubeconfig_paths() -> list[str]:
    """The existing files of ``$KUBECONFIG`` (``os.pathsep``-separated), else ``~/.kube/config``."""
    env = os.environ.get("KUBECONFIG")
    if env:
        return [p for p in env.split(os.pathsep) if p and os.path.exists(p)]
    home = os.path.join(os.path.expanduser("~"), ".kube", "config")
    return [home] if os.path.exists(home) else []


def no_kubeconfig_reason() -> str:
    """Why :func:`default_kubeconfig_paths` found nothing, for an error message."""
    env = os.environ.get("KUBECONFIG")
    if env:
        listed = [p for p in env.split(os.pathsep) if p]
        return f"$KUBECONFIG names {', '.join(listed) or repr(env)}, but no such file exists"
    return "no kubeconfig found ($KUBECONFIG unset and ~/.kube/config missing)"


def read_kubeconfig_file(path: str) -> dict[str, Any]:
    """The kubeconfig document in ``path`` (:class:`~mcr.errors.ConfigError` if unreadable or malformed)."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as exc:
        raise ConfigError(f"cannot read kubeconfig: {exc.strerror}", source=path) from None
    return parse_kubeconfig(text, path)


_SafeLoader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def load_yaml(data: str | bytes) -> Any:
    """One YAML document parsed as ``yaml.safe_load`` does, with libyaml's C parser when PyYAML
    has it (its wheels do), an order of magnitude faster for a kubeconfig with embedded
    certificates (see the mcr-core README). Parsing holds the GIL, so with hundreds of
    kubeconfigs the pure-Python parser would also stall the event loop while a worker thread
    parses. Raises ``yaml.YAMLError`` (with
    ``problem_mark`` where the parser knows the position) for malformed input.
    """
    return yaml.load(data, Loader=_SafeLoader)  # a safe loader: no arbitrary objects


def parse_kubeconfig(text: str, source: str) -> dict[str, Any]:
    """A kubeconfig document from its text; errors name ``source`` and the line of malformed YAML."""
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


def merge_kubeconfig_files(paths: list[str]) -> tuple[dict[str, Any], str, str | None]:
    """The merged document of several files (the first definition of each name wins), with its
    source (the paths) and base directory (``None``: paths in it are already absolute).
    """
    if len(paths) == 1:
        return read_kubeconfig_file(paths[0]), paths[0], os.path.dirname(os.path.abspath(paths[0]))
    merged: dict[str, Any] = {"clusters": [], "users": [], "contexts": []}
    seen: dict[str, set[str]] = {"clusters": set(), "users": set(), "contexts": set()}
    for path in paths:
        doc = read_kubeconfig_file(path)
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


def context_settings(
    doc: Mapping[str, Any], *, source: str, context: str | None, base_dir: str | None
) -> dict[str, Any]:
    """The :class:`~mcr.rest.config.RestConfig` fields of ``context`` (default: the document's
    ``current-context``) of a kubeconfig document, as keyword arguments.

    Certificates are read and checked and credentials objects built now; ``base_dir`` resolves
    relative file paths (``None``: the working directory). Raises
    :class:`~mcr.errors.ConfigError` naming ``source``, the context and the field at fault.
    """
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
            data = read_pem_file(path_of(str(section[key])), source=source, context=ctx_name, field=field)
        else:
            return None
        if check:
            check_certificates(data, source=source, context=ctx_name, field=field)
        else:
            check_private_key(data, source=source, context=ctx_name, field=field)
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

    return dict(
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


def read_pem_file(path: str, *, source: str, context: str | None, field: str) -> bytes:
    """The bytes of a certificate or key file; :class:`~mcr.errors.ConfigError` names ``field``."""
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise ConfigError(
            f"cannot read {path}: {exc.strerror or exc}", source=source, context=context, field=field
        ) from None


def check_certificates(data: bytes, *, source: str, context: str | None, field: str) -> None:
    """Raise :class:`~mcr.errors.ConfigError` unless ``data`` holds PEM certificates."""
    from cryptography import x509

    try:
        x509.load_pem_x509_certificates(data)
    except ValueError:
        raise ConfigError("not a PEM certificate", source=source, context=context, field=field) from None


def check_private_key(data: bytes, *, source: str, context: str | None, field: str) -> None:
    """Raise :class:`~mcr.errors.ConfigError` unless ``data`` is an unencrypted PEM private key."""
    from cryptography.hazmat.primitives.serialization import load_pem_private_key

    try:
        load_pem_private_key(data, password=None)
    except (ValueError, TypeError):
        raise ConfigError(
            "not an unencrypted PEM private key", source=source, context=context, field=field
        ) from None
