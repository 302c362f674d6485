"""Every namespace holds ``kube-root-ca.crt`` with the server's CA, as kube-controller-manager's
root-CA publisher keeps it (both lanes)."""

from __future__ import annotations

import uuid

from mcr.testing import eventually
from mcr_envtest import ServerThread

from .conftest import Raw

DESCRIPTION = (
    "Contains a CA bundle that can be used to verify the kube-apiserver when using internal endpoints such "
    "as the internal service IP or kubernetes.default.svc. No other usage is guaranteed across distributions "
    "of Kubernetes clusters."
)


async def test_each_namespace_gets_the_root_ca_back_after_a_delete(apiserver: ServerThread, raw: Raw) -> None:
    ns = f"rc-{uuid.uuid4().hex[:8]}"
    status, body = await raw.json("POST", "/api/v1/namespaces", json={"metadata": {"name": ns}})
    assert status == 201, body
    path = f"/api/v1/namespaces/{ns}/configmaps/kube-root-ca.crt"
    ca = apiserver.ca_pem.decode()

    async def published() -> dict[str, object]:
        status, cm = await raw.json("GET", path)
        assert status == 200, cm
        return dict(cm)

    cm = await eventually(published, timeout=30, message="kube-root-ca.crt not published")
    assert cm["data"] == {"ca.crt": ca}
    meta = cm["metadata"]
    assert isinstance(meta, dict)
    assert meta["annotations"] == {"kubernetes.io/description": DESCRIPTION}
    assert [(e["manager"], e["operation"]) for e in meta["managedFields"]] == [
        ("kube-controller-manager", "Update")
    ]
    assert await raw.status("DELETE", path) == 200

    async def recreated() -> bool:
        status, again = await raw.json("GET", path)
        return status == 200 and again["metadata"]["uid"] != meta["uid"]

    await eventually(recreated, timeout=30, message="kube-root-ca.crt not recreated")
    # a change to its data is put back
    status, body = await raw.json(
        "PATCH",
        path,
        json={"data": {"ca.crt": "x"}},
        headers={"Content-Type": "application/merge-patch+json"},
    )
    assert status == 200, body

    async def restored() -> bool:
        status, again = await raw.json("GET", path)
        return status == 200 and again["data"] == {"ca.crt": ca}

    await eventually(restored, timeout=30, message="kube-root-ca.crt data not restored")
    await raw.status("DELETE", f"/api/v1/namespaces/{ns}")
