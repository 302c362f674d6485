"""Server-side apply and ``metadata.managedFields`` bookkeeping (F14).

Each manager entry (manager, operation, subresource) owns a set of field paths
(:mod:`._fieldpath`). An apply by manager M:

* conflicts on every field M's configuration sets to a value different from the live one when
  another manager owns that field; without ``force`` that is an :class:`ApplyConflict` (409),
  with ``force`` M takes the field over;
* merges the configuration into the live object (maps by key, keyed lists by item, sets by
  union, everything else replaced);
* removes the fields M applied before but no longer applies, unless another manager owns them;
* makes M's ``Apply`` entry exactly the set its configuration names.

Any other write (:func:`record_update`) gives its manager's ``Update`` entry the fields it changed
and takes them from everyone else; fields that disappeared leave every set.
"""

from __future__ import annotations

import contextvars
import copy
from typing import TYPE_CHECKING, Any

from . import _fieldcompare as fc
from . import _fieldpath as fp
from .schema import builtin, fieldtypes
from .schema.structural import crd_version_schema

if TYPE_CHECKING:
    from .resources import ResourceInfo

__all__ = ["ApplyConflict", "apply_patch", "managed_sets", "record_update"]

EntryKey = tuple[str, str, str]  # (manager, operation, subresource or "")


class ApplyConflict(Exception):
    """An apply would change fields other managers own and ``force`` was not set.

    ``causes`` are Status causes (``type``/``reason`` ``FieldManagerConflict``, ``message``
    ``conflict with "mgr" using v1`` for an Update manager, ``field`` ``.spec.x``); ``message`` is
    the Status message.
    """

    def __init__(self, conflicts: list[tuple[str, str]]) -> None:
        """``conflicts``: (manager description, field path) pairs, in a stable order."""
        self.causes: list[dict[str, Any]] = [
            {"type": "FieldManagerConflict", "reason": "FieldManagerConflict", "message": who, "field": field}
            for who, field in conflicts
        ]
        n = len(conflicts)
        if n == 1:
            detail = f"{conflicts[0][0]}: {conflicts[0][1]}"
        else:
            by_manager: dict[str, list[str]] = {}
            for who, field in conflicts:
                by_manager.setdefault(who, []).append(field)
            lines: list[str] = []
            for who, fields in by_manager.items():
                lines.append(who.replace("conflict with", "conflicts with", 1) + ":")
                lines.extend(f"- {f}" for f in fields)
            detail = "\n".join(lines)
        self.message = f"Apply failed with {n} conflict{'' if n == 1 else 's'}: {detail}"
        super().__init__(self.message)


def _schema_for(info: ResourceInfo) -> dict[str, Any] | None:
    if info.crd is not None:
        return crd_version_schema(info.crd, info.version)
    typed = fieldtypes.kind_schema(info.api_version, info.kind)
    if typed is not None:
        return typed
    if info.model is not None and builtin.model_class(info.model) is not None:
        return builtin.model_schema(info.model)
    return None


def managed_sets(obj: dict[str, Any] | None) -> dict[EntryKey, tuple[dict[str, Any], fp.FieldSet]]:
    """The managedFields of ``obj`` as {(manager, operation, subresource): (entry, paths)}."""
    out: dict[EntryKey, tuple[dict[str, Any], fp.FieldSet]] = {}
    if not obj:
        return out
    for entry in (obj.get("metadata") or {}).get("managedFields") or []:
        if not isinstance(entry, dict) or not entry.get("manager"):
            continue
        key = (
            str(entry["manager"]),
            str(entry.get("operation", "Update")),
            str(entry.get("subresource") or ""),
        )
        paths = fp.decode(entry.get("fieldsV1") or {})
        if key in out:
            paths |= out[key][1]
        out[key] = (entry, paths)
    return out


