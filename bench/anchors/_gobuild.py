"""Builds ``bench/go`` (the Go side of the anchors) once per source version, into a cache.

The binary lands in ``$XDG_CACHE_HOME/mcr/bench-go/<hash>/anchor`` (``~/.cache`` by default),
``<hash>`` covering ``go.mod``, ``go.sum`` and every ``.go`` file, so a changed source builds anew
and an unchanged one returns at once. The build runs ``go build -mod=mod`` (the module proxy
supplies the dependencies on the first build; later builds use Go's own module cache).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import time
from pathlib import Path

GO_DIR = Path(__file__).resolve().parent.parent / "go"


class GoBuildError(RuntimeError):
    """``go`` is missing or ``go build`` failed; the message says which and how."""


def source_hash(src: Path = GO_DIR) -> str:
    """A short hash of the Go program's sources (go.mod, go.sum, ``*.go``)."""
    digest = hashlib.sha256()
    files = [src / "go.mod", src / "go.sum", *sorted(src.glob("*.go"))]
    for path in files:
        digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "mcr" / "bench-go"


def build(src: Path = GO_DIR, *, log: bool = True) -> Path:
    """The path of the built anchor binary, building it first if this source version has none.

    Raises :class:`GoBuildError` (one line) when ``go`` is not on ``PATH`` or the build fails
    (then with the compiler's last lines). A failed build leaves no binary behind.
    """
    target = cache_root() / source_hash(src) / "anchor"
    if target.is_file():
        return target
    go = shutil.which("go")
    if go is None:
        raise GoBuildError(
            "bench anchors: `go` is not on PATH; install Go >= 1.26 (https://go.dev/dl) to build bench/go"
        )
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_suffix(".partial")
    if log:
        print(f"building {src} into {target} (first build fetches modules: minutes)", flush=True)
    start = time.perf_counter()
    env = {**os.environ, "GOFLAGS": "-mod=mod"}
    proc = subprocess.run(
        [go, "build", "-trimpath", "-o", str(partial), "."],
        cwd=src,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        partial.unlink(missing_ok=True)
        tail = " | ".join((proc.stderr or proc.stdout).strip().splitlines()[-5:])
        raise GoBuildError(f"bench anchors: `go build` in {src} failed (exit {proc.returncode}): {tail}")
    partial.replace(target)
    if log:
        print(f"built in {time.perf_counter() - start:.0f} s", flush=True)
    return target
