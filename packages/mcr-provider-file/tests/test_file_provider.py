"""FileProvider against kubeconfig files for a fleet of envtest servers."""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

import mcr.providers
from mcr.errors import ClusterNotFoundError
from mcr.multicluster import Provider, ProviderRunnable
from mcr.testing import RecordingAware, check_provider, eventually, providers_started
from mcr_provider_file import DEFAULT_GLOBS, FileProvider, Problem


@pytest.fixture
def servers(fleet: Any) -> list[Any]:
    return list(fleet(3).servers)


@pytest.fixture
async def run() -> AsyncIterator[Callable[[FileProvider], RecordingAware]]:
    """Start providers with a RecordingAware each; cancelled and awaited at the end of the test."""
    async with providers_started() as start:
        yield start


def test_implements_the_protocols(tmp_path: Path) -> None:
    provider = FileProvider(directories=[tmp_path])
    assert isinstance(provider, Provider)
    assert isinstance(provider, ProviderRunnable)
    assert provider.globs == list(DEFAULT_GLOBS)
    assert provider.poll_interval == 2.0
    assert provider.separator == "+"


async def test_conformance(
    tmp_path: Path, servers: list[Any], kubeconfig_for: Any, write_atomic: Any
) -> None:
    provider = FileProvider(directories=[tmp_path], poll_interval=0.05)
    counter = itertools.count()
    files: dict[str, Path] = {}

    async def add() -> str:
        n = next(counter)
        path = write_atomic(tmp_path / f"c{n}.kubeconfig", kubeconfig_for(servers[n % 3], context="ctx"))
        name = f"{path}+ctx"
        files[name] = path
        return name

    async def change(name: str) -> None:
        # Same file and context, another server: the cluster must be rebuilt and re-engaged.
        current = (await provider.get(name)).config.host
        other = next(s for s in servers if s.url != current)
        write_atomic(files[name], kubeconfig_for(other, context="ctx"))

    async def remove(name: str) -> None:
        files.pop(name).unlink()

    write_atomic(tmp_path / "kubeconfig.yaml", kubeconfig_for(servers[0], context="first"))
    await check_provider(
        provider,
        existing=[f"{tmp_path / 'kubeconfig.yaml'}+first"],
        add_cluster=add,
        change_cluster=change,
        remove_cluster=remove,
    )
    assert provider.problems() == []


async def test_one_cluster_per_context_named_path_plus_context(
    tmp_path: Path, servers: list[Any], kubeconfig_for: Any, merged: Any, write_atomic: Any, run: Any
) -> None:
    path = write_atomic(tmp_path / "fleet.kubeconfig", merged(*(kubeconfig_for(s) for s in servers)))
    write_atomic(tmp_path / "ignored.yaml", kubeconfig_for(servers[0]))  # matches no glob
    provider = FileProvider(directories=[tmp_path], poll_interval=3600)
    aware = run(provider)
    contexts = [s.kubeconfig["current-context"] for s in servers]
    names = {f"{path}+{c}": s for c, s in zip(contexts, servers, strict=True)}
    await eventually(lambda: set(aware.engaged) == set(names), message="one cluster per context")
    for name, server in names.items():
        cluster = await provider.get(name)
        assert cluster.config.host == server.url
        # The cluster really talks to its own server.
        namespaces = await cluster.api_reader.list("v1/Namespace")
        assert {ns["metadata"]["name"] for ns in namespaces} >= {"default"}
    assert provider.cluster_name(path, contexts[0]) in names
    with pytest.raises(ClusterNotFoundError, match="file provider"):
        await provider.get("")


async def test_separator_and_explicit_files_and_path_globs(
    tmp_path: Path, servers: list[Any], kubeconfig_for: Any, write_atomic: Any, run: Any
) -> None:
    a = write_atomic(tmp_path / "a.conf", kubeconfig_for(servers[0], context="x"))
    (tmp_path / "sub").mkdir()
    b = write_atomic(tmp_path / "sub" / "b.conf", kubeconfig_for(servers[1], context="x"))
    provider = FileProvider(
        kubeconfigs=[a, tmp_path / "sub" / "*.conf", tmp_path / "missing.conf"], separator="@"
    )
    aware = run(provider)
    await eventually(lambda: set(aware.engaged) == {f"{a}@x", f"{b}@x"})


