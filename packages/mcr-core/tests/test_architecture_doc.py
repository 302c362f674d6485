"""docs/architecture.md draws the package maps of mcr-core and mcr-envtest as they are.

Each map is the fenced block that starts with ``mcr/`` or ``mcr_envtest/``: every entry it names
(``name.py``, ``pkg/``, ``pkg/name.py``) must exist, and every package of the distribution (a
directory with an ``__init__.py``, at any depth) must be named.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
DOC = ROOT / "docs" / "architecture.md"
TREES = {
    "mcr": ROOT / "packages" / "mcr-core" / "src" / "mcr",
    "mcr_envtest": ROOT / "packages" / "mcr-envtest" / "src" / "mcr_envtest",
}
# An entry line: two spaces, then one name or a comma-separated list of names.
_ENTRY = re.compile(r"^  (?P<names>[\w./]+(?:, [\w./]+)*)(?:\s|$)")


def _map(top: str) -> set[str]:
    """The entries the map of ``top`` names, relative to the package (``pkg/`` for packages)."""
    block = re.search(rf"^```\n{re.escape(top)}/\n(?P<body>.*?)^```", DOC.read_text(), re.S | re.M)
    assert block is not None, f"docs/architecture.md has no map starting with {top}/"
    names: set[str] = set()
    for line in block.group("body").splitlines():
        m = _ENTRY.match(line)
        if m is not None:
            names.update(n for n in m.group("names").split(", ") if n.endswith((".py", "/")))
    return names


@pytest.mark.parametrize("top", sorted(TREES))
def test_every_named_module_exists(top: str) -> None:
    tree = TREES[top]
    named = _map(top)
    assert len(named) >= 10, f"the {top} map names almost nothing: {sorted(named)}"
    missing = [
        n
        for n in sorted(named)
        if not ((tree / n / "__init__.py").is_file() if n.endswith("/") else (tree / n).is_file())
    ]
    assert not missing, f"docs/architecture.md names what {top} does not have: {missing}"


@pytest.mark.parametrize("top", sorted(TREES))
def test_every_package_is_named(top: str) -> None:
    tree = TREES[top]
    packages = sorted(
        f"{init.parent.relative_to(tree).as_posix()}/"
        for init in tree.rglob("__init__.py")
        if init.parent != tree
    )
    assert packages, f"{top} has no packages to check"
    unnamed = [p for p in packages if p not in _map(top)]
    assert not unnamed, f"docs/architecture.md's map of {top} leaves out the packages {unnamed}"
