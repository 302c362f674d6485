"""An app to deploy: each ConfigMap labelled example.io/seal=true gets a Secret with its data.

The Secret ``<name>-sealed`` is owned by the ConfigMap (it goes when the ConfigMap goes), and the
ConfigMap is annotated with the Secret's name. docs/deployment.md builds an image of this file
and deploys it with the manifests `mcr manifests examples/deploy/app.py` prints.
"""

import base64

import mcr
from mcr import rbac
from mcr.controllerutil import set_controller_reference

LABEL = "example.io/seal"
ANNOTATION = "example.io/sealed-secret"


def setup(mgr: mcr.Manager) -> None:
    """Called by `mcr run` (and by `mcr manifests`, which reads the rules from it)."""

    async def reconcile(req: mcr.Request) -> None:
        cluster = await mgr.get_cluster(req.cluster_name)
        try:
            cm = await cluster.client.get("v1/ConfigMap", req.name, namespace=req.namespace)
        except mcr.NotFoundError:
            return  # deleted: the garbage collector removes its Secret
        meta = mcr.predicate.meta(cm)
        if (meta.get("labels") or {}).get(LABEL) != "true":
            return
        data = {k: base64.b64encode(v.encode()).decode() for k, v in (cm.get("data") or {}).items()}
        secret = {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": f"{req.name}-sealed", "namespace": req.namespace},
            "data": data,
        }
        set_controller_reference(cm, secret, block_owner_deletion=False)
        try:
            current = await cluster.client.get(
                "v1/Secret", secret["metadata"]["name"], namespace=req.namespace
            )
        except mcr.NotFoundError:
            await cluster.client.create(secret)
        else:
            if current.get("data") != data:
                current["data"] = data
                await cluster.client.update(current)
        if (meta.get("annotations") or {}).get(ANNOTATION) != secret["metadata"]["name"]:
            patch = {"metadata": {"annotations": {ANNOTATION: secret["metadata"]["name"]}}}
            await cluster.client.patch("v1/ConfigMap", req.name, patch, namespace=req.namespace)

    ctrl = (
        mcr.controller_managed_by(mgr)
        .named("seal")
        .for_("v1/ConfigMap")
        .owns("v1/Secret")
        .complete(reconcile)
    )
    # Watches show reads (ConfigMaps) and owned writes (Secrets); the annotation is a write of
    # its own: declare it (granted in the clusters the controller watches).
    rbac.declare(ctrl, rbac.rule("v1/ConfigMap", "patch"))
