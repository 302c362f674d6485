"""Helpers every controller needs: owner references, finalizers, create-or-update.

controller-runtime's ``controllerutil``, for object dicts and ``kubernetes`` models alike. The
reference and finalizer helpers change the object they are given, in memory, and return whether
they changed it; nothing is written until the caller writes the object.
:func:`create_or_update` and :func:`create_or_patch` read, let a function set the desired state
and write only what changed, returning what they did.

An ownerReference names an object *in the same cluster* (the garbage collector of that cluster
follows it): an owner in another cluster of the fleet cannot be one, and
:func:`set_controller_reference` / :func:`set_owner_reference` refuse it when told the clusters
(``owner_cluster=``, ``cluster=``). docs/cross-cluster.md shows what to do instead (a label naming
the owner, and a finalizer on it that deletes the copies).
"""

from __future__ import annotations

import copy
import enum
import inspect
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from mcr.client import Client
from mcr.errors import MCRError, NotFoundError
from mcr.rest.kinds import gvk_of, object_key, to_dict

__all__ = [
    "AlreadyOwnedError",
    "CrossClusterOwnerError",
    "OperationResult",
    "add_finalizer",
    "contains_finalizer",
    "create_or_patch",
    "create_or_update",
    "has_controller_reference",
    "has_owner_reference",
    "remove_finalizer",
    "remove_owner_reference",
    "set_controller_reference",
    "set_owner_reference",
]

Obj = TypeVar("Obj")
Mutate = Callable[[Any], "Awaitable[None] | None"]

_CROSS_CLUSTER_HINT = (
    "an ownerReference can only name an object of the same cluster; for an owner in another "
    "cluster, label the copies with the owner's cluster and key and clean them up with a "
    "finalizer on the owner (docs/cross-cluster.md)"
)


class AlreadyOwnedError(MCRError, ValueError):
    """The object already has another controller: an object has at most one."""


class CrossClusterOwnerError(MCRError, ValueError):
    """The owner lives in another cluster than the object it would own."""


class OperationResult(enum.StrEnum):
    """What :func:`create_or_update` or :func:`create_or_patch` did (controller-runtime's names)."""

    NONE = "unchanged"
    CREATED = "created"
    UPDATED = "updated"
    UPDATED_STATUS = "updatedStatus"
    UPDATED_STATUS_ONLY = "updatedStatusOnly"


# --- metadata of dicts and models -----------------------------------------------------------


def _meta(obj: Any) -> dict[str, Any]:
    """A copy of ``obj``'s metadata as a wire-form dict."""
    if isinstance(obj, dict):
        return copy.deepcopy(obj.get("metadata") or {})
    return dict(to_dict(obj).get("metadata") or {})


def _set_meta(obj: Any, meta: dict[str, Any]) -> None:
    if isinstance(obj, dict):
        obj["metadata"] = meta
        return
    current = getattr(obj, "metadata", None)
    if current is None:
        raise ValueError(f"{type(obj).__name__} has no metadata")
    obj.metadata = type(current).from_dict(meta)


def _describe(obj: Any) -> str:
    namespace, name = object_key(obj)
    try:
        kind = gvk_of(obj).kind
    except ValueError:
        kind = type(obj).__name__
    return f"{kind} {namespace}/{name}" if namespace else f"{kind} {name}"


def _reference(owner: Any, *, controller: bool | None, block_owner_deletion: bool | None) -> dict[str, Any]:
    gvk = gvk_of(owner)
    meta = _meta(owner)
    if not meta.get("name") or not meta.get("uid"):
        raise ValueError(f"owner {_describe(owner)} has no name or uid yet: read it from the server first")
    ref: dict[str, Any] = {
        "apiVersion": gvk.api_version,
        "kind": gvk.kind,
        "name": meta["name"],
        "uid": meta["uid"],
    }
    if block_owner_deletion is not None:
        ref["blockOwnerDeletion"] = block_owner_deletion
    if controller is not None:
        ref["controller"] = controller
    return ref


def _group(ref: dict[str, Any]) -> str:
    return str(ref.get("apiVersion", "")).rpartition("/")[0]


