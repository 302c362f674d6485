"""``meta.k8s.io/v1`` Table rendering for ``kubectl get`` (F25).

Built-in kinds get the printer columns kubectl shows against a real cluster (configmaps DATA,
pods READY/STATUS/RESTARTS, deployments READY/UP-TO-DATE/AVAILABLE, ...); custom resources get
Name plus their CRD's ``additionalPrinterColumns`` (default: Age), evaluated with a small JSONPath
subset; anything else gets upstream's default Name and Created At. Ages are rendered like
upstream's ``HumanDuration`` at the moment of the request.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .schema import builtin

if TYPE_CHECKING:
    from .resources import ResourceInfo

__all__ = ["human_duration", "jsonpath", "table_event_object", "to_table"]

Obj = dict[str, Any]
Column = tuple[str, str, str, int, Callable[[Obj], Any]]  # name, type, format, priority, cell


def human_duration(seconds: float) -> str:
    """Upstream's ``duration.HumanDuration``: ``"45s"``, ``"5m3s"``, ``"3h20m"``, ``"9d"``, ``"2y"``."""
    if seconds < -1:
        return "<invalid>"
    if seconds < 0:
        return "0s"
    s = int(seconds)
    if s < 120:
        return f"{s}s"
    minutes = s // 60
    if minutes < 10:
        return f"{minutes}m" if s % 60 == 0 else f"{minutes}m{s % 60}s"
    if minutes < 180:
        return f"{minutes}m"
    hours = s // 3600
    if hours < 8:
        return f"{hours}h" if minutes % 60 == 0 else f"{hours}h{minutes % 60}m"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        return f"{hours // 24}d" if hours % 24 == 0 else f"{hours // 24}d{hours % 24}h"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    if hours < 24 * 365 * 8:
        days = (hours // 24) % 365
        return f"{hours // 24 // 365}y" if days == 0 else f"{hours // 24 // 365}y{days}d"
    return f"{hours // 24 // 365}y"


def _age(value: Any) -> str:
    if not isinstance(value, str) or not value:
        return "<unknown>"
    try:
        then = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return "<unknown>"
    if then.tzinfo is None:
        then = then.replace(tzinfo=dt.UTC)
    return human_duration((dt.datetime.now(dt.UTC) - then).total_seconds())


def _md(o: Obj) -> Obj:
    md = o.get("metadata")
    return md if isinstance(md, dict) else {}


def _get(o: Any, *path: str) -> Any:
    for p in path:
        if not isinstance(o, dict):
            return None
        o = o.get(p)
    return o


def _int(v: Any) -> int:
    return v if isinstance(v, int) and not isinstance(v, bool) else 0


def _name(o: Obj) -> Any:
    return _md(o).get("name", "")


def _age_cell(o: Obj) -> str:
    return _age(_md(o).get("creationTimestamp"))


def _pod_status(o: Obj) -> str:
    status = o.get("status") if isinstance(o.get("status"), dict) else {}
    assert isinstance(status, dict)
    reason = status.get("reason") or status.get("phase") or ""
    for cs in status.get("containerStatuses") or []:
        state = cs.get("state") or {} if isinstance(cs, dict) else {}
        waiting = state.get("waiting") or {}
        terminated = state.get("terminated") or {}
        if waiting.get("reason"):
            reason = waiting["reason"]
        elif terminated.get("reason"):
            reason = terminated["reason"]
    if _md(o).get("deletionTimestamp"):
        reason = "Terminating"
    return str(reason)


def _pod_ready(o: Obj) -> str:
    total = len(_get(o, "spec", "containers") or [])
    ready = sum(
        1 for cs in _get(o, "status", "containerStatuses") or [] if isinstance(cs, dict) and cs.get("ready")
    )
    return f"{ready}/{total}"


def _restarts(o: Obj) -> str:
    return str(
        sum(
            _int(cs.get("restartCount"))
            for cs in _get(o, "status", "containerStatuses") or []
            if isinstance(cs, dict)
        )
    )


def _containers(o: Obj, attr: str) -> str:
    return ",".join(
        str(c.get(attr, ""))
        for c in _get(o, "spec", "template", "spec", "containers") or []
        if isinstance(c, dict)
    )


def _selector(o: Obj) -> str:
    sel = _get(o, "spec", "selector")
    if isinstance(sel, dict) and isinstance(sel.get("matchLabels"), dict) and "matchExpressions" not in sel:
        return ",".join(f"{k}={v}" for k, v in sel["matchLabels"].items())
    if (
        isinstance(sel, dict)
        and sel
        and not isinstance(sel.get("matchLabels"), dict)
        and "matchExpressions" not in sel
    ):
        return ",".join(f"{k}={v}" for k, v in sel.items())
    return "<none>" if not sel else json.dumps(sel, separators=(",", ":"))


def _desired(o: Obj) -> int:
    r = _get(o, "spec", "replicas")
    return 1 if r is None else _int(r)


def _ports(o: Obj) -> str:
    out = []
    for p in _get(o, "spec", "ports") or []:
        if isinstance(p, dict):
            node = f":{p['nodePort']}" if p.get("nodePort") else ""
            out.append(f"{p.get('port')}{node}/{p.get('protocol', 'TCP')}")
    return ",".join(out) or "<none>"


def _event_object(o: Obj) -> str:
    ref = o.get("involvedObject") or o.get("regarding") or {}
    return f"{str(ref.get('kind', '')).lower()}/{ref.get('name', '')}" if isinstance(ref, dict) else ""


def _event_last_seen(o: Obj) -> str:
    for key in ("lastTimestamp", "eventTime", "deprecatedLastTimestamp"):
        if o.get(key):
            return _age(o.get(key))
    return _age(_md(o).get("creationTimestamp"))


def _col(name: str, typ: str, cell: Callable[[Obj], Any], *, fmt: str = "", priority: int = 0) -> Column:
    return (name, typ, fmt, priority, cell)


_NAME = _col("Name", "string", _name, fmt="name")
_AGE = _col("Age", "string", _age_cell)

_BUILTIN: dict[tuple[str, str], list[Column]] = {
    ("", "ConfigMap"): [
        _NAME,
        _col("Data", "string", lambda o: len(o.get("data") or {}) + len(o.get("binaryData") or {})),
        _AGE,
    ],
    ("", "Secret"): [
        _NAME,
        _col("Type", "string", lambda o: o.get("type", "Opaque")),
        _col("Data", "string", lambda o: str(len(o.get("data") or {}) + len(o.get("stringData") or {}))),
        _AGE,
    ],
    ("", "Namespace"): [
        _NAME,
        _col("Status", "string", lambda o: _get(o, "status", "phase") or "Active"),
        _AGE,
    ],
    ("", "ServiceAccount"): [
        _NAME,
        _col("Secrets", "string", lambda o: str(len(o.get("secrets") or []))),
        _AGE,
    ],
    ("", "Pod"): [
        _NAME,
        _col("Ready", "string", _pod_ready),
        _col("Status", "string", _pod_status),
        _col("Restarts", "string", _restarts),
        _AGE,
        _col("IP", "string", lambda o: _get(o, "status", "podIP") or "<none>", priority=1),
        _col("Node", "string", lambda o: _get(o, "spec", "nodeName") or "<none>", priority=1),
    ],
    ("", "Service"): [
        _NAME,
        _col("Type", "string", lambda o: _get(o, "spec", "type") or "ClusterIP"),
        _col("Cluster-IP", "string", lambda o: _get(o, "spec", "clusterIP") or "<none>"),
        _col("External-IP", "string", lambda o: ",".join(_get(o, "spec", "externalIPs") or []) or "<none>"),
        _col("Port(s)", "string", _ports),
        _AGE,
        _col("Selector", "string", _selector, priority=1),
    ],
    ("", "Node"): [
        _NAME,
        _col(
            "Status",
            "string",
            lambda o: next(
                (
                    "Ready" if c.get("status") == "True" else "NotReady"
                    for c in _get(o, "status", "conditions") or []
                    if isinstance(c, dict) and c.get("type") == "Ready"
                ),
                "Unknown",
            ),
        ),
        _col("Roles", "string", lambda o: "<none>"),
        _AGE,
        _col("Version", "string", lambda o: _get(o, "status", "nodeInfo", "kubeletVersion") or ""),
    ],
    ("", "Event"): [
        _col("Last Seen", "string", _event_last_seen),
        _col("Type", "string", lambda o: o.get("type", "")),
        _col("Reason", "string", lambda o: o.get("reason", "")),
        _col("Object", "string", _event_object),
        _col("Message", "string", lambda o: str(o.get("message") or o.get("note") or "").strip()),
    ],
    ("apps", "Deployment"): [
        _NAME,
        _col("Ready", "string", lambda o: f"{_int(_get(o, 'status', 'readyReplicas'))}/{_desired(o)}"),
        _col("Up-to-date", "integer", lambda o: _int(_get(o, "status", "updatedReplicas"))),
        _col("Available", "integer", lambda o: _int(_get(o, "status", "availableReplicas"))),
        _AGE,
        _col("Containers", "string", lambda o: _containers(o, "name"), priority=1),
        _col("Images", "string", lambda o: _containers(o, "image"), priority=1),
        _col("Selector", "string", _selector, priority=1),
    ],
    ("apps", "ReplicaSet"): [
        _NAME,
        _col("Desired", "integer", _desired),
        _col("Current", "integer", lambda o: _int(_get(o, "status", "replicas"))),
        _col("Ready", "integer", lambda o: _int(_get(o, "status", "readyReplicas"))),
        _AGE,
    ],
    ("apps", "StatefulSet"): [
        _NAME,
        _col("Ready", "string", lambda o: f"{_int(_get(o, 'status', 'readyReplicas'))}/{_desired(o)}"),
        _AGE,
    ],
    ("batch", "Job"): [
        _NAME,
        _col(
            "Completions",
            "string",
            lambda o: f"{_int(_get(o, 'status', 'succeeded'))}/{_get(o, 'spec', 'completions') or 1}",
        ),
        _AGE,
    ],
    ("coordination.k8s.io", "Lease"): [
        _NAME,
        _col("Holder", "string", lambda o: _get(o, "spec", "holderIdentity") or ""),
        _AGE,
    ],
    ("rbac.authorization.k8s.io", "RoleBinding"): [
        _NAME,
        _col("Role", "string", lambda o: f"{_get(o, 'roleRef', 'kind')}/{_get(o, 'roleRef', 'name')}"),
        _AGE,
    ],
    ("rbac.authorization.k8s.io", "ClusterRoleBinding"): [
        _NAME,
        _col("Role", "string", lambda o: f"{_get(o, 'roleRef', 'kind')}/{_get(o, 'roleRef', 'name')}"),
        _AGE,
    ],
}
_BUILTIN[("events.k8s.io", "Event")] = _BUILTIN[("", "Event")]
_DEFAULT: list[Column] = [_NAME, _col("Created At", "date", lambda o: _md(o).get("creationTimestamp"))]

_TOKEN = re.compile(
    r"""\.([A-Za-z0-9_\-$]+)|\[(\d+|\*)\]|\[['"]([^'"]+)['"]\]|\[\?\(@\.([A-Za-z0-9_.\-]+)\s*==\s*['"]?([^'")]*)['"]?\)\]"""
)


def jsonpath(obj: Any, expr: str) -> list[Any]:
    """Evaluate the JSONPath subset CRD printer columns use: ``.a.b``, ``['a.b']``, ``[0]``,
    ``[*]`` and ``[?(@.type=="Ready")]`` (an optional ``{...}`` wrapper is accepted).
    Returns every match, in document order; malformed expressions match nothing."""
    expr = expr.strip()
    if expr.startswith("{") and expr.endswith("}"):
        expr = expr[1:-1]
    if expr.startswith("$"):
        expr = expr[1:]
    current = [obj]
    pos = 0
    while pos < len(expr):
        m = _TOKEN.match(expr, pos)
        if m is None:
            return []
        pos = m.end()
        field, index, quoted, fkey, fval = m.groups()
        nxt: list[Any] = []
        for c in current:
            if field is not None or quoted is not None:
                key = field if field is not None else quoted
                if isinstance(c, dict) and key in c:
                    nxt.append(c[key])
            elif index is not None and isinstance(c, list):
                if index == "*":
                    nxt.extend(c)
                elif int(index) < len(c):
                    nxt.append(c[int(index)])
            elif fkey is not None and isinstance(c, list):
                for item in c:
                    v: Any = item
                    for part in fkey.split("."):
                        v = v.get(part) if isinstance(v, dict) else None
                    shown = ("true" if v else "false") if isinstance(v, bool) else str(v)
                    if v is not None and shown == fval:
                        nxt.append(item)
        current = nxt
    return current


def _printer_cell(col: dict[str, Any]) -> Callable[[Obj], Any]:
    path = str(col.get("jsonPath", ""))
    typ = col.get("type", "string")

    def cell(o: Obj) -> Any:
        values = jsonpath(o, path)
        if not values:
            return None
        v = values[0]
        if typ == "date":
            return _age(v)
        if typ == "integer":
            return v if isinstance(v, int) else None
        if typ == "number":
            return v if isinstance(v, int | float) else None
        if typ == "boolean":
            return v if isinstance(v, bool) else None
        parts = [x if isinstance(x, str) else json.dumps(x, separators=(",", ":")) for x in values]
        return ",".join(parts)

    return cell


def _columns(info: ResourceInfo) -> list[Column]:
    if info.crd is not None:
        declared = info.printer_columns or [
            {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}
        ]
        out = [_NAME]
        for c in declared:
            typ = c.get("type", "string")
            out.append(
                _col(
                    str(c.get("name", "")),
                    str(typ),
                    _printer_cell(c),
                    fmt=str(c.get("format", "")),
                    priority=int(c.get("priority", 0) or 0),
                )
            )
        return out
    return _BUILTIN.get((info.group, info.kind), _DEFAULT)


# Where kube-apiserver's printers take a column's description from: (model, field) of the
# OpenAPI schema, or the text itself.
_DOCS: dict[tuple[str, str], tuple[str, str] | str] = {
    ("", "Name"): ("V1ObjectMeta", "name"),
    ("", "Age"): ("V1ObjectMeta", "creationTimestamp"),
    ("", "Created At"): ("V1ObjectMeta", "creationTimestamp"),
    ("ConfigMap", "Data"): ("V1ConfigMap", "data"),
    ("Secret", "Type"): ("V1Secret", "type"),
    ("Secret", "Data"): ("V1Secret", "data"),
    ("Pod", "Ready"): "The aggregate readiness state of this pod for accepting traffic.",
    ("Pod", "Status"): "The aggregate status of the containers in this pod.",
    (
        "Pod",
        "Restarts",
    ): "The number of times the containers in this pod have been restarted and when the last "
    "container in this pod has restarted.",
    ("Pod", "IP"): ("V1PodStatus", "podIP"),
    ("Pod", "Node"): ("V1PodSpec", "nodeName"),
    ("Service", "Type"): ("V1ServiceSpec", "type"),
    ("Service", "Cluster-IP"): ("V1ServiceSpec", "clusterIP"),
    ("Service", "External-IP"): ("V1ServiceSpec", "externalIPs"),
    ("Service", "Port(s)"): ("V1ServiceSpec", "ports"),
    ("Service", "Selector"): ("V1ServiceSpec", "selector"),
}


def _doc(kind: str, name: str) -> str | None:
    where = _DOCS.get((kind, name)) or _DOCS.get(("", name))
    if where is None or isinstance(where, str):
        return where
    schema = builtin.model_schema(where[0]) or {}
    text = str(((schema.get("properties") or {}).get(where[1]) or {}).get("description", ""))
    return text.replace("  ", "\n\n") or None  # the client's models join paragraphs with two spaces


def _definitions(info: ResourceInfo, cols: list[Column]) -> list[dict[str, Any]]:
    described: dict[str, str] = {}
    for c in info.printer_columns if info.crd else ():
        path = c.get("jsonPath", "")
        described[str(c.get("name"))] = str(
            c.get("description") or f"Custom resource definition column (in JSONPath format): {path}"
        )
    return [
        {
            "name": name,
            "type": typ,
            "format": fmt,
            "description": described.get(name) or _doc(info.kind, name) or f"{name} of the {info.kind}",
            "priority": priority,
        }
        for name, typ, fmt, priority, _ in cols
    ]


def _row(obj: Obj, cols: list[Column], include_object: str) -> dict[str, Any]:
    row: dict[str, Any] = {"cells": [cell(obj) for *_, cell in cols]}
    if include_object == "Object":
        row["object"] = obj
    elif include_object != "None":
        row["object"] = {
            "kind": "PartialObjectMetadata",
            "apiVersion": "meta.k8s.io/v1",
            "metadata": _md(obj),
        }
    return row


def to_table(
    info: ResourceInfo,
    objects: list[Obj],
    *,
    include_object: str,
    resource_version: str,
    continue_token: str | None,
) -> dict[str, Any]:
    """Render ``objects`` as a Table; ``include_object`` is ``None``, ``Metadata`` (the default for
    anything else) or ``Object``. The objects are not modified."""
    cols = _columns(info)
    meta: dict[str, Any] = {"resourceVersion": resource_version}
    if continue_token:
        meta["continue"] = continue_token
    return {
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": meta,
        "columnDefinitions": _definitions(info, cols),
        "rows": [_row(o, cols, include_object) for o in objects],
    }


def table_event_object(info: ResourceInfo, obj: Obj, *, include_object: str, first: bool) -> dict[str, Any]:
    """The Table a watch event carries for ``obj``: one row, column definitions only when ``first``
    (later events carry ``columnDefinitions: null``, as upstream sends them)."""
    cols = _columns(info)
    return {
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": {"resourceVersion": _md(obj).get("resourceVersion", "")},
        "columnDefinitions": _definitions(info, cols) if first else None,
        "rows": [_row(obj, cols, include_object)],
    }
