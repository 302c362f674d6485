"""Every distribution under packages/ carries the same complete metadata.

Read from the sources (pyproject.toml, the package tree), so it covers distributions this test
environment does not install.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[3]
PACKAGES = sorted(p for p in (ROOT / "packages").iterdir() if (p / "pyproject.toml").is_file())
PYTHONS = ("3.11", "3.12", "3.13")
URLS = ("Homepage", "Documentation", "Source", "Changelog", "Issues")


def _project(pkg: Path) -> dict[str, Any]:
    data: dict[str, Any] = tomllib.loads((pkg / "pyproject.toml").read_text())
    return data


def _version(pkg: Path) -> str:
    """The version hatchling builds: ``__version__`` in the file ``[tool.hatch.version]`` names."""
    data = _project(pkg)
    path = pkg / data["tool"]["hatch"]["version"]["path"]
    found = re.search(r'^__version__ = "([^"]+)"$', path.read_text(), re.M)
    assert found, f"{path} defines no __version__"
    return found.group(1)


def test_every_distribution_is_found() -> None:
    names = {p.name for p in PACKAGES}
    assert {"mcr-core", "mcr-envtest", "mcr-provider-file"} <= names, names


@pytest.mark.parametrize("pkg", PACKAGES, ids=[p.name for p in PACKAGES])
def test_distribution_metadata(pkg: Path) -> None:
    project = _project(pkg)["project"]
    assert project["name"] == pkg.name
    assert project.get("dynamic") == ["version"], "the version has one source: the package's __version__"
    version = _version(pkg)
    assert re.fullmatch(r"\d+\.\d+\.\d+", version), version
    assert project["requires-python"] == ">=3.11"
    assert project["license"] == "Apache-2.0"
    assert project["license-files"] == ["LICENSE"]
    assert (pkg / "LICENSE").read_text() == (ROOT / "LICENSE").read_text()
    classifiers = set(project["classifiers"])
    for python in PYTHONS:
        assert f"Programming Language :: Python :: {python}" in classifiers
    assert "Typing :: Typed" in classifiers
    assert not any(c.startswith("License ::") for c in classifiers), "the SPDX license field says it"
    urls = project["urls"]
    assert set(URLS) <= set(urls), urls
    assert urls["Source"].endswith(f"/packages/{pkg.name}")
    assert urls["Changelog"].endswith(f"/packages/{pkg.name}/CHANGELOG.md")
    assert (pkg / "README.md").is_file()
    changelog = (pkg / "CHANGELOG.md").read_text()
    assert re.search(rf"^## {re.escape(version)}\b", changelog, re.M), f"CHANGELOG has no {version} section"
    (wheel_package,) = _project(pkg)["tool"]["hatch"]["build"]["targets"]["wheel"]["packages"]
    assert (pkg / wheel_package / "py.typed").is_file()
    assert (pkg / "tests").is_dir()


@pytest.mark.parametrize(
    "pkg", [p for p in PACKAGES if p.name.startswith("mcr-provider-")], ids=lambda p: p.name
)
def test_provider_distributions_register_through_the_mcr_entry_point_group(pkg: Path) -> None:
    project = _project(pkg)["project"]
    core = [d for d in project["dependencies"] if d.startswith("mcr-core")]
    assert len(core) == 1, f"{pkg.name} must depend on mcr-core: {project['dependencies']}"
    assert "<" in core[0], f"{pkg.name} must depend on a compatible mcr-core range, not {core[0]!r}"
    entry_points = project["entry-points"]["mcr"]
    assert len(entry_points) == 1, entry_points
    (module,) = entry_points.values()
    path = pkg / "src" / (module.replace(".", "/") + ".py")
    assert path.is_file(), f"entry point module {module} not found at {path}"
    assert "@hookimpl" in path.read_text()