async def test_files_appear_change_and_vanish(
    tmp_path: Path, servers: list[Any], kubeconfig_for: Any, merged: Any, write_atomic: Any, run: Any
) -> None:
    provider = FileProvider(directories=[tmp_path], poll_interval=3600)  # refreshed by hand below
    aware = run(provider)
    path = tmp_path / "two.kubeconfig"
    write_atomic(path, merged(kubeconfig_for(servers[0], "a"), kubeconfig_for(servers[1], "b")))
    await provider.refresh()
    await eventually(lambda: set(aware.engaged) == {f"{path}+a", f"{path}+b"})
    a, b = aware.engaged[f"{path}+a"], aware.engaged[f"{path}+b"]

    # Touching the file (new mtime, same content) re-engages nothing.
    os.utime(path, ns=(1, 1))
    await provider.refresh()
    assert aware.engaged == {f"{path}+a": a, f"{path}+b": b}

    # Re-pointing context b re-engages b only.
    write_atomic(path, merged(kubeconfig_for(servers[0], "a"), kubeconfig_for(servers[2], "b")))
    await provider.refresh()
    await eventually(lambda: aware.engaged.get(f"{path}+b") not in (None, b))
    assert aware.engaged[f"{path}+a"] is a
    assert (await provider.get(f"{path}+b")).config.host == servers[2].url
    assert [e.ended for e in aware.engagements(f"{path}+b")] == [True, False]

    # Removing the file disengages both.
    path.unlink()
    await provider.refresh()
    await eventually(lambda: aware.engaged == {})
    assert all(e.ended for e in aware.history)
    assert provider.names() == []


async def test_polling_notices_changes_without_refresh(
    tmp_path: Path, servers: list[Any], kubeconfig_for: Any, write_atomic: Any, run: Any
) -> None:
    provider = FileProvider(directories=[tmp_path], poll_interval=0.05, watch=False)
    aware = run(provider)
    path = write_atomic(tmp_path / "late.kubeconfig", kubeconfig_for(servers[0], "c"))
    await eventually(lambda: f"{path}+c" in aware.engaged, message="new file picked up by polling")
    assert not provider.watching
    path.unlink()
    await eventually(lambda: aware.engaged == {}, message="removed file noticed by polling")


async def test_notifications_notice_changes_without_polling(
    tmp_path: Path, servers: list[Any], kubeconfig_for: Any, write_atomic: Any
) -> None:
    # Polling and resync are an hour away: only file-system notifications can explain a reaction.
    provider = FileProvider(directories=[tmp_path], poll_interval=3600, resync_interval=3600)
    aware = RecordingAware()
    task = asyncio.create_task(provider.start(aware))
    try:
        await eventually(lambda: provider.watching, message="watching the directory")
        path = write_atomic(tmp_path / "new.kubeconfig", kubeconfig_for(servers[0], "c"))
        await eventually(lambda: f"{path}+c" in aware.engaged, message="new file noticed")
        first = aware.engaged[f"{path}+c"]
        write_atomic(path, kubeconfig_for(servers[1], "c"))
        await eventually(
            lambda: aware.engaged.get(f"{path}+c") not in (None, first), message="change noticed"
        )
        path.unlink()
        await eventually(lambda: aware.engaged == {}, message="removal noticed")
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    assert not provider.watching