def _entry(
    info: ResourceInfo, key: EntryKey, paths: fp.FieldSet, now: str, api_version: str
) -> dict[str, Any]:
    manager, operation, subresource = key
    entry: dict[str, Any] = {
        "manager": manager,
        "operation": operation,
        "apiVersion": api_version or info.api_version,
        "time": now,
        "fieldsType": "FieldsV1",
        "fieldsV1": fp.encode(paths),
    }
    if subresource:
        entry["subresource"] = subresource
    if subresource == "scale":
        del entry["time"]  # kube-apiserver's /scale rebuilds its entry without a time
    return entry


# The apiVersion of the request being served: entries written now record it (a custom resource
# written through a version other than its storage version names that version, as upstream's).
REQUEST_VERSION: contextvars.ContextVar[str | None] = contextvars.ContextVar("request_version", default=None)


def _store(
    info: ResourceInfo,
    obj: dict[str, Any],
    sets: dict[EntryKey, tuple[dict[str, Any], fp.FieldSet]],
    touched: dict[EntryKey, str],
    *,
    prune: bool,
) -> None:
    """Write ``sets`` back as managedFields; entries in ``touched`` get a fresh time/apiVersion.

    With ``prune``, entries not written now lose the paths ``obj`` no longer holds. Only
    ``obj["metadata"]`` is modified (its ``managedFields`` key)."""
    entries: list[dict[str, Any]] = []
    for key, (entry, paths) in sets.items():
        kept = paths
        if prune and key not in touched:
            kept = {p for p in paths if fp.get(obj, p) is not fp.MISSING}
        if not kept:
            continue
        if key in touched:
            entries.append(_entry(info, key, kept, touched[key], REQUEST_VERSION.get() or info.api_version))
        elif kept != fp.decode(entry.get("fieldsV1") or {}):
            entries.append({**entry, "fieldsV1": fp.encode(kept)})
        else:
            entries.append(entry)
    entries.sort(key=lambda e: e.get("operation") != "Apply")
    md = obj.setdefault("metadata", {})
    if entries:
        md["managedFields"] = entries
    else:
        md.pop("managedFields", None)


def _who(key: EntryKey, entry: dict[str, Any], info: ResourceInfo) -> str:
    # kube-apiserver names the API version of Update managers only
    manager, op, subresource = key
    sub = f' with subresource "{subresource}"' if subresource else ""
    if op == "Apply":
        return f'conflict with "{manager}"{sub}'
    return f'conflict with "{manager}"{sub} using {entry.get("apiVersion") or info.api_version}'


def apply_patch(
    info: ResourceInfo,
    current: dict[str, Any] | None,
    applied: dict[str, Any],
    *,
    manager: str,
    force: bool,
    now: str,
    subresource: str | None = None,
) -> dict[str, Any]:
    """Return the object after ``manager`` applies the configuration ``applied`` to ``current``.

    ``current`` None means the object does not exist yet (apply creates it). With a status
    subresource, an apply to the main resource owns no ``status`` fields and an apply with
    ``subresource="status"`` owns only those (its entry carries ``subresource: status``), as
    upstream tracks them separately. Neither input is modified. Raises :class:`ApplyConflict`
    when fields owned by other managers would change and ``force`` is false; raises ValueError
    when ``applied`` is not an object.
    """
    if not isinstance(applied, dict):
        raise ValueError("an apply configuration must be a JSON or YAML object")
    schema = _schema_for(info)
    config = copy.deepcopy(applied)
    (config.get("metadata") or {}).pop("managedFields", None)
    new_set = fp.field_set(config, schema)
    if subresource == "status":
        new_set = {p for p in new_set if p[:1] == ("f:status",)}
    elif info.status_subresource:
        new_set = {p for p in new_set if p[:1] != ("f:status",)}
    me: EntryKey = (manager, "Apply", subresource or "")
    sets = managed_sets(current)
    base = current if current is not None else {}

    conflicts: list[tuple[str, str]] = []
    taken: dict[EntryKey, fp.FieldSet] = {}
    for key, (entry, paths) in sets.items():
        if key == me:
            continue
        for path in sorted(paths & new_set):
            live = fp.get(base, path)
            want = fp.get(config, path)
            if path[-1].startswith(("k:", "v:")) or live == want:
                continue
            conflicts.append((_who(key, entry, info), fp.describe(path)))
            taken.setdefault(key, set()).add(path)
    if conflicts and not force:
        raise ApplyConflict(conflicts)

    result: dict[str, Any] = fp.merge(base, config, schema)
    previous = sets.get(me, ({}, set()))[1]
    others: fp.FieldSet = set()
    for key, (_, paths) in sets.items():
        if key != me:
            others |= paths - taken.get(key, set())
    removed = sorted(previous - new_set, key=len)
    owned = others | new_set
    done: list[fp.Path] = []
    for path in removed:
        if any(path[: len(d)] == d for d in done):
            continue
        # a map or item stays while anything inside it is still owned, the new configuration's included
        if any(o[: len(path)] == path for o in owned):
            continue
        fp.remove(result, path)
        done.append(path)

    for key, paths in taken.items():
        entry, old_paths = sets[key]
        sets[key] = (entry, old_paths - paths)
    sets[me] = ({}, new_set)
    _store(info, result, sets, {me: now}, prune=True)
    return result


