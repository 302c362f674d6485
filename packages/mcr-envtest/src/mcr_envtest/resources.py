"""The registry of served resources: built-in types plus the resources CRDs define.

A :class:`ResourceInfo` describes one resource at one group-version (GVK, plural, scope, verbs,
subresources, short names, categories, printer columns). The :class:`Registry` answers lookups by
URL (group, version, plural) and by kind, orders groups for discovery, and keeps a change counter
(``generation``) that discovery uses for its ETag. The registry is not thread-safe: the server only
touches it from its event loop.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any

__all__ = ["ALL_VERBS", "Registry", "ResourceInfo", "deprecation_warning"]

ALL_VERBS = frozenset({"create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"})
CREATE_ONLY = frozenset({"create"})


@dataclass(frozen=True)
class ResourceInfo:
    """One served resource at one group-version.

    ``model`` names the ``kubernetes.client`` model class for built-ins (``"V1ConfigMap"``); ``crd``
    is the defining CRD object for custom resources (``None`` for built-ins). ``storage_version``
    is true for the version objects are stored at (always true for built-ins).
    """

    group: str
    version: str
    kind: str
    plural: str
    singular: str
    namespaced: bool
    verbs: frozenset[str] = ALL_VERBS
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    subresources: frozenset[str] = frozenset()
    list_kind: str = ""
    model: str | None = None
    crd: dict[str, Any] | None = field(default=None, compare=False, hash=False)
    printer_columns: list[dict[str, Any]] = field(default_factory=list, compare=False, hash=False)
    storage_version: bool = True

    @property
    def api_version(self) -> str:
        """``"v1"`` for the core group, else ``"<group>/<version>"``."""
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def gvk(self) -> tuple[str, str, str]:
        """(group, version, kind)."""
        return (self.group, self.version, self.kind)

    @property
    def group_resource(self) -> tuple[str, str]:
        """(group, plural): the storage key, shared by all versions of a resource."""
        return (self.group, self.plural)

    @property
    def is_custom(self) -> bool:
        """True for resources defined by a CRD."""
        return self.crd is not None

    @property
    def status_subresource(self) -> bool:
        """True when ``/status`` is a separate subresource (main writes then keep the old status)."""
        return "status" in self.subresources

    def describe(self) -> str:
        """``plural.group`` as upstream names resources in messages (``"deployments.apps"``)."""
        return f"{self.plural}.{self.group}" if self.group else self.plural


def _b(
    group: str,
    version: str,
    kind: str,
    plural: str,
    *,
    namespaced: bool = True,
    short: tuple[str, ...] = (),
    categories: tuple[str, ...] = (),
    sub: Iterable[str] = (),
    verbs: frozenset[str] = ALL_VERBS,
    model: str | None = None,
) -> ResourceInfo:
    return ResourceInfo(
        group=group,
        version=version,
        kind=kind,
        plural=plural,
        singular=kind.lower(),
        namespaced=namespaced,
        verbs=verbs,
        short_names=short,
        categories=categories,
        subresources=frozenset(sub),
        list_kind=kind + "List",
        model=model or f"V1{kind}",
    )


ALL = ("all",)

EXT = ("api-extensions",)
STATUS = ("status",)


def _review(group: str, kind: str, plural: str) -> ResourceInfo:
    return _b(group, "v1", kind, plural, namespaced=False, verbs=CREATE_ONLY)


# Groups in kube-apiserver's discovery priority order.
BUILTINS: tuple[ResourceInfo, ...] = (
    _b(
        "",
        "v1",
        "Namespace",
        "namespaces",
        namespaced=False,
        short=("ns",),
        sub=("status", "finalize"),
        verbs=ALL_VERBS - {"deletecollection"},
    ),
    _b("", "v1", "ConfigMap", "configmaps", short=("cm",)),
    _b("", "v1", "Secret", "secrets"),
    _b("", "v1", "ServiceAccount", "serviceaccounts", short=("sa",), sub=("token",)),
    _b("", "v1", "Event", "events", short=("ev",), model="CoreV1Event"),
    _b("", "v1", "Service", "services", short=("svc",), categories=ALL, sub=STATUS),
    _b("", "v1", "Pod", "pods", short=("po",), categories=ALL, sub=STATUS),
    _b("", "v1", "Node", "nodes", namespaced=False, short=("no",), sub=STATUS),
    _b("", "v1", "Endpoints", "endpoints", short=("ep",)),
    _b("", "v1", "PersistentVolumeClaim", "persistentvolumeclaims", short=("pvc",), sub=STATUS),
    _b("", "v1", "PersistentVolume", "persistentvolumes", namespaced=False, short=("pv",), sub=STATUS),
    _b("", "v1", "ResourceQuota", "resourcequotas", short=("quota",), sub=STATUS),
    _b("", "v1", "LimitRange", "limitranges", short=("limits",)),
    _b(
        "",
        "v1",
        "ReplicationController",
        "replicationcontrollers",
        short=("rc",),
        categories=ALL,
        sub=("status", "scale"),
    ),
    _b(
        "apiregistration.k8s.io",
        "v1",
        "APIService",
        "apiservices",
        namespaced=False,
        categories=EXT,
        sub=STATUS,
    ),
    _b("apps", "v1", "Deployment", "deployments", short=("deploy",), categories=ALL, sub=("status", "scale")),
    _b("apps", "v1", "ReplicaSet", "replicasets", short=("rs",), categories=ALL, sub=("status", "scale")),
    _b("apps", "v1", "StatefulSet", "statefulsets", short=("sts",), categories=ALL, sub=("status", "scale")),
    _b("apps", "v1", "DaemonSet", "daemonsets", short=("ds",), categories=ALL, sub=STATUS),
    _b("events.k8s.io", "v1", "Event", "events", short=("ev",), model="EventsV1Event"),
    _review("authentication.k8s.io", "TokenReview", "tokenreviews"),
    _review("authentication.k8s.io", "SelfSubjectReview", "selfsubjectreviews"),
    _review("authorization.k8s.io", "SubjectAccessReview", "subjectaccessreviews"),
    _review("authorization.k8s.io", "SelfSubjectAccessReview", "selfsubjectaccessreviews"),
    _review("authorization.k8s.io", "SelfSubjectRulesReview", "selfsubjectrulesreviews"),
    _b(
        "autoscaling",
        "v2",
        "HorizontalPodAutoscaler",
        "horizontalpodautoscalers",
        short=("hpa",),
        categories=ALL,
        sub=STATUS,
        model="V2HorizontalPodAutoscaler",
    ),
    replace(
        _b(
            "autoscaling",
            "v1",
            "HorizontalPodAutoscaler",
            "horizontalpodautoscalers",
            short=("hpa",),
            categories=ALL,
            sub=STATUS,
        ),
        storage_version=False,  # stored at v2, converted (hpa_conversion)
    ),
    _b("batch", "v1", "Job", "jobs", categories=ALL, sub=STATUS),
    _b("batch", "v1", "CronJob", "cronjobs", short=("cj",), categories=ALL, sub=STATUS),
    _b("networking.k8s.io", "v1", "Ingress", "ingresses", short=("ing",), sub=STATUS),
    _b("networking.k8s.io", "v1", "IngressClass", "ingressclasses", namespaced=False),
    _b("networking.k8s.io", "v1", "NetworkPolicy", "networkpolicies", short=("netpol",)),
    _b("policy", "v1", "PodDisruptionBudget", "poddisruptionbudgets", short=("pdb",), sub=STATUS),
    _b("rbac.authorization.k8s.io", "v1", "ClusterRoleBinding", "clusterrolebindings", namespaced=False),
    _b("rbac.authorization.k8s.io", "v1", "ClusterRole", "clusterroles", namespaced=False),
    _b("rbac.authorization.k8s.io", "v1", "RoleBinding", "rolebindings"),
    _b("rbac.authorization.k8s.io", "v1", "Role", "roles"),
    _b(
        "admissionregistration.k8s.io",
        "v1",
        "MutatingWebhookConfiguration",
        "mutatingwebhookconfigurations",
        namespaced=False,
        categories=EXT,
    ),
    _b(
        "admissionregistration.k8s.io",
        "v1",
        "ValidatingWebhookConfiguration",
        "validatingwebhookconfigurations",
        namespaced=False,
        categories=EXT,
    ),
    _b(
        "apiextensions.k8s.io",
        "v1",
        "CustomResourceDefinition",
        "customresourcedefinitions",
        namespaced=False,
        short=("crd", "crds"),
        categories=EXT,
        sub=STATUS,
    ),
    _b("scheduling.k8s.io", "v1", "PriorityClass", "priorityclasses", namespaced=False, short=("pc",)),
    _b("coordination.k8s.io", "v1", "Lease", "leases"),
    _b("discovery.k8s.io", "v1", "EndpointSlice", "endpointslices"),
)

# Built-in resources whose objects carry metadata.generation (set to 1 on create, bumped when the
# spec changes), as kube-apiserver's strategies set it; every other built-in has none.
GENERATION_TRACKED: frozenset[tuple[str, str]] = frozenset(
    {
        ("", "pods"),
        ("", "replicationcontrollers"),
        ("apps", "deployments"),
        ("apps", "replicasets"),
        ("apps", "statefulsets"),
        ("apps", "daemonsets"),
        ("batch", "jobs"),
        ("batch", "cronjobs"),
        ("networking.k8s.io", "ingresses"),
        ("networking.k8s.io", "ingressclasses"),
        ("networking.k8s.io", "networkpolicies"),
        ("policy", "poddisruptionbudgets"),
        ("autoscaling", "horizontalpodautoscalers"),
        ("apiregistration.k8s.io", "apiservices"),
        ("admissionregistration.k8s.io", "mutatingwebhookconfigurations"),
        ("admissionregistration.k8s.io", "validatingwebhookconfigurations"),
        ("apiextensions.k8s.io", "customresourcedefinitions"),
        ("scheduling.k8s.io", "priorityclasses"),
        ("discovery.k8s.io", "endpointslices"),
    }
)


def crd_resource_infos(crd: dict[str, Any]) -> list[ResourceInfo]:
    """The served ResourceInfos a CRD object defines, one per served version (storage first)."""
    spec = crd.get("spec") or {}
    names = spec.get("names") or {}
    group = spec.get("group", "")
    plural = names.get("plural", "")
    kind = names.get("kind", "")
    out: list[ResourceInfo] = []
    for v in spec.get("versions") or []:
        if not v.get("served", True):
            continue
        subs = (v.get("subresources") or {}).keys()
        out.append(
            ResourceInfo(
                group=group,
                version=v.get("name", ""),
                kind=kind,
                plural=plural,
                singular=names.get("singular") or kind.lower(),
                namespaced=spec.get("scope", "Namespaced") == "Namespaced",
                verbs=ALL_VERBS,
                short_names=tuple(names.get("shortNames") or ()),
                categories=tuple(names.get("categories") or ()),
                subresources=frozenset(subs),
                list_kind=names.get("listKind") or kind + "List",
                model=None,
                crd=crd,
                printer_columns=list(v.get("additionalPrinterColumns") or []),
                storage_version=bool(v.get("storage", False)),
            )
        )
    out.sort(key=lambda i: not i.storage_version)
    return out


class Registry:
    """Served resources by URL and by kind; changes bump :attr:`generation`.

    Built-in groups come first in upstream's priority order; CRD groups follow in the order they
    were first defined. Re-adding a CRD with the same name replaces its previous resources.
    """

    def __init__(self, builtins: Iterable[ResourceInfo] = BUILTINS) -> None:
        self._by_path: dict[tuple[str, str, str], ResourceInfo] = {}
        self._by_kind: dict[tuple[str, str, str], ResourceInfo] = {}
        self._group_versions: dict[str, list[str]] = {}
        self._crds: dict[str, list[ResourceInfo]] = {}
        self._builtin_keys: set[tuple[str, str, str]] = set()
        self.generation = 0
        for info in builtins:
            self._add(info)
            self._builtin_keys.add((info.group, info.version, info.plural))

    def _add(self, info: ResourceInfo) -> None:
        self._by_path[(info.group, info.version, info.plural)] = info
        self._by_kind[info.gvk] = info
        versions = self._group_versions.setdefault(info.group, [])
        if info.version not in versions:
            if info.storage_version:
                versions.insert(0, info.version)
            else:
                versions.append(info.version)
        self.generation += 1

    def _rebuild_group_versions(self) -> None:
        gv: dict[str, list[str]] = {}
        for info in self._by_path.values():
            versions = gv.setdefault(info.group, [])
            if info.version not in versions:
                if info.storage_version:
                    versions.insert(0, info.version)
                else:
                    versions.append(info.version)
        # keep the previous group order
        ordered = {g: gv[g] for g in self._group_versions if g in gv}
        ordered.update({g: v for g, v in gv.items() if g not in ordered})
        self._group_versions = ordered

    def lookup(self, group: str, version: str, plural: str) -> ResourceInfo | None:
        """The resource served at ``/apis/<group>/<version>/<plural>`` (or ``/api/v1``), else None."""
        return self._by_path.get((group, version, plural))

    def by_kind(self, group: str, version: str, kind: str) -> ResourceInfo | None:
        """The resource for a GVK, else None."""
        return self._by_kind.get((group, version, kind))

    def storage_info(self, group: str, plural: str) -> ResourceInfo | None:
        """The storage-version ResourceInfo for a group-resource, else None."""
        for info in self._by_path.values():
            if info.group == group and info.plural == plural and info.storage_version:
                return info
        return None

    def all(self) -> list[ResourceInfo]:
        """Every served resource, in discovery order."""
        order = {g: i for i, g in enumerate(self._group_versions)}
        return sorted(self._by_path.values(), key=lambda i: order.get(i.group, 1 << 30))

    def groups(self) -> list[tuple[str, list[str]]]:
        """(group, versions with the preferred one first), core group ``""`` first."""
        return [(g, list(v)) for g, v in self._group_versions.items()]

    def resources_for(self, group: str, version: str) -> list[ResourceInfo]:
        """Every resource served at one group-version."""
        return [i for i in self._by_path.values() if i.group == group and i.version == version]

    def is_builtin(self, info: ResourceInfo) -> bool:
        """True for resources compiled into the server (not from a CRD)."""
        return (info.group, info.version, info.plural) in self._builtin_keys

    def crd_names(self) -> list[str]:
        """Names of the CRDs whose resources are currently served."""
        return list(self._crds)

    def add_crd(self, crd: dict[str, Any]) -> list[ResourceInfo]:
        """Serve the resources a CRD defines (replacing an earlier definition of the same CRD)."""
        name = (crd.get("metadata") or {}).get("name", "")
        if name in self._crds:
            self.remove_crd(crd)
        infos = crd_resource_infos(crd)
        for info in infos:
            key = (info.group, info.version, info.plural)
            if key in self._builtin_keys:
                continue
            self._add(info)
        self._crds[name] = infos
        self.generation += 1
        return infos

    def remove_crd(self, crd: dict[str, Any]) -> None:
        """Stop serving a CRD's resources (no-op for an unknown CRD)."""
        name = (crd.get("metadata") or {}).get("name", "")
        infos = self._crds.pop(name, None)
        if not infos:
            return
        for info in infos:
            key = (info.group, info.version, info.plural)
            if self._by_path.get(key) is not None and self._by_path[key].crd is not None:
                del self._by_path[key]
                self._by_kind.pop(info.gvk, None)
        self._rebuild_group_versions()
        self.generation += 1


