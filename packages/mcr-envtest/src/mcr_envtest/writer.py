"""Write semantics shared by HTTP handlers, the garbage collector and bootstrapping.

:class:`Writer` implements create, update (incl. the ``/status`` split and generation rules),
delete (preconditions, finalizers, propagation policies, namespace and CRD lifecycles) on top of
the :class:`~mcr_envtest.store.Store`. Every method is synchronous: a write either happens
completely or raises :class:`~mcr_envtest.errors.StatusError` before touching the store.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Callable
from typing import Any

from . import apply as applymod
from . import defaults, errors, limit_rules, quantity_fields, storage_protection, validation
from .resources import GENERATION_TRACKED, Registry, ResourceInfo, crd_resource_infos
from .store import Store
from .version_conversion import converter_for
from .write_rules import (
    content,
    decode_error,
    deep_copy,
    deleted_pod,
    missing_service_account,
    now_rfc3339,
    ownership,
    status_metadata,
    strip_volatile,
    type_causes,
)

__all__ = ["CRD_FINALIZER", "IMMORTAL_NAMESPACES", "Writer"]

IMMORTAL_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
GEN_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
CRD_FINALIZER = "customresourcecleanup.apiextensions.k8s.io"
NS = ("", "namespaces")
POD = ("", "pods")
PVC = ("", "persistentvolumeclaims")
CRD_GR = ("apiextensions.k8s.io", "customresourcedefinitions")


class Writer:
    """Object-level writes with upstream's rules; see the module docstring.

    ``on_crd_change(crd, removed)`` is called after a CRD is stored or finally removed, so the
    registry and discovery follow at once.
    """

    def __init__(self, store: Store, registry: Registry) -> None:
        self.store = store
        self.registry = registry
        self.on_crd_removed: list[Callable[[dict[str, Any]], None]] = []

    # ------------------------------------------------------------------ helpers
    def _manager(self, manager: str | None) -> str:
        return manager or "unknown"

    def check_namespace(self, info: ResourceInfo, namespace: str, name: str = "") -> None:
        """404 when a namespaced object's namespace does not exist, 403 (naming the object
        ``name`` when given) when it is terminating."""
        if not info.namespaced:
            return
        ns = self.store.get("", "namespaces", "", namespace)
        if ns is None:
            raise errors.namespace_not_found(namespace)
        if (ns.get("metadata") or {}).get("deletionTimestamp"):
            prefix = f'{info.plural} "{name}" is forbidden: ' if name else ""
            raise errors.forbidden(
                f"{prefix}unable to create new content in namespace {namespace} "
                "because it is being terminated",
                info,
                name,
                causes=[
                    {
                        "type": "NamespaceTerminating",
                        "message": f"namespace {namespace} is being terminated",
                        "field": "metadata.namespace",
                    }
                ],
            )

    def _check_crd(self, info: ResourceInfo, obj: dict[str, Any]) -> None:
        """A CRD the registry cannot serve is a 422 before anything is stored."""
        if info.group_resource != CRD_GR:
            return
        try:
            infos = crd_resource_infos(obj)
        except (AttributeError, TypeError, KeyError) as exc:
            raise errors.invalid(
                info,
                obj["metadata"].get("name", ""),
                [{"type": "FieldValueInvalid", "field": "spec", "message": f"Invalid value: {exc}"}],
            ) from None
        if not infos or not all(i.plural and i.kind and i.group and i.version for i in infos):
            raise errors.invalid(
                info,
                obj["metadata"].get("name", ""),
                [
                    {
                        "type": "FieldValueRequired",
                        "field": "spec",
                        "message": "Required value: group, names.plural, names.kind and a served version "
                        "are required",
                    }
                ],
            )

    def _check_decode(self, info: ResourceInfo, obj: dict[str, Any]) -> None:
        """A built-in object kube-apiserver could not decode into its Go type is a 400; its
        quantities are written as the decoding leaves them."""
        found = None
        if not info.is_custom:
            found = decode_error(info.group, info.kind, obj) or quantity_fields.canonicalise(
                info.api_version, info.kind, obj
            )
        if found:
            raise errors.bad_request(
                f'{info.kind} in version "{info.version}" cannot be handled as a {info.kind}: {found}'
            )

    def _validate(self, info: ResourceInfo, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        causes = validation.validate_object(info, obj, old=old, registry=self.registry)
        if causes:
            named = info
            if info.group_resource == ("events.k8s.io", "events"):  # upstream names the internal kind
                named = self.registry.lookup("", "v1", "events") or info
            raise errors.invalid(named, (obj.get("metadata") or {}).get("name", ""), causes)

    # ------------------------------------------------------------------ create
    def create(
        self,
        info: ResourceInfo,
        body: dict[str, Any],
        namespace: str,
        *,
        dry_run: bool = False,
        manager: str | None = None,
        from_apply: bool = False,
    ) -> dict[str, Any]:
        """Create an object (``body`` is owned by the writer afterwards); returns the stored object."""
        obj = body
        obj["apiVersion"] = info.api_version
        obj["kind"] = info.kind
        meta = obj.get("metadata")
        if not isinstance(meta, dict):
            meta = obj["metadata"] = {}
        if info.namespaced:
            body_ns = meta.get("namespace")
            if body_ns and namespace and body_ns != namespace:
                raise errors.bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request"
                )
            namespace = namespace or body_ns or ""
            if not namespace:
                raise errors.bad_request(
                    "the server could not find the requested resource: namespace is required"
                )
            meta["namespace"] = namespace
        else:
            meta.pop("namespace", None)
            namespace = ""
        self._check_decode(info, obj)
        causes = type_causes(obj)
        if causes:
            raise errors.invalid(info, str(meta.get("name") or ""), causes)
        if obj.get("spec", {}) is None:
            obj.pop("spec")
        name = meta.get("name") or ""
        asked = name or str(meta.get("generateName") or "")  # what admission errors name
        if not name:
            gen = meta.get("generateName") or ""
            if not gen:
                raise errors.invalid(
                    info,
                    "",
                    [
                        {
                            "type": "FieldValueRequired",
                            "message": "Required value: name or generateName is required",
                            "field": "metadata.name",
                        }
                    ],
                )
            name = gen + "".join(random.choices(GEN_ALPHABET, k=5))
            meta["name"] = name
        causes = validation.validate_name(info, name)
        if causes:
            raise errors.invalid(info, name, causes)
        self.check_namespace(info, namespace, name)
        if self.store.get(info.group, info.plural, namespace, name) is not None:
            raise errors.already_exists(info, name)
        if info.group_resource == ("", "pods"):
            account = str((obj.get("spec") or {}).get("serviceAccountName") or "default")
            if self.store.get("", "serviceaccounts", namespace, account) is None:
                raise missing_service_account(namespace, name, account)
        now = now_rfc3339()
        meta["uid"] = str(uuid.uuid4())
        meta["creationTimestamp"] = now
        for k in ("resourceVersion", "deletionTimestamp", "deletionGracePeriodSeconds", "selfLink"):
            meta.pop(k, None)
        if info.is_custom or info.group_resource in GENERATION_TRACKED:
            meta["generation"] = 1
        else:
            meta.pop("generation", None)
        if info.status_subresource and info.group_resource != CRD_GR:
            obj.pop("status", None)
        basis = self._request_basis(info, obj) if not from_apply else None
        obj = defaults.apply(info, obj, None, now, allocations=False)
        meta = obj["metadata"]
        if not from_apply:
            mf = meta.get("managedFields")
            if mf == [{}]:
                meta.pop("managedFields", None)
            obj = applymod.record_update(
                info,
                None,
                obj,
                manager=self._manager(manager),
                operation="Update",
                subresource=None,
                now=now,
                basis=basis,
            )
        defaults.allocate(info, obj, None)  # allocations and admission: owned by no manager
        storage_protection.admit(info.group_resource, obj)  # admission: owned by no manager
        ranges = self._limit_ranges(info, namespace)
        if info.group_resource == POD:
            limit_rules.default_pod(obj, ranges)  # LimitRanger's defaults: owned by no manager
        self._validate(info, obj, None)
        self._limit(info, obj, ranges, asked)
        self._check_crd(info, obj)
        if dry_run:
            return obj
        self.store.commit(info.group, info.plural, obj)
        if info.group_resource == CRD_GR:
            self.registry.add_crd(obj)
        if info.group_resource == NS:
            self._ensure_default_sa(name)
        return obj

    def _limit_ranges(self, info: ResourceInfo, namespace: str) -> list[dict[str, Any]]:
        """The LimitRanges that bound a write of ``info`` in ``namespace``, by name (none but
        for Pods and claims)."""
        if info.group_resource not in (POD, PVC):
            return []
        ranges = self.store.list_objects("", "limitranges", namespace)
        return sorted(ranges, key=lambda r: str((r.get("metadata") or {}).get("name", "")))

    def _limit(
        self, info: ResourceInfo, obj: dict[str, Any], ranges: list[dict[str, Any]], name: str
    ) -> None:
        """LimitRanger's validation of a Pod's or claim's resources (403 Forbidden)."""
        if not ranges:
            return
        why = limit_rules.violation(info.plural, obj, ranges)
        if why is not None:
            raise errors.forbidden(f'{info.plural} "{name}" is forbidden: {why}', info, name)

    def _request_basis(self, info: ResourceInfo, obj: dict[str, Any]) -> dict[str, Any] | None:
        """What managedFields record for a custom resource written through a version other than
        its storage version ``info``: ``obj`` pruned and defaulted by the request version's
        schema, as upstream records it before converting to storage. None otherwise (the written
        object itself is recorded), and for a CRD with a conversion webhook, whose versions may
        hold different fields (``obj`` is already converted)."""
        version = applymod.REQUEST_VERSION.get()
        if not info.is_custom or version is None or version == info.api_version:
            return None
        conversion = ((info.crd or {}).get("spec") or {}).get("conversion") or {}
        if conversion.get("strategy", "None") != "None":
            return None
        served = self.registry.lookup(info.group, version.rpartition("/")[2], info.plural)
        if served is None:
            return None
        return defaults.apply(served, {**obj, "apiVersion": version}, None, now_rfc3339())

    def _ensure_default_sa(self, namespace: str) -> None:
        sa_info = self.registry.lookup("", "v1", "serviceaccounts")
        if sa_info is None or self.store.get("", "serviceaccounts", namespace, "default") is not None:
            return
        self.create(sa_info, {"metadata": {"name": "default", "namespace": namespace}}, namespace)

    # ------------------------------------------------------------------ update
    def update(
        self,
        info: ResourceInfo,
        body: dict[str, Any],
        namespace: str,
        name: str,
        *,
        subresource: str | None = None,
        dry_run: bool = False,
        manager: str | None = None,
        require_rv: bool | None = None,
        operation: str = "Update",
        managed: bool = False,
    ) -> dict[str, Any]:
        """Replace an object (PUT, or the result of a patch); ``body`` is owned by the writer.

        ``require_rv`` (default: custom resources only) makes a missing resourceVersion a 422.
        ``managed`` means ``body`` already carries final managedFields (server-side apply).
        Returns the stored object (the unchanged old one for a no-op write).
        """
        old = self.store.get(info.group, info.plural, namespace, name)
        if old is None:
            raise errors.not_found(info, name)
        convert = converter_for(info.group_resource)
        if convert is not None:  # stored through another version or API of the resource
            old = convert(old, info.api_version)
        if not isinstance(body, dict):
            raise errors.bad_request("the body of an update must be a JSON object")
        meta = body.get("metadata")
        if not isinstance(meta, dict):
            meta = body["metadata"] = {}
        if meta.get("name", name) != name:
            raise errors.bad_request(
                f"the name of the object ({meta.get('name')}) does not match the name on the URL ({name})"
            )
        if info.namespaced and meta.get("namespace") and meta["namespace"] != namespace:
            raise errors.bad_request(
                "the namespace of the provided object does not match the namespace sent on the request"
            )
        self._check_decode(info, body)
        causes = type_causes(body)
        if causes:
            raise errors.invalid(info, name, causes)
        old_meta = old["metadata"]
        rv = meta.get("resourceVersion")
        if rv:
            if rv != old_meta.get("resourceVersion"):
                raise errors.conflict(info, name, errors.STALE)
        elif require_rv if require_rv is not None else info.is_custom:
            raise errors.invalid(
                info,
                name,
                [
                    {
                        "type": "FieldValueInvalid",
                        "message": "Invalid value: 0x0: must be specified for an update",
                        "field": "metadata.resourceVersion",
                    }
                ],
            )
        if meta.get("uid") and meta["uid"] != old_meta.get("uid"):
            raise errors.invalid(
                info,
                name,
                [{"type": "FieldValueInvalid", "message": "field is immutable", "field": "metadata.uid"}],
            )
        if subresource == "status":
            new = deep_copy(old)
            if "status" in body:
                new["status"] = body["status"]
            else:
                new.pop("status", None)
            if managed:
                new["metadata"]["managedFields"] = meta.get("managedFields")
            else:
                status_metadata(info.group_resource, new["metadata"], meta)
        else:
            new = body
            new["apiVersion"] = info.api_version
            new["kind"] = info.kind
            meta["name"] = name
            if info.namespaced:
                meta["namespace"] = namespace
            else:
                meta.pop("namespace", None)
            for k in (
                "uid",
                "creationTimestamp",
                "deletionTimestamp",
                "deletionGracePeriodSeconds",
                "generation",
            ):
                if k in old_meta:
                    meta[k] = old_meta[k]
                else:
                    meta.pop(k, None)
            # ``[{}]`` stays for record_update, which clears the tracking
            if not managed and "managedFields" not in meta and "managedFields" in old_meta:
                meta["managedFields"] = old_meta["managedFields"]
            if info.status_subresource:
                if "status" in old:
                    new["status"] = old["status"]
                else:
                    new.pop("status", None)
            if info.group_resource == NS:
                new["spec"] = old.get("spec", {}) if "spec" not in new else new["spec"]
            if info.group_resource == CRD_GR:
                new["status"] = old.get("status", {})
        basis = self._request_basis(info, new) if not managed else None
        if subresource != "status" or info.is_custom:
            new = defaults.apply(info, new, old, now_rfc3339())
        else:
            defaults.status_defaults(info, new)
        new_meta = new["metadata"]
        new_meta["resourceVersion"] = old_meta.get("resourceVersion")
        # generation: bumps when content outside metadata (and status, with a status subresource) changes
        if "generation" in old_meta:
            with_status = not info.status_subresource
            if content(new, with_status=with_status) != content(old, with_status=with_status):
                new_meta["generation"] = int(old_meta["generation"]) + 1
        if strip_volatile(new) == strip_volatile(old) and ownership(new) == ownership(old):
            return old
        now = now_rfc3339()
        if not managed:
            new = applymod.record_update(
                info,
                old,
                new,
                manager=self._manager(manager),
                operation=operation,
                subresource=subresource,
                now=now,
                basis=basis,
            )
        self._validate(info, new, old)
        if (
            info.group_resource == PVC
            and not subresource
            and not (old.get("metadata") or {}).get("deletionTimestamp")
        ):
            self._limit(info, new, self._limit_ranges(info, namespace), name)
        self._check_crd(info, new)
        if dry_run:
            return new
        if new_meta.get("deletionTimestamp") and not new_meta.get("finalizers"):
            self._remove(info, namespace, name)
            return new
        self.store.commit(info.group, info.plural, new)
        if info.group_resource == CRD_GR:
            self.registry.add_crd(new)
        return new

    def commit_prepared(self, info: ResourceInfo, obj: dict[str, Any], *, created: bool) -> dict[str, Any]:
        """Store ``obj`` as returned by :meth:`create` or :meth:`update` with ``dry_run=True``
        (admission webhooks ran in between); returns the stored object.

        Raises AlreadyExists (a create) or Conflict (an update) when another write to the same
        object happened meanwhile, NotFound when an updated object is gone.
        """
        meta = obj["metadata"]
        namespace, name = meta.get("namespace", ""), meta["name"]
        current = self.store.get(info.group, info.plural, namespace, name)
        if created:
            if current is not None:
                raise errors.already_exists(info, name)
            self.check_namespace(info, namespace, name)
        else:
            if current is None:
                raise errors.not_found(info, name)
            if current is obj:  # a no-op update
                return obj
            if (current["metadata"]).get("resourceVersion") != meta.get("resourceVersion"):
                raise errors.conflict(info, name, errors.STALE)
            if meta.get("deletionTimestamp") and not meta.get("finalizers"):
                self._remove(info, namespace, name)
                return obj
        self.store.commit(info.group, info.plural, obj)
        if info.group_resource == CRD_GR:
            self.registry.add_crd(obj)
        if created and info.group_resource == NS:
            self._ensure_default_sa(name)
        return obj

    # ------------------------------------------------------------------ delete
    def delete(
        self,
        info: ResourceInfo,
        namespace: str,
        name: str,
        options: dict[str, Any] | None = None,
        *,
        dry_run: bool = False,
    ) -> tuple[dict[str, Any], bool]:
        """Delete an object; returns (object, removed) — removed is False when the object now
        waits on finalizers (it then carries ``deletionTimestamp``)."""
        options = options or {}
        obj = self.store.get(info.group, info.plural, namespace, name)
        if obj is None:
            raise errors.not_found(info, name)
        meta = obj["metadata"]
        pre = options.get("preconditions") or {}
        for field, key, why in (
            ("UID", "uid", "deleted and then recreated"),
            ("ResourceVersion", "resourceVersion", "modified"),
        ):
            if pre.get(key) and pre[key] != meta.get(key):
                raise errors.StatusError(
                    409,
                    "Conflict",
                    f'Operation cannot be fulfilled on {info.kind} "{name}": the {field} in the precondition '
                    f"({pre[key]}) does not match the {field} in record ({meta.get(key)}). The object might "
                    f"have been {why}",
                    details={
                        "name": name,
                        "kind": info.kind,
                        **({"group": info.group} if info.group else {}),
                    },
                )
        policy = options.get("propagationPolicy")
        if policy is None and options.get("orphanDependents") is not None:
            policy = "Orphan" if options["orphanDependents"] else "Background"
        if policy not in (None, "Background", "Foreground", "Orphan"):
            supported = '"Foreground", "Background", "Orphan", "nil"'
            raise errors.options_invalid(
                "DeleteOptions",
                [
                    {
                        "type": "FieldValueNotSupported",
                        "field": "propagationPolicy",
                        "message": f'Unsupported value: "{policy}": supported values: {supported}',
                    }
                ],
            )
        gr = info.group_resource
        if gr == NS and name in IMMORTAL_NAMESPACES:
            raise errors.forbidden(
                f'namespaces "{name}" is forbidden: this namespace may not be deleted', info, name
            )
        extra: list[str] = []
        if policy == "Foreground":
            extra.append("foregroundDeletion")
        elif policy == "Orphan":
            extra.append("orphan")
        if gr == CRD_GR:
            extra.append(CRD_FINALIZER)
        finalizers = list(meta.get("finalizers") or ())
        if gr == NS:
            return self._terminate_namespace(info, obj, dry_run), False
        if not finalizers and not extra:
            if gr == ("", "pods"):
                obj = deleted_pod(obj)
            if dry_run:
                return obj, True
            self._remove(info, namespace, name)
            return obj, True
        if meta.get("deletionTimestamp"):
            return obj, False  # already terminating: a repeated DELETE returns it unchanged
        new = deep_copy(obj)
        nm = new["metadata"]
        nm["deletionTimestamp"] = now_rfc3339()
        nm["deletionGracePeriodSeconds"] = 0
        nm["finalizers"] = finalizers + [f for f in extra if f not in finalizers]
        if "generation" in nm:
            nm["generation"] = int(nm["generation"]) + 1
        if dry_run:
            return new, False
        self.store.commit(info.group, info.plural, new)
        return new, False

    def _terminate_namespace(self, info: ResourceInfo, obj: dict[str, Any], dry_run: bool) -> dict[str, Any]:
        if obj["metadata"].get("deletionTimestamp"):
            return obj
        new = deep_copy(obj)
        new["metadata"]["deletionTimestamp"] = now_rfc3339()
        new.setdefault("spec", {})["finalizers"] = ["kubernetes"]
        new["status"] = {"phase": "Terminating"}
        if dry_run:
            return new
        self.store.commit("", "namespaces", new)
        return new

    def _remove(self, info: ResourceInfo, namespace: str, name: str) -> None:
        ev = self.store.remove(info.group, info.plural, namespace, name)
        if ev is not None and info.group_resource == CRD_GR:
            self.registry.remove_crd(ev.prev or ev.obj)
            for cb in self.on_crd_removed:
                cb(ev.prev or ev.obj)

    def remove_finalizer(self, info: ResourceInfo, namespace: str, name: str, finalizer: str) -> None:
        """Drop one finalizer (as a controller would); removes the object when none remain."""
        obj = self.store.get(info.group, info.plural, namespace, name)
        if obj is None:
            return
        fins = list(obj["metadata"].get("finalizers") or ())
        if finalizer not in fins:
            return
        fins.remove(finalizer)
        if not fins and obj["metadata"].get("deletionTimestamp"):
            self._remove(info, namespace, name)
            return
        new = deep_copy(obj)
        if fins:
            new["metadata"]["finalizers"] = fins
        else:
            new["metadata"].pop("finalizers", None)
        self.store.commit(info.group, info.plural, new)

    def finish_namespace(self, name: str) -> None:
        """Remove a terminating namespace once empty (clears the ``kubernetes`` finalizer)."""
        obj = self.store.get("", "namespaces", "", name)
        if obj is None:
            return
        if obj["metadata"].get("finalizers"):
            new = deep_copy(obj)
            new["spec"]["finalizers"] = []
            self.store.commit("", "namespaces", new)
            return
        self.store.remove("", "namespaces", "", name)
