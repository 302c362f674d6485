"""KEP-5339 access providers: how to reach a ClusterProfile's cluster with an exec credential plugin.

A ClusterProfile lists, in ``status.accessProviders`` (formerly ``status.credentialProviders``),
the ways its cluster can be reached: each entry has a ``name`` and a kubeconfig-style ``cluster``
(server, certificate authority data, tls-server-name, proxy-url, extensions). The consumer — this
process — configures which of those names it can use and with which exec plugin, in a JSON
document shared with other KEP-5339 consumers::

    {"providers": [
        {"name": "google",
         "execConfig": {"apiVersion": "client.authentication.k8s.io/v1",
                        "command": "/usr/bin/gke-gcloud-auth-plugin",
                        "args": [], "env": [], "provideClusterInfo": true},
         "profileSourcedCLIArgsPolicy": "Append",
         "profileSourcedEnvVarsPolicy": "AppendIfNotExists"}]}

For a profile, the first configured provider (in the document's order) that the profile lists is
used; when both status fields list the same name, ``accessProviders`` wins. Two cluster extensions
may add per-cluster plugin input: ``clusterprofiles.multicluster.x-k8s.io/exec/additional-args``
(a list of strings, appended when the provider's ``profileSourcedCLIArgsPolicy`` is ``Append``)
and ``clusterprofiles.multicluster.x-k8s.io/exec/additional-envs`` (a string map, merged as
``profileSourcedEnvVarsPolicy`` says: ``AppendIfNotExists`` keeps the configured value of a
variable set in both, ``Replace`` takes the profile's; ``Ignore``, the default for both, uses
neither). The extension ``client.authentication.k8s.io/exec`` reaches the plugin as
``spec.cluster.config`` when ``provideClusterInfo`` is set.

The result is a kubeconfig document (:meth:`AccessProviders.kubeconfig_for`) with one exec user in
``interactiveMode: Never``; the configured exec settings are never modified, so per-profile
arguments do not accumulate across calls.
"""

from __future__ import annotations

import copy
import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "ADDITIONAL_ARGS_EXTENSION",
    "ADDITIONAL_ENVS_EXTENSION",
    "AccessConfigError",
    "AccessProvider",
    "AccessProviders",
    "NoAccessProviderError",
]

ADDITIONAL_ARGS_EXTENSION = "clusterprofiles.multicluster.x-k8s.io/exec/additional-args"
ADDITIONAL_ENVS_EXTENSION = "clusterprofiles.multicluster.x-k8s.io/exec/additional-envs"

_ARGS_POLICIES = ("Append", "Ignore")
_ENVS_POLICIES = ("AppendIfNotExists", "Replace", "Ignore")
_EXEC_KEYS = {"apiVersion", "command", "args", "env", "installHint", "provideClusterInfo", "interactiveMode"}
# Fields of a profile's ``cluster`` entry that name files of the machine that published it; they
# mean nothing here and are dropped (the data forms are kept).
_LOCAL_FILE_FIELDS = ("certificate-authority",)


class AccessConfigError(ValueError):
    """The access-provider configuration is malformed; the message names the file and the entry."""


class NoAccessProviderError(LookupError):
    """A ClusterProfile lists no access provider this process is configured for."""


@dataclass(frozen=True)
class AccessProvider:
    """One configured access provider: its ``name`` and the exec plugin that yields credentials.

    ``exec_config`` has the keys of a kubeconfig ``users[].user.exec`` entry (``apiVersion`` and
    ``command`` are required). ``args_policy`` is ``Append`` or ``Ignore``; ``envs_policy`` is
    ``AppendIfNotExists``, ``Replace`` or ``Ignore``.
    """

    name: str
    exec_config: Mapping[str, Any]
    args_policy: str = "Ignore"
    envs_policy: str = "Ignore"


