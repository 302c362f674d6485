"""OpenAPI v3 documents served at ``/openapi/v3`` and ``/openapi/v3/<api|apis/g>/<v>``.

kubectl needs them for ``create``/``apply`` with its default ``--validate=strict`` (it looks for a
``patch`` operation carrying the object's ``x-kubernetes-group-version-kind`` and a
``fieldValidation`` query parameter), for client-side ``apply`` (merge keys and patch strategies)
and for ``explain`` (component schemas tagged with their GVK). Built-in schemas come from the
``kubernetes`` client's models (:mod:`.schema.builtin`), custom resources' from their CRD's
``openAPIV3Schema``.

Documents are built on first request and cached per registry until the registry changes.
"""

from __future__ import annotations

import copy
import hashlib
import weakref
from typing import TYPE_CHECKING, Any

import orjson

from .schema import builtin
from .schema.structural import crd_version_schema

if TYPE_CHECKING:
    from .resources import Registry, ResourceInfo

__all__ = ["group_version_document", "group_version_hash", "root_document", "warm_schemas"]

_cache: weakref.WeakKeyDictionary[Any, dict[tuple[int, str, str], dict[str, Any]]] = (
    weakref.WeakKeyDictionary()
)

_OBJECT_META = "V1ObjectMeta"
_PATCH_DEF = "io.k8s.apimachinery.pkg.apis.meta.v1.Patch"


def _gv_key(group: str, version: str) -> str:
    return f"apis/{group}/{version}" if group else f"api/{version}"


def group_version_hash(registry: Registry, group: str, version: str) -> str:
    """The hash naming the current document of a group-version (its ``?hash=`` and ETag)."""
    h = hashlib.sha512()
    for info in sorted(registry.resources_for(group, version), key=lambda i: i.plural):
        h.update(f"{info.plural}/{info.kind}/{info.namespaced}/{sorted(info.verbs)}".encode())
        if info.crd is not None:
            md = info.crd.get("metadata") or {}
            h.update(f"{md.get('uid')}/{md.get('resourceVersion')}".encode())
    return h.hexdigest()[:128].upper()


def warm_schemas(registry: Registry) -> None:
    """Import the ``kubernetes`` models and build every built-in kind's schemas ahead of use.

    The first OpenAPI document, validation or patch of a built-in otherwise pays ~1 s of model
    imports. This touches only thread-safe caches, so a server may run it in a worker thread
    (``await asyncio.to_thread(warm_schemas, registry)``) right after it starts listening.
    """
    for info in registry.all():
        if info.crd is None and info.model is not None and builtin.model_class(info.model) is not None:
            builtin.model_closure(info.model)
            if builtin.model_class(info.model + "List") is not None:
                builtin.model_closure(info.model + "List")


def _get_only(path: str, operation: str, tag: str, description: str, schema: str) -> dict[str, Any]:
    ok = {"schema": {"$ref": f"#/components/schemas/{schema}"}}
    return {
        path: {
            "get": {
                "tags": [tag],
                "description": description,
                "operationId": operation,
                "responses": {
                    "200": {"description": "OK", "content": {"application/json": ok}},
                    "401": {"description": "Unauthorized"},
                },
            }
        }
    }


_STRINGS = ("major", "minor", "gitVersion", "gitCommit", "gitTreeState", "buildDate", "goVersion")
_VERSION_INFO: dict[str, Any] = {
    "description": "Info contains versioning information.",
    "type": "object",
    "required": [*_STRINGS, "compiler", "platform"],
    "properties": {k: {"type": "string", "default": ""} for k in (*_STRINGS, "compiler", "platform")},
}
_API_VERSIONS: dict[str, Any] = {
    "description": "APIVersions lists the versions that are available, to allow clients to discover the API.",
    "type": "object",
    "required": ["versions", "serverAddressByClientCIDRs"],
    "properties": {
        "apiVersion": {"type": "string"},
        "kind": {"type": "string"},
        "serverAddressByClientCIDRs": {"type": "array", "items": {"type": "object"}},
        "versions": {"type": "array", "items": {"type": "string", "default": ""}},
    },
}

