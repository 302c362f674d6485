"""The ``kube-root-ca.crt`` ConfigMap kube-controller-manager's root-CA publisher keeps in every
namespace: the server's CA bundle under ``ca.crt`` with upstream's description annotation,
written by the manager ``kube-controller-manager``. :func:`publish` creates it when missing and
restores its data and annotation when changed; a terminating namespace is left alone.
"""

from __future__ import annotations

import contextlib
from typing import Any

from . import errors
from .writer import Writer

__all__ = ["NAME", "publish"]

NAME = "kube-root-ca.crt"
MANAGER = "kube-controller-manager"
DESCRIPTION_KEY = "kubernetes.io/description"
DESCRIPTION = (
    "Contains a CA bundle that can be used to verify the kube-apiserver when using internal "
    "endpoints such as the internal service IP or kubernetes.default.svc. No other usage is "
    "guaranteed across distributions of Kubernetes clusters."
)


def publish(writer: Writer, namespace: str, ca_pem: str) -> None:
    """Create or repair ``kube-root-ca.crt`` in ``namespace`` (a no-op when it is current)."""
    ns = writer.store.get("", "namespaces", "", namespace)
    info = writer.registry.lookup("", "v1", "configmaps")
    if ns is None or ns["metadata"].get("deletionTimestamp") or info is None:
        return
    data = {"ca.crt": ca_pem}
    current = writer.store.get("", "configmaps", namespace, NAME)
    with contextlib.suppress(errors.StatusError):  # raced by a client: the next event requeues
        if current is None:
            body: dict[str, Any] = {
                "metadata": {"name": NAME, "annotations": {DESCRIPTION_KEY: DESCRIPTION}},
                "data": data,
            }
            writer.create(info, body, namespace, manager=MANAGER)
            return
        annotations = current["metadata"].get("annotations") or {}
        if current.get("data") == data and DESCRIPTION_KEY in annotations:
            return
        new = {k: v for k, v in current.items() if k not in ("data", "binaryData")}
        new["metadata"] = {
            **current["metadata"],
            "annotations": {**annotations, DESCRIPTION_KEY: DESCRIPTION},
        }
        new["data"] = data
        writer.update(info, new, namespace, NAME, manager=MANAGER)
