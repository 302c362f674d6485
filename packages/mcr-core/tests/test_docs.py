"""The user documentation in docs/ cannot rot silently.

* every ```python block of every user page parses (architecture.md holds signature sketches);
* every name a block takes from mcr (``mcr.X.Y``, ``from mcr.x import Y``, and the same for
  ``mcr_envtest`` and every ``mcr_provider_*``) exists;
* every page is linked from docs/index.md;
* the complete programs marked ``<!-- docs-test: NAME -->`` run for real: the single-cluster and the
  fleet controller as scripts against mcr-envtest servers (stopped with SIGTERM, exit 0); the
  testing page's example tests in this process against the ``apiserver`` and ``fleet`` fixtures;
  the providers page's third-party provider through its plugin hook and the conformance suite.
"""

from __future__ import annotations

import ast
import asyncio
import importlib
import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from mcr.cluster import Cluster
from mcr.errors import NotFoundError
from mcr.testing import eventually

ROOT = Path(__file__).resolve().parents[3]
DOCS = ROOT / "docs"
PAGES = sorted(DOCS.glob("*.md"))
# architecture.md is the contributors' page: its blocks are signature sketches, not programs.
USER_PAGES = [p for p in PAGES if p.name != "architecture.md"]
# The file provider's source, for environments where only mcr-core and mcr-envtest are installed.
FILE_PROVIDER_SRC = ROOT / "packages" / "mcr-provider-file" / "src"
# Each provider distribution's source, for environments where only some of them are installed.
PROVIDER_SOURCES = {p.name.replace("-", "_"): p / "src" for p in (ROOT / "packages").glob("mcr-provider-*")}
OUR_PACKAGES = ("mcr", "mcr_envtest", *sorted(PROVIDER_SOURCES))

_BLOCK = re.compile(r"(?:<!-- docs-test: (?P<tag>[\w-]+) -->\n)?```python\n(?P<code>.*?)```", re.S)


def _blocks(page: Path) -> Iterator[tuple[int, str | None, str]]:
    """(line number, docs-test tag or None, code) for each python block of ``page``."""
    text = page.read_text()
    for m in _BLOCK.finditer(text):
        line = text.count("\n", 0, m.start("code")) + 1
        yield line, m.group("tag"), m.group("code")


def _all_blocks() -> list[tuple[str, str | None, str]]:
    return [(f"{p.name}:{line}", tag, code) for p in USER_PAGES for line, tag, code in _blocks(p)]


def _tagged(tag: str) -> str:
    found = [code for _, t, code in _all_blocks() if t == tag]
    assert len(found) == 1, f"expected exactly one block tagged {tag!r} in docs/, found {len(found)}"
    return found[0]


BLOCKS = _all_blocks()


def test_docs_have_python_blocks() -> None:
    assert len(PAGES) >= 6, [p.name for p in PAGES]
    assert len(BLOCKS) >= 15, "the docs lost most of their snippets"


@pytest.mark.parametrize(("where", "code"), [(w, c) for w, _, c in BLOCKS], ids=[w for w, _, _ in BLOCKS])
def test_block_parses(where: str, code: str) -> None:
    try:
        ast.parse(code, filename=where)
    except SyntaxError as exc:
        raise AssertionError(f"docs/{where}: python block does not parse: {exc}") from None


