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
    assert bad_module.stderr.startswith("mcr: error: ")
    assert "invalid choice: 'nonsense'" in bad_module.stderr
    assert bad_module.stderr.count("\n") == 1  # one line naming what is wrong
    assert bad_module.stderr == bad_script.stderr


def test_a_broken_plugin_is_reported_once(tmp_path: Path) -> None:
    """The command prints a plugin's failure itself; logging does not print it a second time."""
    (tmp_path / "mcr_provider_broken.py").write_text("raise RuntimeError('half-installed')\n")
    info = tmp_path / "mcr_provider_broken-0.0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: mcr-provider-broken\nVersion: 0.0.1\n")
    (info / "entry_points.txt").write_text("[mcr]\nbroken = mcr_provider_broken\n")
    path = os.pathsep.join([str(tmp_path), *sys.path])
    done = subprocess.run(
        [sys.executable, "-m", "mcr", "providers"],
        capture_output=True,
        text=True,
        env={**ENV, "PYTHONPATH": path},
        timeout=60,
        check=False,
    )
    assert done.returncode == 1
    assert done.stderr.count("half-installed") == 1, done.stderr
    assert "mcr-provider-broken 0.0.1" in done.stderr
    assert "nop " in done.stdout
