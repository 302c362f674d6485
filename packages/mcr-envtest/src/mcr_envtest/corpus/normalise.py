"""What may legitimately differ between two API servers' answers, replaced by placeholders.

One :class:`Normaliser` serves one sequence on one server, so placeholders that count (``<uid-1>``,
``<gen-1>``) are numbered in the order the sequence meets the values, and the same object gets
the same placeholder on both servers when both behave alike. Replaced:

* UIDs (any RFC 4122 string, also inside longer strings such as a label value or a message):
  an object's own UID becomes ``<uid:NAME>`` (``<uid:NAME#2>`` for a later object of the same
  name), any other ``<uid-N>``, numbered by first appearance.
* ``resourceVersion`` values (any key of that name with a non-empty string) and
  ``metadata.continue`` tokens: ``<rv>``, ``<continue>``; the resource versions that error
  messages quote (``too old resource version: 5 (9)``): ``<rv>``.
* RFC 3339 timestamps (creation, deletion, managedFields times, events, leases): ``<time>``.
* Names generated from ``metadata.generateName``: ``<prefix><gen-N>``, wherever the name appears.
* Allocated addresses and ports (a Service's ``clusterIP``/``clusterIPs``, ``nodePort``,
  ``healthCheckNodePort``): ``<ip>``, ``<port>``.
* Issued tokens (a TokenRequest's ``status.token``, any JWT): ``<token>``.
* The order of ``managedFields`` entries: sorted by operation, manager, subresource and API
  version. kube-apiserver orders entries of one operation by the second they were written in, then
  by manager; with the times replaced, two servers that wrote the same entries a second apart
  in a different order answer alike.

Everything else (names, labels, specs, status, managers, messages, codes, key presence) is kept;
key order is irrelevant because comparisons are structural.
"""

from __future__ import annotations

import ipaddress
import re
from typing import Any

__all__ = ["Normaliser"]

UID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
TIME = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)$")
JWT = re.compile(r"^eyJ[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$")
RV_MESSAGES = (
    (re.compile(r"too old resource version: \d+ \(\d+\)"), "too old resource version: <rv> (<rv>)"),
    (re.compile(r"(resourceVersion|ResourceVersion)(:? ?\"?)\d+"), r"\1\2<rv>"),
)
PORT_KEYS = frozenset({"nodePort", "healthCheckNodePort"})


def _entry_order(entry: dict[str, Any]) -> tuple[str, str, str, str]:
    def field(name: str) -> str:
        return str(entry.get(name, ""))

    return field("operation"), field("manager"), field("subresource"), field("apiVersion")


def _is_ip(value: str) -> bool:
    try:
        ipaddress.ip_address(value)
    except ValueError:
        return False
    return True


class Normaliser:
    """Normalises the bodies of one sequence on one server (stateful: see the module doc)."""

    def __init__(self) -> None:
        self.uids: dict[str, str] = {}
        self.generated: dict[str, str] = {}

    def __call__(self, body: Any) -> Any:
        """A normalised copy of ``body`` (a decoded JSON document, a list of watch events, or
        text)."""
        self._collect(body)
        return self._walk(body, "")

    # First pass: learn the UIDs and generated names, in a key order independent of the server's.
    def _collect(self, doc: Any) -> None:
        if isinstance(doc, dict):
            meta = doc.get("metadata")
            if isinstance(meta, dict):
                self._learn_object(meta)
            for key in sorted(doc):
                self._collect(doc[key])
        elif isinstance(doc, list):
            for item in doc:
                self._collect(item)
        elif isinstance(doc, str):
            for uid in UID.findall(doc):
                if uid not in self.uids:
                    self.uids[uid] = f"<uid-{len(self.uids) + 1}>"

    def _learn_object(self, meta: dict[str, Any]) -> None:
        prefix, name, uid = meta.get("generateName"), meta.get("name"), meta.get("uid")
        if not isinstance(name, str):
            return
        fresh = name != prefix and name not in self.generated
        if fresh and isinstance(prefix, str) and prefix and name.startswith(prefix):
            self.generated[name] = f"{prefix}<gen-{len(self.generated) + 1}>"
        if isinstance(uid, str) and UID.fullmatch(uid) and uid not in self.uids:
            # Named after the object, so an object one server made and the other refused does
            # not shift the placeholders of every later object.
            label = self.generated.get(name, name)
            placeholder, n = f"<uid:{label}>", 1
            while placeholder in self.uids.values():
                n += 1
                placeholder = f"<uid:{label}#{n}>"
            self.uids[uid] = placeholder

    def _string(self, value: str) -> str:
        if TIME.match(value):
            return "<time>"
        if JWT.match(value):
            return "<token>"
        if value in self.generated:
            return self.generated[value]
        value = UID.sub(lambda m: self.uids.get(m.group(0), m.group(0)), value)
        for name, placeholder in self.generated.items():
            if name in value:
                value = value.replace(name, placeholder)
        for pattern, repl in RV_MESSAGES:
            value = pattern.sub(repl, value)
        return value

    def _walk(self, doc: Any, key: str) -> Any:
        if isinstance(doc, dict):
            out: dict[str, Any] = {}
            for k, v in doc.items():
                if k == "resourceVersion" and isinstance(v, str) and v:
                    out[k] = "<rv>"
                elif k == "continue" and isinstance(v, str) and v:
                    out[k] = "<continue>"
                elif k in PORT_KEYS and isinstance(v, int):
                    out[k] = "<port>"
                else:
                    # keys hold UIDs too: managedFields' k:{"uid":...} for ownerReferences
                    out[self._string(k) if "-" in k else k] = self._walk(v, k)
            return out
        if isinstance(doc, list):
            items = [self._walk(v, key) for v in doc]
            if key == "managedFields" and all(isinstance(v, dict) for v in items):
                items.sort(key=_entry_order)
            return items
        if isinstance(doc, str):
            if key in ("clusterIP", "clusterIPs") and _is_ip(doc):
                return "<ip>"
            return self._string(doc)
        return doc