@dataclass(frozen=True)
class AccessProviders:
    """The access providers this process can use, in order of preference (see the module docs).

    ``source`` names where they came from (a file path) in errors.
    """

    providers: Sequence[AccessProvider]
    source: str = "<access providers>"
    _by_name: Mapping[str, AccessProvider] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not self.providers:
            raise AccessConfigError(f"access providers {self.source}: no providers configured")
        by_name: dict[str, AccessProvider] = {}
        for p in self.providers:
            if p.name in by_name:
                raise AccessConfigError(
                    f"access providers {self.source}: provider {p.name!r} is listed twice"
                )
            by_name[p.name] = p
        object.__setattr__(self, "_by_name", by_name)

    # -- loading ---------------------------------------------------------------------------------

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, source: str = "<dict>") -> AccessProviders:
        """Parse a ``{"providers": [...]}`` document; :class:`AccessConfigError` names the bad entry."""
        if not isinstance(data, Mapping):
            raise AccessConfigError(f"access providers {source}: expected a JSON object with 'providers'")
        entries = data.get("providers")
        if not isinstance(entries, list):
            raise AccessConfigError(f"access providers {source}: 'providers' must be a list")
        return cls(tuple(_parse_entry(e, i, source) for i, e in enumerate(entries)), source=source)

    @classmethod
    def from_json(cls, text: str | bytes, *, source: str = "<json>") -> AccessProviders:
        """Parse the JSON text of an access-provider document."""
        try:
            data = json.loads(text)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise AccessConfigError(f"access providers {source}: malformed JSON: {exc}") from None
        return cls.from_dict(data, source=source)

    @classmethod
    def from_file(cls, path: str | os.PathLike[str]) -> AccessProviders:
        """Read and parse the file at ``path`` (blocking: call it in a thread from async code)."""
        where = os.fspath(path)
        try:
            with open(where, "rb") as f:
                text = f.read()
        except OSError as exc:
            raise AccessConfigError(f"access providers {where}: cannot read: {exc.strerror}") from None
        return cls.from_json(text, source=where)

    # -- use -------------------------------------------------------------------------------------

    def select(self, profile: Mapping[str, Any]) -> tuple[AccessProvider, Mapping[str, Any]]:
        """The configured provider to use for ``profile`` and the profile's ``cluster`` entry for it.

        Raises :class:`NoAccessProviderError` naming the names the profile offers.
        """
        status = profile.get("status") or {}
        offered: dict[str, Mapping[str, Any]] = {}
        for key in ("credentialProviders", "accessProviders"):  # the newer field wins
            for entry in status.get(key) or ():
                if isinstance(entry, Mapping) and isinstance(entry.get("name"), str):
                    offered[entry["name"]] = entry.get("cluster") or {}
        for provider in self.providers:
            if provider.name in offered:
                return provider, offered[provider.name]
        listed = ", ".join(repr(n) for n in offered) or "none"
        raise NoAccessProviderError(
            f"no configured access provider matches (profile offers {listed}; "
            f"configured in {self.source}: {', '.join(repr(p.name) for p in self.providers)})"
        )

    def kubeconfig_for(self, profile: Mapping[str, Any]) -> dict[str, Any]:
        """A kubeconfig document reaching ``profile``'s cluster through the selected exec plugin.

        Raises :class:`NoAccessProviderError` (nothing usable offered) or ``ValueError`` (a
        malformed extension or ``cluster`` entry; the message names it).
        """
        provider, offered = self.select(profile)
        if not isinstance(offered, Mapping) or not offered.get("server"):
            raise ValueError(f"access provider {provider.name!r}: the profile's cluster entry has no server")
        cluster = {k: copy.deepcopy(v) for k, v in offered.items() if k not in _LOCAL_FILE_FIELDS}
        exec_config = copy.deepcopy(dict(provider.exec_config))
        exec_config["interactiveMode"] = "Never"
        for ext in cluster.get("extensions") or ():
            name = ext.get("name") if isinstance(ext, Mapping) else None
            if name == ADDITIONAL_ARGS_EXTENSION and provider.args_policy == "Append":
                exec_config["args"] = [*exec_config.get("args", ()), *_string_list(ext.get("extension"))]
            elif name == ADDITIONAL_ENVS_EXTENSION and provider.envs_policy != "Ignore":
                exec_config["env"] = _merge_env(
                    exec_config.get("env", ()), _string_map(ext.get("extension")), provider.envs_policy
                )
        return {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "profile", "cluster": cluster}],
            "users": [{"name": provider.name, "user": {"exec": exec_config}}],
            "contexts": [{"name": "profile", "context": {"cluster": "profile", "user": provider.name}}],
            "current-context": "profile",
        }


def _parse_entry(entry: Any, index: int, source: str) -> AccessProvider:
    where = f"access providers {source}: providers[{index}]"
    if not isinstance(entry, Mapping):
        raise AccessConfigError(f"{where}: expected an object")
    name = entry.get("name")
    if not isinstance(name, str) or not name:
        raise AccessConfigError(f"{where}: 'name' must be a non-empty string")
    where = f"access providers {source}: provider {name!r}"
    exec_config = entry.get("execConfig")
    if not isinstance(exec_config, Mapping):
        raise AccessConfigError(f"{where}: 'execConfig' must be an object")
    unknown = sorted(set(exec_config) - _EXEC_KEYS)
    if unknown:
        raise AccessConfigError(f"{where}: unknown execConfig field(s) {', '.join(unknown)}")
    for key in ("apiVersion", "command"):
        if not isinstance(exec_config.get(key), str) or not exec_config[key]:
            raise AccessConfigError(f"{where}: execConfig.{key} must be a non-empty string")
    args = exec_config.get("args", [])
    if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
        raise AccessConfigError(f"{where}: execConfig.args must be a list of strings")
    env = exec_config.get("env", [])
    if not isinstance(env, list) or not all(
        isinstance(e, Mapping) and isinstance(e.get("name"), str) and isinstance(e.get("value"), str)
        for e in env
    ):
        raise AccessConfigError(f"{where}: execConfig.env must be a list of {{name, value}} strings")
    args_policy = entry.get("profileSourcedCLIArgsPolicy") or "Ignore"
    if args_policy not in _ARGS_POLICIES:
        raise AccessConfigError(
            f"{where}: profileSourcedCLIArgsPolicy {args_policy!r} is not one of {', '.join(_ARGS_POLICIES)}"
        )
    envs_policy = entry.get("profileSourcedEnvVarsPolicy") or "Ignore"
    if envs_policy not in _ENVS_POLICIES:
        raise AccessConfigError(
            f"{where}: profileSourcedEnvVarsPolicy {envs_policy!r} is not one of {', '.join(_ENVS_POLICIES)}"
        )
    return AccessProvider(name, copy.deepcopy(dict(exec_config)), args_policy, envs_policy)


def _string_list(value: Any) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ValueError(f"cluster extension {ADDITIONAL_ARGS_EXTENSION} must be a list of strings")
    return list(value)


def _string_map(value: Any) -> dict[str, str]:
    if not isinstance(value, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        raise ValueError(f"cluster extension {ADDITIONAL_ENVS_EXTENSION} must map names to strings")
    return dict(value)


def _merge_env(configured: Any, extra: Mapping[str, str], policy: str) -> list[dict[str, str]]:
    # Keep the configured order, then the profile's new names in its order: a stable result, so the
    # same inputs always build the same kubeconfig (and the same fingerprint).
    merged = {str(e["name"]): str(e["value"]) for e in configured}
    for name, value in extra.items():
        if policy == "Replace" or name not in merged:
            merged[name] = value
    return [{"name": n, "value": v} for n, v in merged.items()]
