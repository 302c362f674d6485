"""mcr-envtest: a Kubernetes-compatible API server for tests and local fleets."""

from __future__ import annotations

from ._version import __version__
from .faults import Faults, LoggedRequest
from .fleet import Fleet, FleetThread
from .server import Server
from .server_thread import ServerThread

__all__ = ["Faults", "Fleet", "FleetThread", "LoggedRequest", "Server", "ServerThread", "__version__"]

for _name in __all__:
    if isinstance(globals()[_name], type):
        globals()[_name].__module__ = __name__
del _name