def _import(module: str, monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    top = module.split(".")[0]
    if top in PROVIDER_SOURCES:
        try:
            importlib.import_module(top)
        except ModuleNotFoundError:
            monkeypatch.syspath_prepend(str(PROVIDER_SOURCES[top]))
    return importlib.import_module(module)


def _chain(node: ast.expr) -> list[str] | None:
    """``a.b.c`` → ["a", "b", "c"]; None for anything not rooted in a plain name."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(node.id)
    return parts[::-1]


def _missing_names(code: str, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names ``code`` takes from mcr's packages that do not exist."""
    tree = ast.parse(code)
    bound: dict[str, Any] = {}  # local name -> the mcr object it is bound to
    missing: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] not in OUR_PACKAGES:
                    continue
                try:
                    _import(alias.name, monkeypatch)
                except ImportError as exc:
                    missing.append(f"import {alias.name} ({exc})")
                    continue
                if alias.asname:
                    bound[alias.asname] = importlib.import_module(alias.name)
                else:
                    top = alias.name.split(".")[0]
                    bound[top] = importlib.import_module(top)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module.split(".")[0] not in OUR_PACKAGES:
                continue
            try:
                module = _import(node.module, monkeypatch)
            except ImportError as exc:
                missing.append(f"from {node.module} import ... ({exc})")
                continue
            for alias in node.names:
                if not hasattr(module, alias.name):
                    missing.append(f"from {node.module} import {alias.name}")
                else:
                    bound[alias.asname or alias.name] = getattr(module, alias.name)
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute) or not isinstance(node.ctx, ast.Load):
            continue
        chain = _chain(node)
        if chain is None or chain[0] not in bound:
            continue
        obj = bound[chain[0]]
        for i, attr in enumerate(chain[1:], start=1):
            if not isinstance(obj, ModuleType | type):
                break  # an instance: its attributes are not ours to check statically
            if not hasattr(obj, attr):
                missing.append(".".join(chain[: i + 1]))
                break
            obj = getattr(obj, attr)
    return missing


@pytest.mark.parametrize(("where", "code"), [(w, c) for w, _, c in BLOCKS], ids=[w for w, _, _ in BLOCKS])
def test_block_names_exist(where: str, code: str, monkeypatch: pytest.MonkeyPatch) -> None:
    missing = _missing_names(code, monkeypatch)
    assert not missing, f"docs/{where} uses names that do not exist: {missing}"


def test_name_check_catches_a_missing_name(monkeypatch: pytest.MonkeyPatch) -> None:
    code = "import mcr\nfrom mcr.source import Channel, NoSuchSource\nmcr.Manager\nmcr.predicate.Nope()\n"
    assert _missing_names(code, monkeypatch) == ["from mcr.source import NoSuchSource", "mcr.predicate.Nope"]


def test_every_page_is_linked_from_the_index() -> None:
    index = (DOCS / "index.md").read_text()
    linked = set(re.findall(r"\]\(([\w-]+\.md)(?:#[\w-]*)?\)", index))
    pages = {p.name for p in PAGES} - {"index.md"}
    assert pages <= linked, f"pages missing from docs/index.md: {sorted(pages - linked)}"
    assert linked <= {p.name for p in PAGES}, f"index links to missing pages: {sorted(linked - pages)}"


def test_links_between_pages_resolve() -> None:
    for page in PAGES:
        for target, anchor in re.findall(r"\]\(([\w-]+\.md)(?:#([\w-]+))?\)", page.read_text()):
            path = DOCS / target
            assert path.exists(), f"docs/{page.name} links to missing {target}"
            if anchor:
                headings = re.findall(r"^#+ (.+)$", path.read_text(), flags=re.M)
                slugs = {re.sub(r"[^\w\- ]", "", h).strip().lower().replace(" ", "-") for h in headings}
                assert anchor in slugs, f"docs/{page.name} links to {target}#{anchor}: no such heading"


# --- the complete programs, run for real ---------------------------------------------------------


def _configmap(name: str, labels: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": "default", "labels": labels},
        "data": {"keep": "me"},
    }


async def _greeting(cluster: Cluster, name: str) -> str | None:
    try:
        cm = await cluster.api_reader.get("v1/ConfigMap", name, namespace="default")
    except NotFoundError:
        return None
    greeting: str | None = (cm.get("data") or {}).get("greeting")
    return greeting


async def _run_script(code: str, tmp_path: Path, *args: str) -> asyncio.subprocess.Process:
    script = tmp_path / "snippet.py"
    script.write_text(code)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(FILE_PROVIDER_SRC), env.get("PYTHONPATH")]))
    return await asyncio.create_subprocess_exec(
        sys.executable,
        str(script),
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=env,
    )


async def _stop(proc: asyncio.subprocess.Process) -> tuple[int, str, str]:
    if proc.returncode is None:
        proc.send_signal(signal.SIGTERM)
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


async def _wait_greeted(cluster: Cluster, proc: asyncio.subprocess.Process, name: str) -> None:
    async def greeted() -> bool:
        if proc.returncode is not None:
            _, err = await proc.communicate()
            raise AssertionError(f"the snippet exited early ({proc.returncode}): {err.decode()[-2000:]}")
        return await _greeting(cluster, name) == f"hello, {name}"

    await eventually(greeted, timeout=60, interval=0.1, message=f"{name} greeted")