# The documents the /openapi/v3 index lists beside the group-versions: /version and /api.
STATIC_DOCUMENTS: dict[str, dict[str, Any]] = {
    "version": {
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": "1.37"},
        "paths": _get_only(
            "/version/",
            "getCodeVersion",
            "version",
            "get the version information for this server",
            "io.k8s.apimachinery.pkg.version.Info",
        ),
        "components": {"schemas": {"io.k8s.apimachinery.pkg.version.Info": _VERSION_INFO}},
    },
    "api": {
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": "1.37"},
        "paths": _get_only(
            "/api/",
            "getCoreAPIVersions",
            "core",
            "get available API versions",
            "io.k8s.apimachinery.pkg.apis.meta.v1.APIVersions",
        ),
        "components": {"schemas": {"io.k8s.apimachinery.pkg.apis.meta.v1.APIVersions": _API_VERSIONS}},
    },
}
STATIC_HASHES: dict[str, str] = {
    key: hashlib.sha512(orjson.dumps(doc)).hexdigest().upper() for key, doc in STATIC_DOCUMENTS.items()
}


def root_document(registry: Registry) -> dict[str, Any]:
    """Return the ``/openapi/v3`` index: ``{"paths": {"api/v1": {"serverRelativeURL": ...}, ...}}``.

    The ``hash`` query changes whenever a group-version's document would change, so clients that
    cache documents by URL (kubectl does) see CRD changes at once.
    """
    paths: dict[str, Any] = {}
    for group, versions in registry.groups():
        for version in versions:
            if not registry.resources_for(group, version):
                continue
            key = _gv_key(group, version)
            paths[key] = {
                "serverRelativeURL": f"/openapi/v3/{key}?hash={group_version_hash(registry, group, version)}"
            }
    for key, digest in STATIC_HASHES.items():
        paths[key] = {"serverRelativeURL": f"/openapi/v3/{key}?hash={digest}"}
    return {"paths": dict(sorted(paths.items()))}


def group_version_document(registry: Registry, group: str, version: str) -> dict[str, Any] | None:
    """Return the OpenAPI v3 document of one group-version, or None when it serves nothing.

    The returned dict is shared by later calls (until the registry changes): callers must not
    mutate it.
    """
    per_registry = _cache.setdefault(registry, {})
    key = (registry.generation, group, version)
    doc = per_registry.get(key)
    if doc is None:
        infos = registry.resources_for(group, version)
        if not infos:
            return None
        doc = _build(registry, group, version, infos)
        for stale in [k for k in per_registry if k[0] != registry.generation]:
            del per_registry[stale]
        per_registry[key] = doc
    return doc


def _crd_definition_name(info: ResourceInfo, kind: str) -> str:
    rev = ".".join(reversed(info.group.split("."))) if info.group else "core"
    return f"{rev}.{info.version}.{kind}"


def _gvk_ext(info: ResourceInfo, kind: str) -> list[dict[str, str]]:
    return [{"group": info.group, "version": info.version, "kind": kind}]


def _build(registry: Registry, group: str, version: str, infos: list[ResourceInfo]) -> dict[str, Any]:
    schemas: dict[str, Any] = {}
    paths: dict[str, Any] = {}
    for info in sorted(infos, key=lambda i: i.plural):
        if info.crd is None and info.model is not None and builtin.model_class(info.model) is not None:
            closure = builtin.model_closure(info.model)
            for name, sch in closure.items():
                schemas.setdefault(name, sch)
            kind_def = builtin.definition_name(info.model)
            schemas[kind_def] = {
                **schemas[kind_def],
                "x-kubernetes-group-version-kind": _gvk_ext(info, info.kind),
            }
            list_model = info.model + "List"
            if builtin.model_class(list_model) is not None:
                list_def = builtin.definition_name(list_model)
                for name, sch in builtin.model_closure(list_model).items():
                    schemas.setdefault(name, sch)
                schemas[list_def] = {
                    **schemas[list_def],
                    "x-kubernetes-group-version-kind": _gvk_ext(info, info.list_kind or info.kind + "List"),
                }
            else:
                list_def = kind_def
        else:
            kind_def, list_def = _custom_schemas(info, schemas)
        paths.update(_paths(info, kind_def, list_def))
    models = ["V1Status", "V1DeleteOptions"]
    if any("scale" in i.subresources for i in infos):
        models.append("V1Scale")
    for model in models:
        for name, sch in builtin.model_closure(model).items():
            schemas.setdefault(name, sch)
    schemas.setdefault(
        _PATCH_DEF,
        {
            "type": "object",
            "description": "Patch is provided to give a concrete name and type to the Kubernetes PATCH "
            "request body.",
        },
    )
    return {
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": "1.37"},
        "paths": paths,
        "components": {"schemas": schemas},
    }