_KUBE_VERSION = re.compile(r"v(\d+)(?:(alpha|beta)(\d+))?")


def _version_priority(name: str) -> tuple[int, int, int, str]:
    """Kubernetes' ordering of version names: GA above beta above alpha, higher numbers first;
    names outside the scheme last, alphabetically."""
    m = _KUBE_VERSION.fullmatch(name)
    if m is None:
        return (-1, 0, 0, name)
    stage = {"alpha": 0, "beta": 1, None: 2}[m.group(2)]
    return (stage, int(m.group(1)), int(m.group(3) or 0), "")


def deprecation_warning(info: ResourceInfo) -> str | None:
    """The warning kube-apiserver sends with every request to a deprecated version of a custom
    resource (the CRD's ``deprecationWarning``, or a default naming the newest served version
    that replaces it), or None."""
    spec = (info.crd or {}).get("spec") or {}
    versions = [v for v in spec.get("versions") or [] if isinstance(v, dict)]
    mine = next((v for v in versions if v.get("name") == info.version), None)
    if mine is None or not mine.get("deprecated"):
        return None
    if isinstance(mine.get("deprecationWarning"), str):
        return str(mine["deprecationWarning"])
    kind = (spec.get("names") or {}).get("kind", info.kind)
    message = f"{info.group}/{info.version} {kind} is deprecated"
    newer = [
        str(v.get("name"))
        for v in versions
        if v.get("served")
        and not v.get("deprecated")
        and _version_priority(str(v.get("name"))) > _version_priority(info.version)
    ]
    if newer:
        message += f"; use {info.group}/{max(newer, key=_version_priority)} {kind}"
    return message