async def test_single_cluster_controller_runs(apiserver: Any, tmp_path: Path) -> None:
    code = _tagged("greeter-single")
    async with Cluster.from_kubeconfig(apiserver.kubeconfig, name="docs") as cluster:
        await cluster.client.create(_configmap("greet-me", {"example.io/greet": "true"}))
        await cluster.client.create(_configmap("leave-me", {}))
        proc = await _run_script(code, tmp_path, apiserver.kubeconfig_path)
        try:
            await _wait_greeted(cluster, proc, "greet-me")
            # Drift is reverted: remove the greeting, it comes back.
            cm = await cluster.api_reader.get("v1/ConfigMap", "greet-me", namespace="default")
            cm["data"] = {"keep": "me"}
            await cluster.client.update(cm)
            await _wait_greeted(cluster, proc, "greet-me")
            assert await _greeting(cluster, "leave-me") is None
            kept = await cluster.api_reader.get("v1/ConfigMap", "greet-me", namespace="default")
            assert kept["data"]["keep"] == "me"
        finally:
            code_, _, err = await _stop(proc)
        assert code_ == 0, err[-3000:]


async def test_fleet_controller_runs(fleet: Any, tmp_path: Path) -> None:
    code = _tagged("greeter-fleet")
    kubeconfig_dir = tmp_path / "fleet"
    servers = fleet(2, kubeconfig_dir=kubeconfig_dir).servers
    clusters = [Cluster.from_kubeconfig(s.kubeconfig, name=f"docs-{i}") for i, s in enumerate(servers)]
    try:
        for i, cluster in enumerate(clusters):
            await cluster.start()
            await cluster.client.create(_configmap(f"greet-{i}", {"example.io/greet": "true"}))
        proc = await _run_script(code, tmp_path, str(kubeconfig_dir))
        try:
            for i, cluster in enumerate(clusters):
                await _wait_greeted(cluster, proc, f"greet-{i}")
        finally:
            status, out, err = await _stop(proc)
        assert status == 0, err[-3000:]
        # Each request names its cluster: cluster://<path>+<context>/default/<name>, the path's
        # slashes written %2F
        for i in range(2):
            path = str(kubeconfig_dir / f"cluster-{i}.kubeconfig").replace("/", "%2F")
            assert re.search(rf"greeted cluster://{re.escape(path)}\+\S+/default/greet-{i}", out), out
    finally:
        for cluster in clusters:
            await cluster.stop()


