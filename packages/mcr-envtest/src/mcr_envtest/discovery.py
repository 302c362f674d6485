"""Discovery documents: /version, /api, /apis, /api/v1, /apis/<g>/<v> and aggregated discovery v2.

Everything is computed from the live :class:`~mcr_envtest.resources.Registry`, so a CRD shows up
(and disappears) at once. Aggregated documents carry an ETag derived from the registry's change
counter.
"""

from __future__ import annotations

import base64
import hashlib
import platform
from typing import Any

from .resources import Registry, ResourceInfo

__all__ = [
    "AGGREGATED_CONTENT_TYPE",
    "aggregated",
    "api_group",
    "api_group_list",
    "api_resource_list",
    "api_versions",
    "version_info",
    "wants_aggregated",
]

KUBE_MINOR = "37"
AGGREGATED_CONTENT_TYPE = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
SUB_VERBS = {
    "status": ["get", "patch", "update"],
    "scale": ["get", "patch", "update"],
    "token": ["create"],
    "finalize": ["update"],
}


def version_info() -> dict[str, str]:
    """The /version body with all nine fields the official client requires."""
    return {
        "major": "1",
        "minor": KUBE_MINOR,
        "gitVersion": f"v1.{KUBE_MINOR}.0-mcr-envtest",
        "gitCommit": "0000000000000000000000000000000000000000",
        "gitTreeState": "clean",
        "buildDate": "2026-01-01T00:00:00Z",
        "goVersion": f"python{platform.python_version()}",
        "compiler": "mcr-envtest",
        "platform": f"{platform.system().lower()}/{platform.machine().lower()}",
        "emulationMajor": "1",
        "emulationMinor": KUBE_MINOR,
        "minCompatibilityMajor": "1",
        "minCompatibilityMinor": str(int(KUBE_MINOR) - 1),
    }


def api_versions(server_address: str) -> dict[str, Any]:
    """The legacy /api document."""
    return {
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}],
    }


def _gv(group: str, version: str) -> dict[str, str]:
    return {"groupVersion": f"{group}/{version}", "version": version}


def api_group(group: str, versions: list[str]) -> dict[str, Any]:
    """One APIGroup entry (also the body of /apis/<group>)."""
    return {
        "kind": "APIGroup",
        "apiVersion": "v1",
        "name": group,
        "versions": [_gv(group, v) for v in versions],
        "preferredVersion": _gv(group, versions[0]),
    }


def api_group_list(registry: Registry) -> dict[str, Any]:
    """The legacy /apis document (named groups only)."""
    groups = []
    for g, versions in registry.groups():
        if g:
            entry = api_group(g, versions)
            del entry["kind"], entry["apiVersion"]
            groups.append(entry)
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}


def _resource_entry(info: ResourceInfo) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "name": info.plural,
        "singularName": info.singular,
        "namespaced": info.namespaced,
        "kind": info.kind,
        "verbs": verbs_of(info),
    }
    if info.short_names:
        entry["shortNames"] = list(info.short_names)
    if info.categories:
        entry["categories"] = list(info.categories)
    if info.model is not None or info.crd is not None:
        entry["storageVersionHash"] = storage_version_hash(info)
    return entry


# Built-in resources kube-apiserver stores at another group-version than the one it serves.
_BUILTIN_STORAGE: dict[tuple[str, str], tuple[str, str]] = {
    ("apiextensions.k8s.io", "customresourcedefinitions"): ("apiextensions.k8s.io", "v1beta1"),
    ("events.k8s.io", "events"): ("", "v1"),
    ("autoscaling", "horizontalpodautoscalers"): ("autoscaling", "v2"),
}

# The order kube-apiserver lists a custom resource's verbs in.
_CR_VERB_ORDER = ("delete", "deletecollection", "get", "list", "patch", "create", "update", "watch")


def verbs_of(info: ResourceInfo) -> list[str]:
    """A resource's discovery verbs: sorted for built-ins, in upstream's fixed order for custom
    resources."""
    if info.is_custom:
        return [v for v in _CR_VERB_ORDER if v in info.verbs]
    return sorted(info.verbs)


def storage_version_hash(info: ResourceInfo) -> str:
    """Discovery's ``storageVersionHash``: base64 of the first 8 bytes of the SHA-256 of
    ``"<group>/<storage version>/<kind>"``, the same value kube-apiserver computes."""
    group, version = _BUILTIN_STORAGE.get(info.group_resource, (info.group, info.version))
    if info.crd is not None and not info.storage_version:
        for v in (info.crd.get("spec") or {}).get("versions") or []:
            if isinstance(v, dict) and v.get("storage"):
                version = str(v.get("name", version))
    digest = hashlib.sha256(f"{group}/{version}/{info.kind}".encode()).digest()
    return base64.b64encode(digest[:8]).decode()