async def test_mounted_secret_updates_are_noticed(
    tmp_path: Path, servers: list[Any], kubeconfig_for: Any, run: Any
) -> None:
    """A Secret volume is updated by swapping the ``..data`` symlink to a new timestamped directory."""
    mount = tmp_path / "mount"
    mount.mkdir()

    def publish(version: int, server: Any) -> None:
        data = mount / f"..2026_{version}"
        data.mkdir()
        (data / "fleet.kubeconfig").write_text(yaml.safe_dump(kubeconfig_for(server, "c")))
        tmp_link = mount / "..data_tmp"
        tmp_link.symlink_to(data.name)
        os.replace(tmp_link, mount / "..data")  # atomic, as the kubelet does

    publish(1, servers[0])
    (mount / "fleet.kubeconfig").symlink_to("..data/fleet.kubeconfig")
    provider = FileProvider(directories=[mount], poll_interval=3600, resync_interval=3600)
    aware = run(provider)
    name = f"{mount / 'fleet.kubeconfig'}+c"
    await eventually(lambda: name in aware.engaged)
    first = aware.engaged[name]
    await eventually(lambda: provider.watching)
    publish(2, servers[1])
    await eventually(lambda: aware.engaged.get(name) not in (None, first), message="swap noticed")
    assert aware.engaged[name].config.host == servers[1].url


async def test_missing_sources_are_reported_and_used_once_they_appear(
    tmp_path: Path,
    servers: list[Any],
    kubeconfig_for: Any,
    write_atomic: Any,
    run: Any,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="mcr.providers.file")
    typo_dir = tmp_path / "flet"
    typo_file = tmp_path / "prod.kubeconfg"
    provider = FileProvider(kubeconfigs=[typo_file], directories=[typo_dir], poll_interval=0.05)
    aware = run(provider)
    await eventually(lambda: len(provider.problems()) == 2, message="missing sources reported")
    assert {(p.path, p.reason) for p in provider.problems()} == {
        (str(typo_dir), "directory does not exist (yet)"),
        (str(typo_file), "file does not exist (yet)"),
    }
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any(str(typo_dir) in m and "does not exist" in m for m in warnings), warnings
    assert any(str(typo_file) in m and "does not exist" in m for m in warnings), warnings
    await asyncio.sleep(0.2)  # several polls: each problem is still logged once
    assert sum(str(typo_dir) in r.getMessage() for r in caplog.records) == 1

    typo_dir.mkdir()
    path = write_atomic(typo_dir / "a.kubeconfig", kubeconfig_for(servers[0], "a"))
    write_atomic(typo_file, kubeconfig_for(servers[1], "b"))
    await eventually(lambda: set(aware.engaged) == {f"{path}+a", f"{typo_file}+b"})
    await eventually(lambda: provider.problems() == [] and provider.watching)


async def test_without_watchfiles_it_polls(
    tmp_path: Path,
    servers: list[Any],
    kubeconfig_for: Any,
    write_atomic: Any,
    run: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "watchfiles", None)  # as if it could not be imported
    provider = FileProvider(directories=[tmp_path], poll_interval=0.05)
    aware = run(provider)
    path = write_atomic(tmp_path / "late.kubeconfig", kubeconfig_for(servers[0], "c"))
    await eventually(lambda: f"{path}+c" in aware.engaged, message="noticed by polling")
    assert not provider.watching


