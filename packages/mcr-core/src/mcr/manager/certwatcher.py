"""A TLS serving certificate that follows its files: rotate them and new connections get the new pair.

:class:`CertWatcher` loads a certificate chain and its key into a server :class:`ssl.SSLContext`.
While it runs it re-reads both files whenever either changes (size, modification time or inode),
so a certificate renewed by cert-manager or a mounted Secret is served without a restart.
"""

from __future__ import annotations

import asyncio
import logging
import os
import ssl
from pathlib import Path

__all__ = ["CertWatcher"]

log = logging.getLogger("mcr.manager")


def _stamp(path: Path) -> tuple[int, int, int]:
    st = path.stat()
    return st.st_ino, st.st_size, st.st_mtime_ns


def _load(cert: Path, key: Path) -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        ctx.load_cert_chain(cert, key)
    except FileNotFoundError as exc:
        raise FileNotFoundError(exc.errno, f"serving certificate: {exc.strerror}", exc.filename) from None
    except ssl.SSLError as exc:
        raise ValueError(f"serving certificate {cert} with key {key} cannot be loaded: {exc}") from exc
    return ctx


class CertWatcher:
    """Serves the certificate ``cert_file`` with ``key_file``, reloaded when the files change.

    :meth:`load` reads them once (``FileNotFoundError`` naming a missing file, ``ValueError`` for a
    pair that does not load); :attr:`context` is the server context to listen with, and each TLS
    handshake uses the pair loaded last. :meth:`run` polls every ``interval`` seconds until
    cancelled; a pair that fails to load (say, half-written) is logged and the previous one kept.
    """

    def __init__(
        self, cert_file: str | os.PathLike[str], key_file: str | os.PathLike[str], *, interval: float = 1.0
    ) -> None:
        self.cert_file = Path(cert_file)
        self.key_file = Path(key_file)
        self.interval = interval
        self._current: ssl.SSLContext | None = None
        self._stamps: tuple[tuple[int, int, int], tuple[int, int, int]] | None = None
        self.reloads = 0
        """How many times a changed pair was loaded (not counting :meth:`load`)."""

    @property
    def context(self) -> ssl.SSLContext:
        """The context to listen with; it hands every handshake the latest pair. Needs :meth:`load`."""
        if self._current is None:
            raise RuntimeError("CertWatcher.load() must run before its context is used")
        outer = _load(self.cert_file, self.key_file)
        outer.sni_callback = self._select
        return outer

    def _select(self, sock: ssl.SSLObject, server_name: str | None, _ctx: ssl.SSLContext) -> None:
        if self._current is not None:
            sock.context = self._current

    def load(self) -> None:
        """Read the pair now; raises on a missing or unloadable file (nothing changes then)."""
        stamps = (_stamp(self.cert_file), _stamp(self.key_file))
        self._current = _load(self.cert_file, self.key_file)
        self._stamps = stamps

    async def run(self) -> None:
        """Poll the files until cancelled, loading the pair again whenever one of them changed."""
        while True:
            await asyncio.sleep(self.interval)
            try:
                stamps = await asyncio.to_thread(lambda: (_stamp(self.cert_file), _stamp(self.key_file)))
                if stamps == self._stamps:
                    continue
                self._current = await asyncio.to_thread(_load, self.cert_file, self.key_file)
            except (OSError, ValueError) as exc:
                log.warning("serving certificate not reloaded, keeping the previous one: %s", exc)
                continue
            self._stamps = stamps
            self.reloads += 1
            log.info("serving certificate reloaded", extra={"cert": str(self.cert_file)})
