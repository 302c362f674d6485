"""mcr-envtest: a Kubernetes-compatible API server for tests and local fleets."""

from __future__ import annotations

from .faults import Faults, LoggedRequest
from .fleet import Fleet, FleetThread
from .server import Server, ServerThread

__all__ = ["Faults", "Fleet", "FleetThread", "LoggedRequest", "Server", "ServerThread"]

for _name in __all__:
    globals()[_name].__module__ = __name__
del _name