async def test_bad_files_are_reported_and_leave_others_engaged(
    tmp_path: Path,
    servers: list[Any],
    kubeconfig_for: Any,
    merged: Any,
    write_atomic: Any,
    run: Any,
    caplog: pytest.LogCaptureFixture,
) -> None:
    good = write_atomic(tmp_path / "good.kubeconfig", kubeconfig_for(servers[0], "good"))
    directory_as_file = tmp_path / "dir.kubeconfig"
    directory_as_file.mkdir()
    provider = FileProvider(kubeconfigs=[directory_as_file], directories=[tmp_path], poll_interval=3600)
    caplog.set_level(logging.INFO, logger="mcr.providers.file")
    aware = run(provider)
    await eventually(lambda: f"{good}+good" in aware.engaged)
    engaged_good = aware.engaged[f"{good}+good"]

    malformed = write_atomic(
        tmp_path / "malformed.kubeconfig", "clusters: [\n  - name: x\n    cluster: {server: "
    )
    not_a_mapping = write_atomic(tmp_path / "list.kubeconfig", "- just\n- a list\n")
    dangling = kubeconfig_for(servers[1], "dangling")
    dangling["contexts"][0]["context"]["cluster"] = "nowhere"
    partly = write_atomic(
        tmp_path / "partly.kubeconfig", merged(dangling, kubeconfig_for(servers[2], "fine"))
    )
    no_user = kubeconfig_for(servers[1], "nouser")
    no_user["users"] = []
    nouser = write_atomic(tmp_path / "nouser.kubeconfig", no_user)
    bad_ca = kubeconfig_for(servers[1], "badca")
    cluster_entry = bad_ca["clusters"][0]["cluster"]
    del cluster_entry["certificate-authority-data"]
    cluster_entry["certificate-authority"] = "certs/missing-ca.crt"  # relative to the kubeconfig
    badca = write_atomic(tmp_path / "badca.kubeconfig", bad_ca)
    await provider.refresh()

    problems = {(p.path, p.context): p.reason for p in provider.problems()}
    assert problems[(str(malformed), None)].startswith("malformed YAML at line ")
    assert "not a mapping" in problems[(str(not_a_mapping), None)]
    assert problems[(str(partly), "dangling")] == "refers to cluster 'nowhere-0', which is not defined"
    assert "refers to user" in problems[(str(nouser), "nouser")]
    assert problems[(str(directory_as_file), None)] == "is not a regular file"
    ca_reason = problems[(str(badca), "badca")]
    assert "certificate-authority" in ca_reason
    assert len(problems) == 6
    # Each is logged once, naming the file; credentials never appear.
    for p in provider.problems():
        assert sum(str(p) in r.getMessage() for r in caplog.records) == 1
    for server in servers:
        assert server.admin_token not in caplog.text

    # The good file's cluster is untouched, and the good context of a partly bad file is engaged.
    await eventually(lambda: f"{partly}+fine" in aware.engaged)
    assert aware.engaged[f"{good}+good"] is engaged_good
    assert [e.ended for e in aware.engagements(f"{good}+good")] == [False]
    assert set(aware.engaged) == {f"{good}+good", f"{partly}+fine"}

    # A refresh with nothing changed reports nothing again.
    before = len(caplog.records)
    await provider.refresh()
    assert len(caplog.records) == before

    # Fixing a file resolves its problem and engages its cluster.
    write_atomic(malformed, kubeconfig_for(servers[1], "fixed"))
    await provider.refresh()
    await eventually(lambda: f"{malformed}+fixed" in aware.engaged)
    assert str(malformed) not in {p.path for p in provider.problems()}
    assert any("resolved" in r.getMessage() and str(malformed) in r.getMessage() for r in caplog.records)


async def test_file_turning_bad_keeps_its_last_good_clusters(
    tmp_path: Path, servers: list[Any], kubeconfig_for: Any, write_atomic: Any, run: Any
) -> None:
    path = write_atomic(tmp_path / "flaky.kubeconfig", kubeconfig_for(servers[0], "c"))
    provider = FileProvider(directories=[tmp_path], poll_interval=3600)
    aware = run(provider)
    await eventually(lambda: f"{path}+c" in aware.engaged)
    cluster = aware.engaged[f"{path}+c"]
    write_atomic(path, "{{{ half written")
    await provider.refresh()
    assert provider.problems() == [Problem(str(path), None, provider.problems()[0].reason)]
    assert aware.engaged[f"{path}+c"] is cluster  # not flapped
    path.unlink()
    await provider.refresh()
    await eventually(lambda: aware.engaged == {})
    assert provider.problems() == []


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads files whatever their mode")
async def test_unreadable_file(
    tmp_path: Path, servers: list[Any], kubeconfig_for: Any, write_atomic: Any, run: Any
) -> None:
    good = write_atomic(tmp_path / "good.kubeconfig", kubeconfig_for(servers[0], "good"))
    locked = write_atomic(tmp_path / "locked.kubeconfig", kubeconfig_for(servers[1], "locked"))
    locked.chmod(0)
    provider = FileProvider(directories=[tmp_path], poll_interval=3600)
    aware = run(provider)
    await eventually(lambda: f"{good}+good" in aware.engaged)
    assert [(p.path, p.reason) for p in provider.problems()] == [
        (str(locked), "cannot be read: Permission denied")
    ]


