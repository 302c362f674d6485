"""An app for `mcr run`: ConfigMaps labelled example.io/echo=true get an echo naming their cluster.

Run it on a local fleet with `mcr run examples/run_echo.py --dev`; docs/run.md has the flags.
"""

import contextlib

import mcr

LABEL = "example.io/echo"


def setup(mgr: mcr.Manager) -> None:
    """Called by `mcr run` with the manager it built from the flags."""

    async def reconcile(req: mcr.Request) -> None:
        cluster = await mgr.get_cluster(req.cluster_name)
        try:
            cm = await cluster.client.get("v1/ConfigMap", req.name, namespace=req.namespace)
        except mcr.NotFoundError:
            return  # deleted meanwhile
        if (mcr.predicate.meta(cm).get("labels") or {}).get(LABEL) != "true":
            return
        echo = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": f"{req.name}-echo", "namespace": req.namespace},
            "data": {"cluster": req.cluster_name},
        }
        # An earlier reconcile may have written it: the echo of an object never changes.
        with contextlib.suppress(mcr.AlreadyExistsError):
            await cluster.client.create(echo)

    mcr.controller_managed_by(mgr).named("echo").for_("v1/ConfigMap").complete(reconcile)