def _owned_by_writer(path: fp.Path, info: ResourceInfo, subresource: str | None) -> bool:
    # What the strategy resets is owned by nobody: with a status subresource, status through the
    # main resource and spec through /status. ``metadata`` itself is the server's.
    if path == ("f:metadata",) or fp.is_ignored(path):
        return False
    if not info.status_subresource:
        return True
    return path[:1] != (("f:spec",) if subresource == "status" else ("f:status",))


def record_update(
    info: ResourceInfo,
    old: dict[str, Any] | None,
    new: dict[str, Any],
    *,
    manager: str,
    operation: str,
    subresource: str | None,
    now: str,
    basis: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Return ``new`` with managedFields updated for a non-apply write by ``manager``.

    ``old`` is the live object (None on create: a Go zero object of the kind, or an empty custom
    resource). The fields the write added or changed (:func:`mcr_envtest._fieldcompare.compare`)
    join ``manager``'s ``Update`` entry and leave every other entry; fields it removed leave
    every entry. ``basis``, when given, is what is compared in place of ``new``: the object
    before the server's own later changes (allocations, admission, a custom resource's pruning
    and defaulting), which no manager owns. A ``managedFields`` in ``new`` that differs from the
    live one replaces it (``[{}]`` clears all tracking, and this write is then not recorded); an
    absent one keeps the live entries. ``new`` is not modified.
    """
    # Only metadata.managedFields is rewritten: copy the two dicts on that path, share the rest.
    out = dict(new)
    md = out["metadata"] = dict(out.get("metadata") or {})
    sent = md.get("managedFields")
    if isinstance(sent, list) and sent and all(isinstance(e, dict) and not e for e in sent):
        md.pop("managedFields", None)
        return out
    old_md = (old or {}).get("metadata") or {}
    source = out if isinstance(sent, list) and sent != old_md.get("managedFields") else old
    sets = managed_sets(source)
    schema = _schema_for(info)
    diff = fc.compare(
        fc.materialise(old if old is not None else {}, schema),
        fc.materialise(new if basis is None else basis, schema),
        schema,
    )
    changed = {p for p in diff.added | diff.modified if _owned_by_writer(p, info, subresource)}
    me: EntryKey = (manager, operation or "Update", subresource or "")
    touched: dict[EntryKey, str] = {}
    lost = changed | diff.removed  # by every other manager
    for key, (entry, paths) in list(sets.items()):
        if key != me and paths & lost:
            sets[key] = (entry, paths - lost)
    if changed or me in sets:
        entry, before = sets.get(me, ({}, set()))
        mine = (before - diff.removed) | changed
        sets[me] = (entry, mine)
        if changed or mine != before:
            touched[me] = now
    _store(info, out, sets, touched, prune=False)
    return out