async def _run_page_test(tag: str, fixture: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Exec the block tagged ``tag`` (one ``test_*`` function) and await it with ``fixture``."""
    _import("mcr_provider_file", monkeypatch)  # importable even where it is not installed
    namespace: dict[str, Any] = {"__name__": f"docs_{tag.replace('-', '_')}"}
    exec(compile(_tagged(tag), f"docs:{tag}", "exec"), namespace)
    tests = [v for k, v in namespace.items() if k.startswith("test_") and callable(v)]
    assert len(tests) == 1, sorted(namespace)
    await (tests[0](fixture) if tests[0].__code__.co_argcount else tests[0]())


async def test_testing_page_example_runs(apiserver: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    await _run_page_test("testing-example", apiserver, monkeypatch)


def test_testing_page_example_runs_as_written_in_a_new_project(tmp_path: Path) -> None:
    """A new project with only the page's config and example: ``pytest`` passes it."""
    config = re.search(
        r"<!-- docs-test: testing-config -->\n```toml\n(.*?)```", (DOCS / "testing.md").read_text(), re.S
    )
    assert config is not None
    (tmp_path / "pyproject.toml").write_text(config.group(1))
    (tmp_path / "test_greeter.py").write_text(_tagged("testing-example"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    # No warning either (pytest-asyncio warns about settings the page would leave unset).
    assert re.search(r"\b1 passed in\b", done.stdout), done.stdout


async def test_testing_page_server_example_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    await _run_page_test("testing-server", None, monkeypatch)


@pytest.mark.envtest_only("the page's sample makes one cluster fail with faults.fail_next")
async def test_testing_page_fleet_example_runs(fleet: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    await _run_page_test("testing-fleet", fleet, monkeypatch)


def _module_from_block(name: str, tag: str, monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """A module ``name`` (registered in ``sys.modules`` for this test) holding the block ``tag``."""
    package, _, _ = name.rpartition(".")
    if package and package not in sys.modules:
        parent = ModuleType(package)
        parent.__path__ = []
        monkeypatch.setitem(sys.modules, package, parent)
    module = ModuleType(name)
    monkeypatch.setitem(sys.modules, name, module)
    exec(compile(_tagged(tag), f"docs:{tag}", "exec"), module.__dict__)
    return module


async def test_provider_page_example_provider_plugin_and_conformance(
    fleet: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The third-party provider of providers.md registers through its plugin and passes the suite."""
    from mcr.plugins import load_registry, plugin_manager

    provider_module = _module_from_block("mcr_provider_catalog.provider", "provider-module", monkeypatch)
    plugin = _module_from_block("mcr_provider_catalog.plugin", "provider-plugin", monkeypatch)
    registry = load_registry(plugin_manager(autoload=False, plugins=[plugin]))

    async def empty() -> dict[str, dict[str, Any]]:
        return {}

    made = registry.create("catalog", fetch=empty, interval=1.0)
    assert isinstance(made, provider_module.CatalogProvider)
    assert {"catalog", "clusters"} <= set(registry.names())
    await _run_page_test("provider-conformance", fleet, monkeypatch)


def test_readme_starts_with_the_quickstart_and_the_test_command_ci_runs() -> None:
    """The README opens with exactly two commands, in a venv; CI runs the second one verbatim."""
    text = (ROOT / "README.md").read_text()
    first_block = re.search(r"```bash\n(.*?)```", text, flags=re.S)
    assert first_block is not None
    assert text.index(first_block.group(0)) < text.index("\n## "), "the commands come before any section"
    commands = [line.split("  #", 1)[0].strip() for line in first_block.group(1).splitlines() if line.strip()]
    assert len(commands) == 2, commands
    quickstart, tests = commands
    for command in commands:
        assert command.startswith("python3 -m venv .venv && .venv/bin/pip install"), command
    assert quickstart.endswith("tox run -e quickstart")
    assert tests.endswith("tox run-parallel -m test -p 4")
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    assert tests in ci, ".ci/run must run the README's test command as written"
    assert "Python ≥ 3.11" in text


def _mkdocs() -> str | None:
    """mkdocs on PATH, else the one of the ``docs`` tox env when it was created."""
    import shutil

    found = shutil.which("mkdocs")
    if found is not None:
        return found
    tox_env = ROOT / ".tox" / "docs" / "bin" / "mkdocs"
    return str(tox_env) if tox_env.exists() else None


def test_api_reference_renders_roles_as_links_and_shows_signatures(tmp_path: Path) -> None:
    mkdocs = _mkdocs()
    if mkdocs is None:
        pytest.skip("mkdocs is not installed (tox -e docs installs it)")
    site = tmp_path / "site"
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    # Not --strict: a raw role must fail this test's own assertions, whatever else warns.
    done = subprocess.run(
        [mkdocs, "build", "--site-dir", str(site)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    pages = sorted((site / "api").glob("*/index.html"))
    assert len(pages) >= 4, pages
    role = re.compile(r":(?:class|meth|func|attr|data|mod|exc|obj):(?:`|<code>)")
    for page in pages:
        html = page.read_text()
        assert not role.findall(html), (
            f"{page.parent.name}: raw Sphinx roles {sorted(set(role.findall(html)))}"
        )
        assert "<autoref" not in html, f"{page.parent.name}: a cross-reference was left unprocessed"
    api = (site / "api" / "mcr" / "index.html").read_text()
    # Roles became links to the objects they name ...
    assert 'href="#mcr.errors.ClusterNotFoundError"><code>ClusterNotFoundError</code></a>' in api
    # ... and classes show their constructor's signature.
    signature = re.search(r'id="mcr\.Manager".*?doc-signature.*?</div>', api, re.S)
    assert signature is not None
    text = re.sub(r"<[^>]+>", "", signature.group(0))
    assert re.search(r"Manager\(\s*config:", text), text[:300]  # formatted over lines or not
    assert "leader_election: bool = False" in text
    assert "shows raw Sphinx roles" not in done.stderr
