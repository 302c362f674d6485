"""Every distribution builds as a wheel and installs in a fresh virtualenv, where `mcr providers`
lists each provider plugin with its distribution and version.

This is what a user gets from `pip install mcr-core mcr-provider-<x>`: no editable installs, no
source tree on sys.path, entry points read from the installed metadata.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = sorted(p for p in (ROOT / "packages").iterdir() if (p / "pyproject.toml").is_file())
PROVIDER_DISTRIBUTIONS = {
    "mcr-provider-capi",
    "mcr-provider-file",
    "mcr-provider-inventory",
    "mcr-provider-kind",
    "mcr-provider-kubeconfig",
    "mcr-provider-namespace",
}


def _project(package: Path) -> dict[str, object]:
    data = tomllib.loads((package / "pyproject.toml").read_text())
    project: dict[str, object] = data["project"]
    return project


def _version(package: Path) -> str:
    """The version hatch reads: ``__version__ = "..."`` in the file [tool.hatch.version] names."""
    data = tomllib.loads((package / "pyproject.toml").read_text())
    text = (package / data["tool"]["hatch"]["version"]["path"]).read_text()
    match = re.search(r'^__version__ = "([^"]+)"', text, re.M)
    assert match, f"{package.name}: no __version__ in its version file"
    return match.group(1)


def _run(*cmd: str | Path, cwd: Path | None = None) -> str:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    done = subprocess.run(
        [str(c) for c in cmd], capture_output=True, text=True, cwd=cwd, env=env, timeout=600, check=False
    )
    assert done.returncode == 0, f"{' '.join(map(str, cmd))} failed:\n{done.stdout}\n{done.stderr}"
    return done.stdout


def test_the_repository_has_every_provider_distribution() -> None:
    names = {str(_project(p)["name"]) for p in PACKAGES}
    assert names >= PROVIDER_DISTRIBUTIONS, sorted(PROVIDER_DISTRIBUTIONS - names)


@pytest.mark.timeout(900)
def test_wheels_install_in_a_fresh_venv_and_list_their_providers(tmp_path: Path) -> None:
    dist = tmp_path / "dist"
    _run(sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", dist, *PACKAGES)
    wheels = sorted(dist.glob("*.whl"))
    assert len(wheels) == len(PACKAGES), [w.name for w in wheels]

    env_dir = tmp_path / "fresh"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    bin_dir = env_dir / "bin"
    # The wheels themselves; their dependencies (kubernetes, pluggy, ...) from the package index.
    _run(bin_dir / "python", "-m", "pip", "install", "-q", *wheels)
    _run(bin_dir / "python", "-m", "pip", "check")

    out = _run(bin_dir / "mcr", "providers", cwd=tmp_path)
    rows = [line.split(None, 3) for line in out.splitlines()[1:] if line.strip()]
    listed = {(name, distribution, version) for name, distribution, version, *_ in rows}

    for package in PACKAGES:
        project = _project(package)
        entry_points = project.get("entry-points", {})
        assert isinstance(entry_points, dict)
        plugins = entry_points.get("mcr", {})
        if not plugins:
            continue
        # Every distribution with a plugin lists providers under its own name and version ...
        assert any(d == project["name"] and v == _version(package) for _, d, v in listed), (package, out)
        # ... and a provider distribution's plugin registers the provider its entry point names.
        if str(project["name"]).startswith("mcr-provider-"):
            for name in plugins:
                assert (name, project["name"], _version(package)) in listed, (name, out)
    providers = {distribution for _, distribution, _ in listed}
    assert providers >= PROVIDER_DISTRIBUTIONS, out

    # Each import package says its version, and nothing is imported from this source tree.
    for package in PACKAGES:
        for module_dir in (package / "src").iterdir():
            if not module_dir.is_dir() or not (module_dir / "__init__.py").exists():
                continue
            code = f"import {module_dir.name} as m; print(m.__version__); print(m.__file__)"
            version, where = _run(bin_dir / "python", "-c", code, cwd=tmp_path).split()
            assert version == _version(package)
            assert str(env_dir) in where, where