@pytest.mark.skipif(not os.path.isfile("/proc/self/mem"), reason="needs Linux procfs")
async def test_file_whose_read_fails(
    tmp_path: Path, servers: list[Any], kubeconfig_for: Any, write_atomic: Any, run: Any
) -> None:
    # /proc/self/mem is a regular file whose read fails (EIO) even for root.
    good = write_atomic(tmp_path / "good.kubeconfig", kubeconfig_for(servers[0], "good"))
    provider = FileProvider(kubeconfigs=["/proc/self/mem"], directories=[tmp_path], poll_interval=3600)
    aware = run(provider)
    await eventually(lambda: f"{good}+good" in aware.engaged)
    assert [(p.path, p.context, p.reason) for p in provider.problems()] == [
        ("/proc/self/mem", None, "cannot be read: Input/output error")
    ]


async def test_defaults_follow_upstream(
    tmp_path: Path,
    servers: list[Any],
    kubeconfig_for: Any,
    write_atomic: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    a = write_atomic(tmp_path / "a", kubeconfig_for(servers[0]))
    b = write_atomic(tmp_path / "b", kubeconfig_for(servers[1]))
    monkeypatch.setenv("KUBECONFIG", f"{a}{os.pathsep}{os.pathsep}{b}")
    provider = FileProvider()
    assert provider.kubeconfigs == [str(a), str(b)]
    assert provider.directories == []

    monkeypatch.delenv("KUBECONFIG")
    home = tmp_path / "home"
    monkeypatch.setenv("HOME", str(home))
    (home / ".kube").mkdir(parents=True)
    write_atomic(home / ".kube" / "config", "x")
    assert FileProvider().kubeconfigs == [str(home / ".kube" / "config")]

    (home / ".kube" / "config").unlink()
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    provider = FileProvider()
    assert (provider.kubeconfigs, provider.directories) == ([], [str(work)])


async def test_defaults_engage_kubeconfig_env(
    tmp_path: Path,
    servers: list[Any],
    kubeconfig_for: Any,
    write_atomic: Any,
    run: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    a = write_atomic(tmp_path / "one", kubeconfig_for(servers[0], "one"))
    b = write_atomic(tmp_path / "two", kubeconfig_for(servers[1], "two"))
    monkeypatch.setenv("KUBECONFIG", f"{a}{os.pathsep}{b}")
    aware = run(FileProvider())
    await eventually(lambda: set(aware.engaged) == {f"{a}+one", f"{b}+two"})


def test_invalid_options(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="poll_interval must be positive"):
        FileProvider(directories=[tmp_path], poll_interval=0)
    with pytest.raises(ValueError, match="separator"):
        FileProvider(directories=[tmp_path], separator="")
    with pytest.raises(ValueError, match="resync_interval"):
        FileProvider(directories=[tmp_path], resync_interval=-1)


def test_interval_is_the_deprecated_name_of_poll_interval(tmp_path: Path) -> None:
    with pytest.warns(DeprecationWarning, match="use poll_interval"):
        provider = FileProvider(directories=[tmp_path], interval=0.5)
    assert provider.poll_interval == 0.5
    assert provider.interval == 0.5
    with pytest.raises(TypeError, match="not both"):
        FileProvider(directories=[tmp_path], interval=0.5, poll_interval=1)


def test_registered_as_plugin(tmp_path: Path) -> None:
    provider = mcr.providers.create("file", directories=[tmp_path], poll_interval=1.5)
    assert isinstance(provider, FileProvider)
    assert provider.poll_interval == 1.5
    info = {i.name: i for i in mcr.providers.available()}["file"]
    assert (info.distribution, info.version, info.plugin) == ("mcr-provider-file", "0.1.0", "file")
