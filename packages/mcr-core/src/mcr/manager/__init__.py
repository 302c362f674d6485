"""The manager: runnables, cluster engagement, coordinators, leader election, probes and metrics."""

from __future__ import annotations

from mcr.manager.authfilter import FilterProvider, RequestFilter, with_authentication_and_authorization
from mcr.manager.certwatcher import CertWatcher
from mcr.manager.coordinator import BasicCoordinator, Coordinator
from mcr.manager.engagements import ClusterInfo, ClusterState
from mcr.manager.errors import ShutdownAbortedError, ShutdownTimeoutError
from mcr.manager.leaderelection import LeaderElectionLostError, LeaderElector
from mcr.manager.manager import Manager
from mcr.manager.runnables import Runnable, RunnableFunc
from mcr.manager.scoped import FieldIndexer, ScopedManager

__all__ = [
    "BasicCoordinator",
    "CertWatcher",
    "ClusterInfo",
    "ClusterState",
    "Coordinator",
    "FieldIndexer",
    "FilterProvider",
    "LeaderElectionLostError",
    "LeaderElector",
    "Manager",
    "RequestFilter",
    "Runnable",
    "RunnableFunc",
    "ScopedManager",
    "ShutdownAbortedError",
    "ShutdownTimeoutError",
    "with_authentication_and_authorization",
]

for _name in __all__:
    _obj = globals()[_name]
    if getattr(_obj, "__module__", "").startswith("mcr.manager."):
        _obj.__module__ = "mcr.manager"