def _same_owner(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Same group, kind and name (the version may differ), as controller-runtime compares them."""
    return _group(a) == _group(b) and a.get("kind") == b.get("kind") and a.get("name") == b.get("name")


def _check_placement(owner: Any, obj: Any, owner_cluster: str | None, cluster: str | None) -> None:
    if owner_cluster is not None and cluster is not None and owner_cluster != cluster:
        raise CrossClusterOwnerError(
            f"{_describe(owner)} (cluster {owner_cluster!r}) cannot own {_describe(obj)} "
            f"(cluster {cluster!r}): {_CROSS_CLUSTER_HINT}"
        )
    owner_ns, _ = object_key(owner)
    obj_ns, _ = object_key(obj)
    if owner_ns and not obj_ns:
        raise ValueError(
            f"cluster-scoped {_describe(obj)} cannot have the namespaced owner {_describe(owner)}"
        )
    if owner_ns and owner_ns != obj_ns:
        raise ValueError(
            f"{_describe(owner)} cannot own {_describe(obj)}: an owner must be in the same namespace"
        )


def _upsert(obj: Any, ref: dict[str, Any]) -> bool:
    meta = _meta(obj)
    refs = [dict(r) for r in meta.get("ownerReferences") or []]
    for i, existing in enumerate(refs):
        if _same_owner(existing, ref):
            if existing == ref:
                return False
            refs[i] = ref
            break
    else:
        refs.append(ref)
    meta["ownerReferences"] = refs
    _set_meta(obj, meta)
    return True


# --- owner references --------------------------------------------------------------------------


def set_controller_reference(
    owner: Any,
    obj: Any,
    *,
    block_owner_deletion: bool = True,
    owner_cluster: str | None = None,
    cluster: str | None = None,
) -> bool:
    """Make ``owner`` the controller of ``obj`` (an ownerReference with ``controller: true``).

    Returns whether ``obj`` changed. Raises :class:`AlreadyOwnedError` if another object is
    already its controller, :class:`CrossClusterOwnerError` if ``owner_cluster`` and ``cluster``
    are given and differ, and ``ValueError`` if the owner has no uid yet or is namespaced while
    ``obj`` is cluster-scoped or in another namespace.
    """
    _check_placement(owner, obj, owner_cluster, cluster)
    ref = _reference(owner, controller=True, block_owner_deletion=block_owner_deletion)
    for existing in _meta(obj).get("ownerReferences") or []:
        if existing.get("controller") and not _same_owner(existing, ref):
            raise AlreadyOwnedError(
                f"{_describe(obj)} is already controlled by {existing.get('kind')} {existing.get('name')}"
            )
    return _upsert(obj, ref)


def set_owner_reference(
    owner: Any, obj: Any, *, owner_cluster: str | None = None, cluster: str | None = None
) -> bool:
    """Add ``owner`` to ``obj``'s ownerReferences (not as its controller), or update it in place.

    Returns whether ``obj`` changed; raises as :func:`set_controller_reference` does, except that
    another controller is no error.
    """
    _check_placement(owner, obj, owner_cluster, cluster)
    return _upsert(obj, _reference(owner, controller=None, block_owner_deletion=None))


def remove_owner_reference(owner: Any, obj: Any) -> bool:
    """Remove ``owner`` from ``obj``'s ownerReferences; returns whether it was there."""
    target = _reference(owner, controller=None, block_owner_deletion=None)
    meta = _meta(obj)
    refs = meta.get("ownerReferences") or []
    kept = [r for r in refs if not _same_owner(r, target)]
    if len(kept) == len(refs):
        return False
    if kept:
        meta["ownerReferences"] = kept
    else:
        meta.pop("ownerReferences", None)
    _set_meta(obj, meta)
    return True


def has_owner_reference(owner: Any, obj: Any) -> bool:
    """Whether ``obj``'s ownerReferences name ``owner`` (by group, kind and name)."""
    target = _reference(owner, controller=None, block_owner_deletion=None)
    return any(_same_owner(r, target) for r in _meta(obj).get("ownerReferences") or [])


def has_controller_reference(obj: Any) -> bool:
    """Whether any ownerReference of ``obj`` is its controller."""
    return any(r.get("controller") for r in _meta(obj).get("ownerReferences") or [])


# --- finalizers ----------------------------------------------------------------------------------


def contains_finalizer(obj: Any, finalizer: str) -> bool:
    """Whether ``obj`` carries ``finalizer``."""
    return finalizer in (_meta(obj).get("finalizers") or [])


def add_finalizer(obj: Any, finalizer: str) -> bool:
    """Add ``finalizer`` to ``obj`` unless present; returns whether ``obj`` changed."""
    meta = _meta(obj)
    finalizers = list(meta.get("finalizers") or [])
    if finalizer in finalizers:
        return False
    meta["finalizers"] = [*finalizers, finalizer]
    _set_meta(obj, meta)
    return True


def remove_finalizer(obj: Any, finalizer: str) -> bool:
    """Remove every occurrence of ``finalizer`` from ``obj``; returns whether ``obj`` changed."""
    meta = _meta(obj)
    finalizers = list(meta.get("finalizers") or [])
    kept = [f for f in finalizers if f != finalizer]
    if len(kept) == len(finalizers):
        return False
    meta["finalizers"] = kept
    _set_meta(obj, meta)
    return True


# --- create or update ----------------------------------------------------------------------------


async def _mutated(obj: Any, mutate: Mutate) -> None:
    key = object_key(obj)
    done = mutate(obj)
    if inspect.isawaitable(done):
        await done
    if object_key(obj) != key:
        raise ValueError(f"mutate changed the namespace/name of {key[0]}/{key[1]}: it must keep them")


async def _current(client: Client, obj: Any) -> Any | None:
    namespace, name = object_key(obj)
    kind = gvk_of(obj) if isinstance(obj, dict) else type(obj)
    try:
        return await client.get(kind, name, namespace=namespace or None)
    except NotFoundError:
        return None


async def create_or_update(client: Client, obj: Obj, mutate: Mutate) -> tuple[OperationResult, Obj]:
    """Create ``obj`` or update the stored object, as ``mutate`` wants it.

    Reads the object named by ``obj``'s kind, namespace and name. If it does not exist, calls
    ``mutate(obj)`` and creates ``obj``. If it does, calls ``mutate`` on the stored object and
    updates it (PUT, so a concurrent write raises :class:`~mcr.errors.ConflictError`) unless
    ``mutate`` left it unchanged. ``mutate`` (a function or coroutine function) sets the desired
    state in place and must keep the namespace and name (``ValueError`` otherwise). Returns what
    was done and the object as stored (or as read, when unchanged).
    """
    current = await _current(client, obj)
    if current is None:
        await _mutated(obj, mutate)
        return OperationResult.CREATED, await client.create(obj)
    before = copy.deepcopy(to_dict(current))
    await _mutated(current, mutate)
    if to_dict(current) == before:
        return OperationResult.NONE, current
    return OperationResult.UPDATED, await client.update(current)


def _merge_patch(before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
    """The JSON merge patch (RFC 7386) that turns ``before`` into ``after``."""
    patch: dict[str, Any] = {key: None for key in before.keys() - after.keys()}
    for key, value in after.items():
        old = before.get(key)
        if isinstance(value, dict) and isinstance(old, dict):
            sub = _merge_patch(old, value)
            if sub:
                patch[key] = sub
        elif key not in before or old != value:
            patch[key] = value
    return patch


async def create_or_patch(client: Client, obj: Obj, mutate: Mutate) -> tuple[OperationResult, Obj]:
    """Like :func:`create_or_update`, but writes merge patches of what ``mutate`` changed.

    The object's changes outside ``status`` are one patch, its ``status`` changes another through
    the status subresource; the result says which were written (``UPDATED``, ``UPDATED_STATUS``:
    both, ``UPDATED_STATUS_ONLY``). A patch carries no resourceVersion: it applies to the object
    as stored, whoever wrote it last. A created object's ``status`` is written by a second call.
    """
    current = await _current(client, obj)
    if current is None:
        await _mutated(obj, mutate)
        return OperationResult.CREATED, await client.create(obj)
    before = copy.deepcopy(to_dict(current))
    await _mutated(current, mutate)
    after = copy.deepcopy(to_dict(current))
    status_patch = _merge_patch({"status": before.pop("status", {})}, {"status": after.pop("status", {})})
    main_patch = _merge_patch(before, after)
    result: Any = current
    if main_patch:
        result = await client.patch(current, patch=main_patch)
    if status_patch:
        result = await client.status.patch(current, patch=status_patch)
    if main_patch and status_patch:
        return OperationResult.UPDATED_STATUS, result
    if status_patch:
        return OperationResult.UPDATED_STATUS_ONLY, result
    if main_patch:
        return OperationResult.UPDATED, result
    return OperationResult.NONE, current
