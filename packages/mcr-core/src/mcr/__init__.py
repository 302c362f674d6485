"""mcr: Kubernetes controllers that reconcile across a dynamic fleet of clusters.

The names users type live here; everything else is in modules users rarely import. The
submodules ``mcr.handler``, ``mcr.predicate``, ``mcr.source``, ``mcr.providers`` and
``mcr.testing`` group the rest the way controller-runtime's packages do.
"""

from __future__ import annotations

import importlib
from typing import Any

from mcr import handler, predicate, providers, source, webhook
from mcr._version import __version__
from mcr.builder import Builder, controller_managed_by
from mcr.client import Client
from mcr.cluster import Cluster
from mcr.controller import Controller
from mcr.errors import (
    AlreadyExistsError,
    APIError,
    ClusterNotFoundError,
    ConfigError,
    ConflictError,
    ForbiddenError,
    GoneError,
    InvalidError,
    MCRError,
    NoKindMatchError,
    NotFoundError,
    TerminalError,
    TooManyRequestsError,
    TransportError,
    UnauthorizedError,
    is_already_exists,
    is_conflict,
    is_gone,
    is_not_found,
)
from mcr.manager import ClusterInfo, ClusterState, LeaderElectionLostError, Manager
from mcr.multicluster import LOCAL_CLUSTER, Aware, ClusterName, Provider, ProviderRunnable
from mcr.reconcile import Reconciler, Request, Result, current_cluster
from mcr.rest.config import RestConfig, load_config, load_config_async
from mcr.rest.kinds import GVK, GVR
from mcr.runner import run
from mcr.webhook import WebhookServer, webhook_managed_by

__all__ = [
    "GVK",
    "GVR",
    "LOCAL_CLUSTER",
    "APIError",
    "AlreadyExistsError",
    "Aware",
    "Builder",
    "Client",
    "Cluster",
    "ClusterInfo",
    "ClusterName",
    "ClusterNotFoundError",
    "ClusterState",
    "ConfigError",
    "ConflictError",
    "Controller",
    "ForbiddenError",
    "GoneError",
    "InvalidError",
    "LeaderElectionLostError",
    "MCRError",
    "Manager",
    "NoKindMatchError",
    "NotFoundError",
    "Provider",
    "ProviderRunnable",
    "Reconciler",
    "Request",
    "RestConfig",
    "Result",
    "TerminalError",
    "TooManyRequestsError",
    "TransportError",
    "UnauthorizedError",
    "WebhookServer",
    "__version__",
    "controller_managed_by",
    "current_cluster",
    "handler",
    "is_already_exists",
    "is_conflict",
    "is_gone",
    "is_not_found",
    "load_config",
    "load_config_async",
    "predicate",
    "providers",
    "run",
    "source",
    "webhook",
    "webhook_managed_by",
]

# Public classes report their public module in tracebacks, reprs and docs.
for _name in __all__:
    _obj = globals()[_name]
    if isinstance(_obj, type) and _obj.__module__.startswith("mcr."):
        _obj.__module__ = __name__
del _name, _obj

# Modules that moved into packages, reachable as attributes of mcr for one release (as when
# importing mcr imported them): importing one warns, naming its new home.
_MOVED = frozenset({"config", "kinds", "ratelimit", "restmapper", "transport"})


def __getattr__(name: str) -> Any:
    if name in _MOVED:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
