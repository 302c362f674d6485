"""Where the real control-plane binaries are: ``KUBEBUILDER_ASSETS`` or mcr's build cache.

``tools/kube/build.sh`` builds kube-apiserver, kube-controller-manager and etcd into
``${MCR_KUBE_CACHE:-${XDG_CACHE_HOME:-~/.cache}/mcr}/kube-<version>/bin`` and prints that
directory. kube-controller-manager is optional: without it a control plane runs with the
ServiceAccount admission plugin off, and namespaces, garbage collection and default
ServiceAccounts are not processed.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

__all__ = ["ENV", "KUBE_VERSION", "AssetsError", "Binaries", "assets_dir", "default_dir", "find"]

ENV = "KUBEBUILDER_ASSETS"
KUBE_VERSION = "1.37.2"
_BUILD = "build them with tools/kube/build.sh (then KUBEBUILDER_ASSETS=$(tools/kube/build.sh))"


class AssetsError(RuntimeError):
    """The real control-plane binaries are missing; the message names the directory, what is
    missing in it and how to build them."""


@dataclass(frozen=True)
class Binaries:
    """Paths of the binaries a real control plane runs (``controller_manager`` may be None)."""

    etcd: Path
    apiserver: Path
    controller_manager: Path | None


def assets_dir() -> Path | None:
    """The ``KUBEBUILDER_ASSETS`` directory, or None when the variable is unset or empty."""
    value = os.environ.get(ENV, "").strip()
    return Path(value).expanduser() if value else None


def default_dir() -> Path:
    """Where ``tools/kube/build.sh`` puts the binaries of the default Kubernetes version."""
    version = os.environ.get("MCR_KUBE_VERSION", KUBE_VERSION).removeprefix("v")
    cache = os.environ.get("MCR_KUBE_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "mcr"
    )
    return Path(cache) / f"kube-{version}" / "bin"


def find() -> Binaries:
    """The binaries in ``KUBEBUILDER_ASSETS``, else in :func:`default_dir`; raises
    :class:`AssetsError` (one line) when etcd or kube-apiserver is not there."""
    explicit = assets_dir()
    directory = explicit or default_dir()
    where = f"{ENV}={directory}" if explicit else f"{directory} ({ENV} is not set)"
    if not directory.is_dir():
        raise AssetsError(f"no real control-plane binaries: {where} is not a directory; {_BUILD}")
    missing = [n for n in ("etcd", "kube-apiserver") if not os.access(directory / n, os.X_OK)]
    if missing:
        lacks = " and ".join(missing)
        raise AssetsError(f"no real control-plane binaries: {where} lacks {lacks}; {_BUILD}")
    kcm = directory / "kube-controller-manager"
    has_kcm = os.access(kcm, os.X_OK)
    return Binaries(directory / "etcd", directory / "kube-apiserver", kcm if has_kcm else None)
