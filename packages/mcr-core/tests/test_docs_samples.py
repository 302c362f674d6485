"""Every code sample of the documentation site runs.

* every ```python block of every user page is executed in a fresh module, with ``$KUBECONFIG``
  naming a live mcr-envtest server (blocks build managers and configs from it), in a scratch
  directory; what the block defines must then exist;
* the samples marked ``<!-- docs-test: NAME -->`` on the patterns, cross-cluster, authentication
  and cluster-identity pages are also called against mcr-envtest servers and must do what the page
  says;
* every page is part of the site's navigation (mkdocs.yml), which ``tox run -e docs`` builds with
  ``--strict``.
"""

from __future__ import annotations

import ast
import asyncio
import logging
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml

import mcr
from mcr.providers import ClustersProvider
from mcr.testing import eventually

ROOT = Path(__file__).resolve().parents[3]
DOCS = ROOT / "docs"
USER_PAGES = sorted(p for p in DOCS.rglob("*.md") if p.name != "architecture.md")
_BLOCK = re.compile(r"(?:<!-- docs-test: (?P<tag>[\w-]+) -->\n)?```python\n(?P<code>.*?)```", re.S)
PROVIDER_SOURCES = [p / "src" for p in sorted((ROOT / "packages").glob("mcr-provider-*"))]


def _blocks() -> Iterator[tuple[str, str | None, str]]:
    for page in USER_PAGES:
        text = page.read_text()
        for m in _BLOCK.finditer(text):
            line = text[: m.start()].count("\n") + 1
            yield f"{page.relative_to(DOCS)}:{line}", m.group("tag"), m.group("code")


BLOCKS = list(_blocks())


def _tagged(tag: str) -> str:
    found = [code for _, t, code in BLOCKS if t == tag]
    assert len(found) == 1, f"expected one block tagged {tag!r} in docs/, found {len(found)}"
    return found[0]