def _custom_schemas(info: ResourceInfo, schemas: dict[str, Any]) -> tuple[str, str]:
    for name, sch in builtin.model_closure(_OBJECT_META).items():
        schemas.setdefault(name, sch)
    for name, sch in builtin.model_closure("V1ListMeta").items():
        schemas.setdefault(name, sch)
    declared = crd_version_schema(info.crd or {}, info.version)
    schema: dict[str, Any] = (
        copy.deepcopy(declared)
        if declared
        else {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    )
    schema.setdefault("type", "object")
    props: dict[str, Any] = schema.setdefault("properties", {})
    props["apiVersion"] = {
        "type": "string",
        "description": "APIVersion defines the versioned schema of this object.",
    }
    props["kind"] = {
        "type": "string",
        "description": "Kind is a string value representing the REST resource.",
    }
    props["metadata"] = {
        "allOf": [{"$ref": builtin.REF_PREFIX + builtin.definition_name(_OBJECT_META)}],
        "description": "Standard object's metadata.",
    }
    schema["x-kubernetes-group-version-kind"] = _gvk_ext(info, info.kind)
    kind_def = _crd_definition_name(info, info.kind)
    schemas[kind_def] = schema
    list_kind = info.list_kind or info.kind + "List"
    list_def = _crd_definition_name(info, list_kind)
    schemas[list_def] = {
        "type": "object",
        "description": f"{list_kind} is a list of {info.kind}",
        "required": ["items"],
        "properties": {
            "apiVersion": {"type": "string"},
            "kind": {"type": "string"},
            "items": {"type": "array", "items": {"$ref": builtin.REF_PREFIX + kind_def}},
            "metadata": {"allOf": [{"$ref": builtin.REF_PREFIX + builtin.definition_name("V1ListMeta")}]},
        },
        "x-kubernetes-group-version-kind": _gvk_ext(info, list_kind),
    }
    return kind_def, list_def


def _param(name: str, description: str, *, where: str = "query", required: bool = False) -> dict[str, Any]:
    return {
        "name": name,
        "in": where,
        "description": description,
        "required": required,
        "schema": {"type": "string", "uniqueItems": True},
    }


_P_NAME = _param("name", "name of the resource", where="path", required=True)
_P_NS = _param(
    "namespace", "object name and auth scope, such as for teams and projects", where="path", required=True
)
_P_PRETTY = _param("pretty", "If 'true', then the output is pretty printed.")
_P_DRY = _param("dryRun", "When present, indicates that modifications should not be persisted.")
_P_MANAGER = _param(
    "fieldManager", "fieldManager is a name associated with the actor or entity making these changes."
)
_P_VALIDATION = _param(
    "fieldValidation",
    "fieldValidation instructs the server on how to handle objects in the request containing unknown or "
    "duplicate fields. Valid values are: Ignore, Warn, Strict.",
)
_P_FORCE = {
    "name": "force",
    "in": "query",
    "description": 'Force is going to "force" Apply requests.',
    "schema": {"type": "boolean", "uniqueItems": True},
}
_LIST_PARAMS = [
    _param(n, n)
    for n in (
        "allowWatchBookmarks",
        "continue",
        "fieldSelector",
        "labelSelector",
        "limit",
        "resourceVersion",
        "resourceVersionMatch",
        "sendInitialEvents",
        "timeoutSeconds",
        "watch",
    )
]


SCALE_DEF = "io.k8s.api.autoscaling.v1.Scale"
SCALE_GVK = {"group": "autoscaling", "version": "v1", "kind": "Scale"}


def _response(ref: str, *codes: str) -> dict[str, Any]:
    content = {"application/json": {"schema": {"$ref": builtin.REF_PREFIX + ref}}}
    return {code: {"description": "OK" if code == "200" else "Created", "content": content} for code in codes}


def _paths(info: ResourceInfo, kind_def: str, list_def: str) -> dict[str, Any]:
    base = f"/apis/{info.group}/{info.version}" if info.group else f"/api/{info.version}"
    if info.namespaced:
        coll = f"{base}/namespaces/{{namespace}}/{info.plural}"
        scope = [_P_NS]
        ns_word = "Namespaced"
    else:
        coll = f"{base}/{info.plural}"
        scope = []
        ns_word = ""
    op_kind = ns_word + info.kind
    gvk = {"group": info.group, "version": info.version, "kind": info.kind}
    tag = f"{info.group.split('.')[0] if info.group else 'core'}_{info.version}"

    def op(
        action: str, verb: str, desc: str, params: list[dict[str, Any]], sub: str = "", **extra: Any
    ) -> dict[str, Any]:
        return {
            "tags": [tag],
            "description": desc,
            "operationId": f"{verb}{tag.title().replace('_', '')}{op_kind}{sub}",
            "parameters": params,
            "x-kubernetes-action": action,
            "x-kubernetes-group-version-kind": SCALE_GVK if sub == "Scale" else gvk,
            **extra,
        }

    body = {"content": {"*/*": {"schema": {"$ref": builtin.REF_PREFIX + kind_def}}}, "required": True}
    patch_types = [
        "application/json-patch+json",
        "application/merge-patch+json",
        "application/apply-patch+yaml",
    ]
    if info.crd is None:
        patch_types.insert(2, "application/strategic-merge-patch+json")
    patch_body = {
        "content": {t: {"schema": {"type": "object"}} for t in patch_types},
        "required": True,
    }
    item_ops: dict[str, Any] = {}
    coll_ops: dict[str, Any] = {}
    if "get" in info.verbs:
        item_ops["get"] = op(
            "get", "read", f"read the specified {info.kind}", [], responses=_response(kind_def, "200")
        )
    if "update" in info.verbs:
        item_ops["put"] = op(
            "put",
            "replace",
            f"replace the specified {info.kind}",
            [_P_DRY, _P_MANAGER, _P_VALIDATION],
            requestBody=body,
            responses=_response(kind_def, "200", "201"),
        )
    if "patch" in info.verbs:
        item_ops["patch"] = op(
            "patch",
            "patch",
            f"partially update the specified {info.kind}",
            [_P_DRY, _P_MANAGER, _P_VALIDATION, _P_FORCE],
            requestBody=patch_body,
            responses=_response(kind_def, "200", "201"),
        )
    if "delete" in info.verbs:
        item_ops["delete"] = op("delete", "delete", f"delete a {info.kind}", [_P_DRY], responses={})
    if "list" in info.verbs:
        coll_ops["get"] = op(
            "list",
            "list",
            f"list or watch objects of kind {info.kind}",
            _LIST_PARAMS,
            responses=_response(list_def, "200"),
        )
    if "create" in info.verbs:
        coll_ops["post"] = op(
            "post",
            "create",
            f"create a {info.kind}",
            [_P_DRY, _P_MANAGER, _P_VALIDATION],
            requestBody=body,
            responses=_response(kind_def, "200", "201"),
        )
    if "deletecollection" in info.verbs:
        coll_ops["delete"] = op(
            "deletecollection", "deletecollection", f"delete collection of {info.kind}", [], responses={}
        )
    out: dict[str, Any] = {}
    if coll_ops:
        out[coll] = {**coll_ops, "parameters": [*scope, _P_PRETTY]}
    if item_ops:
        out[coll + "/{name}"] = {**item_ops, "parameters": [_P_NAME, *scope, _P_PRETTY]}
    for sub, schema in (("status", kind_def), ("scale", SCALE_DEF)):
        if sub not in info.subresources:
            continue
        name = sub.title()
        sub_body = {"content": {"*/*": {"schema": {"$ref": builtin.REF_PREFIX + schema}}}, "required": True}
        writes = [_P_DRY, _P_MANAGER, _P_VALIDATION]
        out[coll + "/{name}/" + sub] = {
            "get": op(
                "get",
                "read",
                f"read {sub} of the specified {info.kind}",
                [],
                name,
                responses=_response(schema, "200"),
            ),
            "put": op(
                "put",
                "replace",
                f"replace {sub} of the specified {info.kind}",
                writes,
                name,
                requestBody=sub_body,
                responses=_response(schema, "200", "201"),
            ),
            "patch": op(
                "patch",
                "patch",
                f"partially update {sub} of the specified {info.kind}",
                [*writes, _P_FORCE],
                name,
                requestBody=patch_body,
                responses=_response(schema, "200", "201"),
            ),
            "parameters": [_P_NAME, *scope, _P_PRETTY],
        }
    return out
