"""How a manager's run can end badly, besides a runnable's own error and a lost leader lease
(:class:`~mcr.manager.leaderelection.LeaderElectionLostError`)."""

from __future__ import annotations

from mcr.errors import MCRError

__all__ = ["ShutdownAbortedError", "ShutdownTimeoutError"]


class ShutdownAbortedError(MCRError):
    """A second SIGTERM/SIGINT cut the graceful shutdown short (in-flight work was cancelled)."""


class ShutdownTimeoutError(MCRError):
    """Runnables did not end within the graceful shutdown timeout."""

    def __init__(self, timeout: float, overran: list[str]) -> None:
        self.timeout = timeout
        self.overran = overran
        super().__init__(
            f"failed waiting for all runnables to end within grace period of {timeout}s: {', '.join(overran)}"
        )
