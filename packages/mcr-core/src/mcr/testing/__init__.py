"""Test helpers for code built on mcr: bounded polling, leak checks, a manager run for a block, and the
provider conformance suite."""

from __future__ import annotations

from typing import Any

from mcr.testing import conformance
from mcr.testing._eventually import eventually
from mcr.testing._resources import open_sockets
from mcr.testing._running import import_script, providers_started, running
from mcr.testing.conformance import (
    IndexProbe,
    RecordedEngagement,
    RecordingAware,
    cache_index_probe,
    check_provider,
)

__all__ = [
    "IndexProbe",
    "RecordedEngagement",
    "RecordingAware",
    "cache_index_probe",
    "check_provider",
    "eventually",
    "import_script",
    "open_sockets",
    "providers_started",
    "running",
]


def __getattr__(name: str) -> Any:
    # Engagement: RecordedEngagement's former name, kept for one release (it warns).
    return getattr(conformance, name)