def _sub_kind(info: ResourceInfo, sub: str) -> tuple[str, str, str]:
    if sub == "scale":
        return ("autoscaling", "v1", "Scale")
    if sub == "token":
        return ("authentication.k8s.io", "v1", "TokenRequest")
    return (info.group, info.version, info.kind)


def api_resource_list(registry: Registry, group: str, version: str) -> dict[str, Any] | None:
    """The legacy /api/v1 or /apis/<g>/<v> document, None when the group-version is not served."""
    infos = registry.resources_for(group, version)
    if not infos:
        return None
    resources: list[dict[str, Any]] = []
    for info in sorted(infos, key=lambda i: i.plural):
        resources.append(_resource_entry(info))
        # a custom resource's status precedes its scale upstream; built-ins' are sorted
        subs = sorted(info.subresources, key=lambda s: (s != "status", s) if info.is_custom else (False, s))
        for sub in subs:
            g, v, k = _sub_kind(info, sub)
            entry: dict[str, Any] = {
                "name": f"{info.plural}/{sub}",
                "singularName": "",
                "namespaced": info.namespaced,
                "kind": k,
                "verbs": SUB_VERBS.get(sub, ["get"]),
            }
            if g != info.group:
                entry["group"] = g
                entry["version"] = v
            resources.append(entry)
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": f"{group}/{version}" if group else version,
        "resources": resources,
    }


def wants_aggregated(accept: str) -> bool:
    """True when the Accept header asks for aggregated discovery v2 (or v2beta1) before plain JSON."""
    for part in accept.split(","):
        p = part.replace(" ", "")
        if (
            "as=APIGroupDiscoveryList" in p
            and "g=apidiscovery.k8s.io" in p
            and ("v=v2;" in p + ";" or "v=v2beta1" in p)
        ):
            return True
        if p.startswith("application/json") and "as=" not in p:
            return False
    return False


def aggregated_version(accept: str) -> str:
    """``v2`` or ``v2beta1``: the aggregated version the client asked for first."""
    for part in accept.split(","):
        p = part.replace(" ", "")
        if "as=APIGroupDiscoveryList" in p:
            return "v2beta1" if "v=v2beta1" in p else "v2"
    return "v2"


def _agg_resource(info: ResourceInfo) -> dict[str, Any]:
    r: dict[str, Any] = {
        "resource": info.plural,
        "responseKind": {"group": "", "version": "", "kind": info.kind},
        "scope": "Namespaced" if info.namespaced else "Cluster",
        "singularResource": info.singular,
        "verbs": verbs_of(info),
    }
    if info.short_names:
        r["shortNames"] = list(info.short_names)
    if info.categories:
        r["categories"] = list(info.categories)
    subs = []
    for sub in sorted(info.subresources):
        g, v, k = _sub_kind(info, sub)
        subs.append(
            {
                "subresource": sub,
                # group and version stay empty when they are the resource's own, as upstream's
                "responseKind": {
                    "group": "" if (g, v) == (info.group, info.version) else g,
                    "version": "" if (g, v) == (info.group, info.version) else v,
                    "kind": k,
                },
                "verbs": SUB_VERBS.get(sub, ["get"]),
            }
        )
    if subs:
        r["subresources"] = subs
    return r


def aggregated(registry: Registry, *, core: bool, version: str = "v2") -> dict[str, Any]:
    """The aggregated discovery list for /api (``core``) or /apis."""
    items = []
    for g, versions in registry.groups():
        if (g == "") != core:
            continue
        items.append(
            {
                # the core group's empty name is omitted, as upstream's encoder does
                "metadata": {"name": g} if g else {},
                "versions": [
                    {
                        "version": v,
                        "resources": [
                            _agg_resource(i)
                            for i in sorted(registry.resources_for(g, v), key=lambda i: i.plural)
                        ],
                        "freshness": "Current",
                    }
                    for v in versions
                ],
            }
        )
    return {
        "kind": "APIGroupDiscoveryList",
        "apiVersion": f"apidiscovery.k8s.io/{version}",
        "metadata": {},
        "items": items,
    }


def etag(body: bytes) -> str:
    """A strong ETag for a discovery body."""
    return '"' + hashlib.sha256(body).hexdigest()[:32] + '"'
