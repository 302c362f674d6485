"""``mcr --version`` and ``python -m mcr``, run as subprocesses."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import mcr
from mcr.plugins import DISABLE_AUTOLOAD_ENV

MCR = Path(sys.executable).with_name("mcr")
ENV = {**os.environ, DISABLE_AUTOLOAD_ENV: "0"}


def run(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(argv), capture_output=True, text=True, env=ENV, timeout=60, check=False)


def test_version_from_the_console_script_and_python_m() -> None:
    for argv in ([str(MCR), "--version"], [sys.executable, "-m", "mcr", "--version"]):
        done = run(*argv)
        assert done.returncode == 0, done.stderr
        assert done.stdout == f"mcr {mcr.__version__}\n"


def test_python_m_mcr_works_like_the_mcr_command() -> None:
    via_script = run(str(MCR), "providers", "--json")
    via_module = run(sys.executable, "-m", "mcr", "providers", "--json")
    assert via_script.returncode == via_module.returncode == 0
    assert via_module.stdout == via_script.stdout
    assert '"name": "clusters"' in via_module.stdout
    # usage errors behave the same too, with the same program name
    bad_script, bad_module = run(str(MCR), "nonsense"), run(sys.executable, "-m", "mcr", "nonsense")
    assert bad_script.returncode == bad_module.returncode == 2
    assert bad_module.stderr.startswith("usage: mcr ")
    assert bad_module.stderr == bad_script.stderr
