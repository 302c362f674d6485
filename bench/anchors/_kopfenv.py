"""The bench's own venv with kopf (``requirements.txt``), made on first use in the cache.

``$XDG_CACHE_HOME/mcr/bench-kopf/<hash of requirements.txt>/venv`` (``~/.cache`` by default),
created with the running interpreter's ``venv`` and filled by its ``pip``; returns at once when
present. kopf is a dependency of this benchmark only, never of mcr.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

REQUIREMENTS = Path(__file__).resolve().parent / "requirements.txt"


class KopfEnvError(RuntimeError):
    """The venv could not be made or kopf could not be installed; the message says which."""


def python() -> Path:
    """The interpreter of the kopf venv, creating the venv first if needed."""
    digest = hashlib.sha256(REQUIREMENTS.read_bytes()).hexdigest()[:16]
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "mcr" / "bench-kopf" / digest
    exe = base / "venv" / "bin" / "python"
    marker = base / "installed"
    if marker.is_file() and exe.is_file():
        return exe
    base.mkdir(parents=True, exist_ok=True)
    print(f"installing {REQUIREMENTS.name} into {base / 'venv'}", flush=True)
    steps = [
        [getattr(sys, "_base_executable", sys.executable), "-m", "venv", "--clear", str(base / "venv")],
        [str(exe), "-m", "pip", "install", "-q", "-r", str(REQUIREMENTS)],
    ]
    for step in steps:
        proc = subprocess.run(step, capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            tail = " | ".join((proc.stderr or proc.stdout).strip().splitlines()[-3:])
            raise KopfEnvError(
                f"bench anchors: `{' '.join(step[:4])}` failed (exit {proc.returncode}): {tail}"
            )
    marker.write_text("ok\n")
    return exe
