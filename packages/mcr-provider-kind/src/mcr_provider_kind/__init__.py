"""mcr's kind provider: the local kind clusters, listed with the ``kind`` command."""

from __future__ import annotations

from mcr_provider_kind._cli import KindError, KindNotFoundError
from mcr_provider_kind.provider import KindProvider

__version__ = "0.1.0"

__all__ = ["KindError", "KindNotFoundError", "KindProvider", "__version__"]
