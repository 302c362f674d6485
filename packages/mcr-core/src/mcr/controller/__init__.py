"""Controllers: workers over one work queue, engaged per cluster (controller-runtime's ``controller``).

:mod:`mcr.controller.controller` holds :class:`Controller`; :mod:`mcr.controller.fence` the
leadership tenures that fence a controller's work.
"""

from __future__ import annotations

from mcr.controller.controller import (
    ClusterFilter,
    Controller,
)

__all__ = [
    "ClusterFilter",
    "Controller",
]
