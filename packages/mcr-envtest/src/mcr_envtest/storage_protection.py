"""Storage object in-use protection, as kube-apiserver's admission plugin and
kube-controller-manager's two protection controllers provide it.

On create a PersistentVolume gets the ``kubernetes.io/pv-protection`` finalizer and a
PersistentVolumeClaim ``kubernetes.io/pvc-protection`` (the StorageObjectInUseProtection
admission plugin: after field management, so no manager owns it). Once deleted, a claim keeps
its finalizer while a scheduled pod that has not finished (phase neither Succeeded nor Failed)
mounts it, directly or as its generic ephemeral volume; a volume keeps its finalizer while its
phase is ``Bound``. :func:`releasable` answers that question for the background worker, which
then drops the finalizer. :func:`admit` also adds the one other thing a default admission plugin
adds on create, a new Node's not-ready taint.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

__all__ = ["FINALIZERS", "admit", "claims_of_pod", "releasable"]

PV = ("", "persistentvolumes")
PVC = ("", "persistentvolumeclaims")
FINALIZERS = {PV: "kubernetes.io/pv-protection", PVC: "kubernetes.io/pvc-protection"}
_FINISHED = ("Succeeded", "Failed")


NOT_READY = {"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}


def admit(group_resource: tuple[str, str], obj: dict[str, Any]) -> None:
    """What default admission plugins add to an object being created, owned by no manager: the
    protection finalizer of a volume or claim (once), and (TaintNodesByCondition) a new Node's
    ``node.kubernetes.io/not-ready:NoSchedule`` taint."""
    if group_resource == ("", "nodes") and isinstance(obj.get("spec", {}), dict):
        taints = obj.setdefault("spec", {}).get("taints")
        taints = list(taints) if isinstance(taints, list) else []
        if not any(
            isinstance(t, dict) and t.get("key") == NOT_READY["key"] and t.get("effect") == "NoSchedule"
            for t in taints
        ):
            obj["spec"]["taints"] = [*taints, dict(NOT_READY)]
        return
    finalizer = FINALIZERS.get(group_resource)
    meta = obj.get("metadata")
    if finalizer is None or not isinstance(meta, dict):
        return
    current = meta.get("finalizers")
    current = list(current) if isinstance(current, list) else []
    if finalizer not in current:
        meta["finalizers"] = [*current, finalizer]


def claims_of_pod(pod: dict[str, Any]) -> Iterator[str]:
    """The names of the claims a pod mounts (claim volumes and generic ephemeral volumes)."""
    spec = pod.get("spec")
    if not isinstance(spec, dict):
        return
    name = (pod.get("metadata") or {}).get("name", "")
    for volume in spec.get("volumes") or ():
        if not isinstance(volume, dict):
            continue
        claim = volume.get("persistentVolumeClaim")
        if isinstance(claim, dict) and claim.get("claimName"):
            yield str(claim["claimName"])
        elif volume.get("ephemeral") is not None:
            yield f"{name}-{volume.get('name', '')}"


def _in_use(claim: str, pods: Iterable[dict[str, Any]]) -> bool:
    for pod in pods:
        spec = pod.get("spec") or {}
        if not spec.get("nodeName") or (pod.get("status") or {}).get("phase") in _FINISHED:
            continue
        if claim in claims_of_pod(pod):
            return True
    return False


def releasable(group_resource: tuple[str, str], obj: dict[str, Any], pods: Iterable[dict[str, Any]]) -> bool:
    """True when a deleted volume or claim carrying its protection finalizer may lose it now
    (``pods``: the pods of the claim's namespace; ignored for volumes)."""
    meta = obj.get("metadata") or {}
    finalizer = FINALIZERS.get(group_resource)
    if (
        finalizer is None
        or not meta.get("deletionTimestamp")
        or finalizer not in (meta.get("finalizers") or ())
    ):
        return False
    if group_resource == PV:
        return (obj.get("status") or {}).get("phase") != "Bound"
    return not _in_use(str(meta.get("name", "")), pods)
