"""Real mode: :class:`~mcr_envtest.Server` backed by a real kube-apiserver.

A server is in real mode when it is made with ``real=True``, or with ``real=None`` (the default)
while ``KUBEBUILDER_ASSETS`` is set; the pytest fixtures and ``mcr-envtest serve|fleet up --real``
use it. The binaries come from ``KUBEBUILDER_ASSETS`` or ``tools/kube/build.sh``'s cache
(:mod:`.binaries`).

Design, for running hundreds of tests that each want a fresh server:

* one etcd per process (:mod:`.etcd`), shared by every control plane, each under its own
  ``--etcd-prefix``;
* control planes (:mod:`.controlplane`: kube-apiserver plus kube-controller-manager running the
  namespace, garbage-collector, ServiceAccount, ServiceAccount-token, root-CA publisher,
  ClusterRole aggregation, Deployment, ReplicaSet and PersistentVolume/claim protection
  controllers) are pooled (:mod:`.pool`): a server borrows one on its first start and gives it
  back when closed; a given-back control plane is reset through etcd to the baseline recorded
  when it became ready, then handed out again;
* users added at run time authenticate with client certificates of mcr-envtest's CA (which
  kube-apiserver trusts) or with bearer tokens checked through a TokenReview webhook served by
  this process (:mod:`.webhook`);
* every process logs to a file in its control plane's directory, and dies with this process
  (:mod:`.procs`).

What a real server cannot do raises :class:`RealModeError` naming the option or feature (fault
injection, the object store, ``restart(keep_state=False)``, speed controls, plain HTTP).
"""

from __future__ import annotations

from typing import Any

from .binaries import ENV, AssetsError, Binaries, assets_dir, default_dir, find
from .controlplane import ControlPlane, Spec
from .pool import Pool, close_default_pool, default_pool
from .procs import ControlPlaneError

__all__ = [
    "ENV",
    "AssetsError",
    "Binaries",
    "ControlPlane",
    "ControlPlaneError",
    "Pool",
    "RealModeError",
    "Spec",
    "assets_dir",
    "check_options",
    "close_default_pool",
    "default_dir",
    "default_pool",
    "find",
]


class RealModeError(RuntimeError):
    """Asked a real server for something only mcr-envtest has; the message names it (mark a test
    that needs it ``@pytest.mark.envtest_only(reason)``)."""


_REAL_DEFAULTS: dict[str, Any] = {
    "https": True,
    "history_size": 10000,
    "state_dir": None,
    "bookmark_interval": 60.0,
    "watch_timeout": (1800.0, 3600.0),
    "snapshot_interval": 5.0,
}


def check_options(options: dict[str, Any]) -> None:
    """Raise :class:`RealModeError` naming the first ``Server`` option a real control plane
    cannot honour (``options``: the keyword arguments given to ``Server``)."""
    for name, default in _REAL_DEFAULTS.items():
        if options[name] != default:
            raise RealModeError(
                f"Server({name}={options[name]!r}): a real kube-apiserver cannot honour {name}"
                " (mcr-envtest only; mark a test that needs it envtest_only)"
            )
    if options["host"] not in ("127.0.0.1", "localhost"):
        host = options["host"]
        raise RealModeError(f"Server(host={host!r}): a real control plane serves on 127.0.0.1 only")