def _load(code: str, name: str, monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    module = ModuleType(name)
    monkeypatch.setitem(sys.modules, name, module)
    exec(compile(code, name, "exec"), module.__dict__)
    return module


@pytest.fixture
def sample_env(apiserver: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """$KUBECONFIG → a live server, a scratch cwd, provider sources importable, logging restored."""
    monkeypatch.setenv("KUBECONFIG", str(apiserver.kubeconfig_path))
    monkeypatch.chdir(tmp_path)
    for src in PROVIDER_SOURCES:
        monkeypatch.syspath_prepend(str(src))
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    try:
        yield
    finally:
        for handler in root.handlers[:]:
            if handler not in handlers:
                root.removeHandler(handler)
        root.setLevel(level)


def _defined(code: str) -> set[str]:
    """The top-level names a block binds."""
    names: set[str] = set()
    for node in ast.parse(code).body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return names


UNTAGGED = [(w, c) for w, t, c in BLOCKS if t is None]


@pytest.mark.usefixtures("sample_env")
@pytest.mark.parametrize(("where", "code"), UNTAGGED, ids=[w for w, _ in UNTAGGED])
async def test_block_executes(where: str, code: str, monkeypatch: pytest.MonkeyPatch) -> None:
    module = _load(code, f"docs_sample_{abs(hash(where))}", monkeypatch)
    missing = {n for n in _defined(code) if not hasattr(module, n)}
    assert not missing, f"docs/{where}: names not defined after running the block: {missing}"
    # A manager a block built is closed again (its local cluster holds connections once started).
    for value in list(vars(module).values()):
        if isinstance(value, mcr.Manager) and value.local_cluster is not None:
            await value.local_cluster.stop()


def test_every_tagged_block_has_a_test_that_runs_it() -> None:
    # Tagged blocks are complete programs or functions: a dedicated test (here or in test_docs.py)
    # runs each one against servers, so none is only executed as a module.
    tests = (Path(__file__).parent / "test_docs.py").read_text() + Path(__file__).read_text()
    tags = {t for _, t, _ in BLOCKS if t is not None}
    assert tags, "no tagged blocks found"
    untested = sorted(t for t in tags if f'"{t}"' not in tests)
    assert not untested, f"tagged docs blocks no test runs: {untested}"


def test_every_page_is_in_the_site_navigation() -> None:
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text())

    def pages(nav: Any) -> Iterator[str]:
        if isinstance(nav, str):
            yield nav
        elif isinstance(nav, list):
            for item in nav:
                yield from pages(item)
        elif isinstance(nav, dict):
            for value in nav.values():
                yield from pages(value)

    listed = set(pages(config["nav"]))
    on_disk = {str(p.relative_to(DOCS)) for p in DOCS.rglob("*.md")}
    assert on_disk == listed, {"not in nav": on_disk - listed, "missing": listed - on_disk}
    sources = set(config["plugins"][1]["mkdocstrings"]["handlers"]["python"]["paths"])
    expected = {str(p.relative_to(ROOT)) for p in [*PROVIDER_SOURCES]} | {
        "packages/mcr-core/src",
        "packages/mcr-envtest/src",
    }
    assert sources == expected, "mkdocs.yml's mkdocstrings paths must list every distribution's src"
    reference = (DOCS / "api" / "provider-distributions.md").read_text()
    for src in PROVIDER_SOURCES:
        module = src.parent.name.replace("-", "_")
        assert f"::: {module}\n" in reference, f"{module} has no API reference section"


# --- the tagged samples, called against servers --------------------------------------------------


@pytest.fixture
async def fleet_manager(fleet: Any) -> tuple[mcr.Manager, list[str]]:
    """A manager whose local cluster is server 0 and whose provider holds servers 1 and 2."""
    servers = fleet(3).servers
    provider = ClustersProvider()
    names = ["east", "west"]
    for name, server in zip(names, servers[1:], strict=True):
        await provider.add(name, mcr.Cluster.from_kubeconfig(server.kubeconfig, name=name))
    mgr = mcr.Manager(
        mcr.RestConfig.from_kubeconfig(servers[0].kubeconfig),
        provider=provider,
        metrics_bind_address="0",
        health_probe_bind_address="0",
    )
    return mgr, names


async def _running(mgr: mcr.Manager) -> asyncio.Task[None]:
    return asyncio.create_task(mgr.start(handle_signals=False))


async def _stop(mgr: mcr.Manager, task: asyncio.Task[None]) -> None:
    mgr.stop()
    await asyncio.wait_for(task, 30)


def _cm(name: str, data: dict[str, str] | None = None) -> dict[str, Any]:
    meta = {"name": name, "namespace": "default"}
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": data or {}}


async def test_uniform_pattern_sees_every_clusters_configmaps(
    fleet_manager: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    mgr, names = fleet_manager
    seen = _load(_tagged("pattern-uniform"), "docs_pattern_uniform", monkeypatch).uniform(mgr)
    task = await _running(mgr)
    try:
        for name in names:
            await (await mgr.get_cluster(name)).client.create(_cm(f"in-{name}"))
        await eventually(lambda: all(f"default/in-{n}" in seen.get(n, set()) for n in names))
        assert "default/in-east" not in seen.get("west", set())
        await (await mgr.get_cluster("east")).client.delete("v1/ConfigMap", "in-east", namespace="default")
        await eventually(lambda: "default/in-east" not in seen["east"])
    finally:
        await _stop(mgr, task)


async def test_aware_pattern_copies_hub_configmaps_to_the_fleet(
    fleet_manager: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    mgr, names = fleet_manager
    done = _load(_tagged("pattern-aware"), "docs_pattern_aware", monkeypatch).hub_to_fleet(mgr, names)
    task = await _running(mgr)
    try:
        local = await mgr.get_cluster("")
        await local.client.create(_cm("policy", {"mode": "strict"}))
        await eventually(lambda: {c for c, k in done if k == "default/policy"} == set(names))
        for name in names:
            copy = await (await mgr.get_cluster(name)).api_reader.get(
                "v1/ConfigMap", "policy", namespace="default"
            )
            assert copy["data"] == {"mode": "strict"}
    finally:
        await _stop(mgr, task)


async def test_cross_cluster_aggregate_counts_fleet_copies_in_the_hub(
    fleet_manager: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    mgr, names = fleet_manager
    counts = _load(_tagged("cross-cluster-aggregate"), "docs_aggregate", monkeypatch).aggregate(mgr, names)
    task = await _running(mgr)
    try:
        await (await mgr.get_cluster("east")).client.create(_cm("shared"))
        await eventually(lambda: counts.get("shared") == 1)
        await (await mgr.get_cluster("west")).client.create(_cm("shared"))
        await eventually(lambda: counts.get("shared") == 2)
    finally:
        await _stop(mgr, task)


_PLUGIN = """
import json, os, sys
info = json.loads(os.environ["KUBERNETES_EXEC_INFO"])
token = {"member-a": "token-a", "member-b": "token-b"}[info["spec"]["cluster"]["config"]["clusterName"]]
print(json.dumps({"apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential",
                  "status": {"token": token}}))
"""


async def test_authentication_page_plugin_serves_a_fleet(
    fleet: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sample = _load(_tagged("auth-exec"), "docs_auth_exec", monkeypatch)
    plugin = tmp_path / "plugin.py"
    plugin.write_text(_PLUGIN)
    servers = fleet(2).servers
    for server, token in zip(servers, ("token-a", "token-b"), strict=True):
        server.add_user("robot", groups=["system:masters"], token=token)
    for server, name in zip(servers, ("member-a", "member-b"), strict=True):
        ca = server.kubeconfig["clusters"][0]["cluster"]["certificate-authority-data"]
        config = sample.fleet_member(server.url, ca, name, str(plugin))
        async with mcr.Cluster(config, name=name) as cluster:
            assert await cluster.api_reader.list("v1/Namespace")
    # The wrong cluster name gets no token from the plugin: the error names the member.
    ca = servers[0].kubeconfig["clusters"][0]["cluster"]["certificate-authority-data"]
    config = sample.fleet_member(servers[0].url, ca, "member-z", str(plugin))
    async with mcr.Cluster(config, name="member-z") as cluster:
        with pytest.raises(mcr.ConfigError, match="fleet member member-z"):
            await cluster.api_reader.list("v1/Namespace")


_CLUSTER_PROPERTY_CRD: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {
        "name": "clusterproperties.about.k8s.io",
        # *.k8s.io groups are protected: kube-apiserver wants the approved API's reference
        "annotations": {"api-approved.kubernetes.io": "https://github.com/kubernetes/enhancements/pull/2149"},
    },
    "spec": {
        "group": "about.k8s.io",
        "scope": "Cluster",
        "names": {"plural": "clusterproperties", "singular": "clusterproperty", "kind": "ClusterProperty"},
        "versions": [
            {
                "name": "v1alpha1",
                "served": True,
                "storage": True,
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "properties": {"value": {"type": "string"}, "metadata": {"type": "object"}},
                    }
                },
            }
        ],
    },
}


async def test_cluster_identity_reads_the_clusterset_id_or_falls_back(
    fleet: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    cluster_id = _load(_tagged("cluster-identity"), "docs_cluster_identity", monkeypatch).cluster_id
    with_api, without = fleet(2).servers
    async with mcr.Cluster.from_kubeconfig(with_api.kubeconfig, name="a") as a:
        await a.api_reader.create(_CLUSTER_PROPERTY_CRD)
        prop = {
            "apiVersion": "about.k8s.io/v1alpha1",
            "kind": "ClusterProperty",
            "metadata": {"name": "cluster.clusterset.k8s.io"},
            "value": "cluster-a.fleet.example",
        }

        async def created() -> bool:
            try:
                await a.api_reader.create(prop)
            except (mcr.NoKindMatchError, mcr.NotFoundError):
                return False
            return True

        await eventually(created, message="ClusterProperty served")
        assert await cluster_id(a) == "cluster-a.fleet.example"
    async with mcr.Cluster.from_kubeconfig(without.kubeconfig, name="b") as b:
        uid = (await b.api_reader.get("v1/Namespace", "kube-system"))["metadata"]["uid"]
        assert await cluster_id(b) == uid


async def test_sharding_page_manager_owns_every_cluster_alone(
    fleet: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mcr.sharding import ShardedCoordinator

    sample = _load(_tagged("sharding-manager"), "docs_sharding", monkeypatch)
    host, member = fleet(2).servers
    async with mcr.Cluster(mcr.RestConfig.from_kubeconfig(host.kubeconfig), name="setup") as setup:
        await setup.api_reader.create(
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "my-controller"}}
        )
    provider = ClustersProvider()
    await provider.add("only", mcr.Cluster.from_kubeconfig(member.kubeconfig, name="only"))
    config = mcr.RestConfig.from_kubeconfig(host.kubeconfig)
    mgr = sample.sharded_manager(
        config, provider, "replica-1", metrics_bind_address="0", health_probe_bind_address="0"
    )
    assert isinstance(mgr.coordinator, ShardedCoordinator)
    task = await _running(mgr)
    try:
        # Alone, the replica owns the cluster once its first membership snapshot settled.
        await eventually(
            lambda: (
                [(i.owner, i.running) for i in mgr.clusters() if i.name == "only"] == [("replica-1", True)]
            ),
            timeout=20,
        )
    finally:
        await _stop(mgr, task)
