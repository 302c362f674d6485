"""Running the ``kind`` command without blocking the event loop."""

from __future__ import annotations

import asyncio
import contextlib
import shutil

from mcr.errors import MCRError

__all__ = ["KindError", "KindNotFoundError", "resolve", "run"]


class KindError(MCRError):
    """A ``kind`` command failed; the message names the command and carries its error output."""


class KindNotFoundError(KindError):
    """The ``kind`` command is not installed (or not where ``kind_command`` says)."""


def resolve(command: str) -> str:
    """The path of ``command``; :class:`KindNotFoundError` saying how to fix it otherwise."""
    found = shutil.which(command)
    if found is None:
        raise KindNotFoundError(
            f"the kind provider needs the kind command, but {command!r} was not found on PATH: install "
            "kind (https://kind.sigs.k8s.io/docs/user/quick-start/#installation) or pass "
            "kind_command='/path/to/kind'"
        )
    return found


async def run(command: str, *args: str, timeout: float) -> str:
    """``command args...``'s standard output; :class:`KindError` on failure or after ``timeout``.

    Cancelled (or timed out), the process is killed and reaped before this returns.
    """
    proc = await asyncio.create_subprocess_exec(
        command,
        *args,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        async with asyncio.timeout(timeout):
            out, err = await proc.communicate()
    except BaseException as exc:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        # Read the pipes to their end (closing them) and reap the process, also when cancelled.
        await proc.communicate()
        if isinstance(exc, TimeoutError):
            raise KindError(f"`kind {' '.join(args)}` did not finish within {timeout:g}s") from None
        raise
    if proc.returncode != 0:
        detail = err.decode(errors="replace").strip() or f"exit status {proc.returncode}"
        raise KindError(f"`kind {' '.join(args)}` failed: {detail}")
    return out.decode(errors="replace")
