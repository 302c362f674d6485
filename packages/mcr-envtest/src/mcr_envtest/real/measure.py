"""``python -m mcr_envtest.real.measure``: what a pooled real control plane costs.

Prints, for this machine: seconds from kube-apiserver's start to ``/readyz`` and to the first
server being handed out, CPU seconds and RSS of each process, their idle CPU over ``--idle``
seconds, the time to hand out a warm control plane, and the reset time after a server that
created a namespace, ConfigMaps, a CRD with an object, RBAC objects, and changed and deleted
built-in objects (``--rounds`` times). Needs the binaries (``KUBEBUILDER_ASSETS`` or
``tools/kube/build.sh``'s cache).
"""

from __future__ import annotations

import argparse
import http.client
import json
import ssl
import sys
import time
from collections.abc import Sequence
from typing import Any

from mcr_envtest import certs
from mcr_envtest.auth import UserInfo

from .controlplane import ControlPlane, Spec
from .pool import Pool, default_pool

#: A namespaced CRD whose objects keep any field: part of what a reset must remove (the pool's
#: tests create it too).
CRD: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "gadgets.measure.example.com"},
    "spec": {
        "group": "measure.example.com",
        "scope": "Namespaced",
        "names": {"plural": "gadgets", "singular": "gadget", "kind": "Gadget"},
        "versions": [
            {
                "name": "v1",
                "served": True,
                "storage": True,
                "schema": {
                    "openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
                },
            }
        ],
    },
}


_MASTER = UserInfo("measure", ("system:masters", "system:authenticated"))


def _call(cp: ControlPlane, token: str, method: str, path: str, body: Any = None) -> int:
    ctx = ssl.create_default_context(cadata=certs.process_ca().cert_pem.decode())
    conn = http.client.HTTPSConnection("127.0.0.1", cp.port, context=ctx, timeout=30)
    try:
        headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
        if method == "PATCH":
            headers["Content-Type"] = "application/merge-patch+json"
        conn.request(method, path, json.dumps(body) if body is not None else None, headers)
        resp = conn.getresponse()
        resp.read()
        return resp.status
    finally:
        conn.close()


def _dirty(cp: ControlPlane, token: str) -> None:
    calls: list[tuple[str, str, Any]] = [
        ("POST", "/api/v1/namespaces", {"metadata": {"name": "measured"}}),
        ("POST", "/api/v1/namespaces/measured/configmaps", {"metadata": {"name": "a"}}),
        ("POST", "/api/v1/namespaces/default/configmaps", {"metadata": {"name": "b"}}),
        ("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", CRD),
        ("POST", "/apis/rbac.authorization.k8s.io/v1/clusterroles", {"metadata": {"name": "m"}, "rules": []}),
        ("PATCH", "/api/v1/namespaces/default", {"metadata": {"labels": {"measured": "yes"}}}),
        ("DELETE", "/apis/rbac.authorization.k8s.io/v1/clusterroles/view", None),
    ]
    for method, path, body in calls:
        _call(cp, token, method, path, body)
    spec = CRD["spec"]
    gadget = {"apiVersion": f"{spec['group']}/v1", "kind": spec["names"]["kind"], "metadata": {"name": "g"}}
    path = f"/apis/{spec['group']}/v1/namespaces/default/{spec['names']['plural']}"
    deadline = time.monotonic() + 30
    while _call(cp, token, "POST", path, gadget) != 201 and time.monotonic() < deadline:
        time.sleep(0.05)


def _usage(cp: ControlPlane) -> dict[str, tuple[float, int]]:
    return {c.name: (c.cpu_seconds(), c.rss_bytes()) for c in cp.children()}


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m mcr_envtest.real.measure", description=__doc__)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--idle", type=float, default=30.0, help="seconds to measure idle CPU over")
    args = p.parse_args(argv)
    pool: Pool = default_pool()
    began = time.monotonic()
    cp = pool.acquire(Spec())
    first = time.monotonic() - began
    out: dict[str, Any] = {"readyz_seconds": round(cp.ready_seconds, 2)}
    out["first_server_seconds"] = round(first, 2)
    for name, (cpu, rss) in _usage(cp).items():
        out[f"{name}_ready_cpu_seconds"] = round(cpu, 2)
        out[f"{name}_rss_mb"] = round(rss / 1e6)
    if pool.etcd is not None and pool.etcd.child is not None:
        out["etcd_rss_mb"] = round(pool.etcd.child.rss_bytes() / 1e6)
    before = _usage(cp)
    time.sleep(args.idle)
    for name, (cpu, _) in _usage(cp).items():
        out[f"{name}_idle_cpu_percent"] = round(100 * (cpu - before[name][0]) / args.idle, 1)
    token = "measure-token"
    cp.bind(lambda t: None if t != token else _MASTER)
    handouts, resets = [], []
    for _ in range(args.rounds):
        _dirty(cp, token)
        pool.release(cp)
        pool.wait_idle(60)
        resets.append(cp.reset_seconds)
        began = time.monotonic()
        again = pool.acquire(Spec())
        handouts.append(time.monotonic() - began)
        assert again is cp
        cp.bind(lambda t: None if t != token else _MASTER)
    out["handout_ms"] = [round(1000 * s, 1) for s in handouts]
    out["reset_ms"] = [round(1000 * s) for s in resets]
    pool.release(cp)
    pool.wait_idle(60)
    out["reset_ms_nothing_written"] = round(1000 * cp.reset_seconds, 1)
    json.dump(out, sys.stdout, indent=1)
    print()
    pool.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
