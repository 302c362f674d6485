"""The root modules that moved into packages stay importable for one release.

Each old module (``mcr.config``, ``mcr.transport``, ``mcr.restmapper``, ``mcr.kinds``,
``mcr.ratelimit``) warns once, on import, naming its new home, and hands out the very objects of
that home. Nothing mcr ships (the library, the provider distributions, examples, benchmarks, docs,
tests) imports an old module.
"""

from __future__ import annotations

import ast
import importlib
import re
import sys
import warnings
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]

MOVED = {
    "mcr.config": "mcr.rest.config",
    "mcr.transport": "mcr.rest.transport",
    "mcr.restmapper": "mcr.rest.mapper",
    "mcr.kinds": "mcr.rest.kinds",
    "mcr.ratelimit": "mcr.workqueue.ratelimit",
}


@pytest.mark.parametrize(("old", "new"), sorted(MOVED.items()))
def test_old_module_warns_and_reexports_the_same_objects(
    old: str, new: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = importlib.import_module(new)
    monkeypatch.delitem(sys.modules, old, raising=False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        shim = importlib.import_module(old)
    deprecations = [w for w in caught if issubclass(w.category, DeprecationWarning)]
    assert len(deprecations) == 1, [str(w.message) for w in caught]
    assert new in str(deprecations[0].message)
    assert old in str(deprecations[0].message)
    assert shim.__all__
    assert set(shim.__all__) <= set(home.__all__)
    for name in shim.__all__:
        assert getattr(shim, name) is getattr(home, name), name
    # Reachable as an attribute of mcr too, as when importing mcr imported it.
    import mcr

    assert getattr(mcr, old.removeprefix("mcr.")) is shim


def _shipped_python() -> list[Path]:
    trees = [ROOT / "examples", ROOT / "bench", ROOT / "tests", *sorted((ROOT / "packages").glob("*/src"))]
    trees += sorted((ROOT / "packages").glob("*/tests"))
    shims = {ROOT / "packages/mcr-core/src" / (m.replace(".", "/") + ".py") for m in MOVED}
    return [
        p for tree in trees for p in tree.rglob("*.py") if p not in shims and "site-packages" not in p.parts
    ]


def _imported_modules(tree: ast.AST) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found


def test_nothing_shipped_imports_an_old_module() -> None:
    offenders = []
    for path in _shipped_python():
        if path == Path(__file__).resolve():
            continue
        used = _imported_modules(ast.parse(path.read_text(), filename=str(path))) & MOVED.keys()
        offenders += [f"{path.relative_to(ROOT)}: {m}" for m in sorted(used)]
    assert not offenders, offenders


def test_docs_name_no_old_module() -> None:
    # The changelogs record history; every other page names the new homes.
    old = re.compile(r"\b(" + "|".join(re.escape(m) for m in MOVED) + r")\b")
    offenders = []
    for page in [*sorted((ROOT / "docs").rglob("*.md")), ROOT / "packages/mcr-core/README.md"]:
        for n, line in enumerate(page.read_text().splitlines(), 1):
            offenders += [f"{page.relative_to(ROOT)}:{n}: {m.group(1)}" for m in old.finditer(line)]
    assert not offenders, offenders


@pytest.mark.parametrize(
    ("module", "old", "new"),
    [
        ("mcr.cache", "EventHandler", "ResourceEventHandler"),
        ("mcr.cache", "EventHandlerFuncs", "ResourceEventHandlerFuncs"),
        ("mcr.cache.handlers", "EventHandler", "ResourceEventHandler"),
        ("mcr.testing", "Engagement", "RecordedEngagement"),
    ],
)
def test_renamed_names_warn_and_are_the_new_objects(module: str, old: str, new: str) -> None:
    mod = importlib.import_module(module)
    with pytest.warns(DeprecationWarning, match=new):
        obj = getattr(mod, old)
    assert obj is getattr(mod, new)
    assert old not in mod.__all__


def test_unknown_names_still_raise_attribute_error() -> None:
    import mcr.cache
    import mcr.testing

    with pytest.raises(AttributeError, match="no_such_name"):
        _ = mcr.cache.no_such_name  # type: ignore[attr-defined]  # the unknown name is the point
    with pytest.raises(AttributeError, match="no_such_name"):
        _ = mcr.testing.no_such_name  # type: ignore[attr-defined]  # the unknown name is the point


def test_deprecated_methods_warn_and_answer_as_before() -> None:
    from mcr.cache import ByObject, CacheOptions
    from mcr.rest.kinds import GVK

    gvk = GVK("apps", "v1", "Deployment")
    with pytest.warns(DeprecationWarning, match="api_version"):
        assert gvk.group_version == gvk.api_version == "apps/v1"
    options = CacheOptions(
        by_object={"v1/Secret": ByObject(unsafe_disable_deep_copy=True)},
        default_unsafe_disable_deep_copy=False,
    )
    secret, config_map = GVK("", "v1", "Secret"), GVK("", "v1", "ConfigMap")
    with pytest.warns(DeprecationWarning, match="disables_deep_copy"):
        assert options.unsafe_disable_deep_copy_for(secret) is True
    with pytest.warns(DeprecationWarning, match="disables_deep_copy"):
        assert options.unsafe_disable_deep_copy_for(config_map) is False
    assert options.disables_deep_copy(options.by_gvk().get(secret)) is True
    assert options.disables_deep_copy(None) is False


async def test_clusters_remove_if_warns() -> None:
    from mcr.providers import Clusters

    clusters = Clusters()
    with pytest.warns(DeprecationWarning, match="remove_if"):
        assert await clusters.remove_if("gone", object()) is False  # type: ignore[arg-type]  # any other object: never removed
