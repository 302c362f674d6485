"""KubeconfigProvider against a host and member mcr-envtest servers over HTTPS."""

from __future__ import annotations

import asyncio
import itertools
import logging
from pathlib import Path
from typing import Any

import pytest
import yaml

import mcr
import mcr.plugins
import mcr.providers
from mcr.errors import ClusterNotFoundError
from mcr.multicluster import Provider, ProviderRunnable
from mcr.testing import check_provider, eventually
from mcr_provider_kubeconfig import DEFAULT_LABEL, KubeconfigProvider, __version__, kubeconfig_secret

from .conftest import Host


def reasons(provider: KubeconfigProvider) -> dict[str, str]:
    return {p.cluster: str(p) for p in provider.problems()}


def test_options_and_registration() -> None:
    with pytest.raises(ValueError, match="needs the namespace"):
        KubeconfigProvider("")
    provider = KubeconfigProvider("fleet")
    assert isinstance(provider, Provider)
    assert isinstance(provider, ProviderRunnable)
    assert (provider.label, provider.key, provider.controller_name) == (
        "sigs.k8s.io/multicluster-runtime-kubeconfig",
        "kubeconfig",
        "kubeconfig-provider-fleet",
    )
    with pytest.raises(
        ValueError, match=r"label 'not a key' is not a valid label key: the name 'not a key' must"
    ):
        KubeconfigProvider("fleet", label="not a key")
    with pytest.raises(ValueError, match=r"label 'Example.com/x' is not a valid label key: the prefix"):
        KubeconfigProvider("fleet", label="Example.com/x")
    entry = mcr.plugins.load_registry().info("kubeconfig")
    assert (entry.distribution, entry.version) == ("mcr-provider-kubeconfig", __version__)
    built = mcr.providers.create("kubeconfig", namespace="fleet", key="config")
    assert isinstance(built, KubeconfigProvider)
    assert built.key == "config"
    secret = kubeconfig_secret("a", "fleet", "apiVersion: v1\n")
    assert secret["metadata"]["labels"] == {DEFAULT_LABEL: "true"}
    assert secret["data"] == {"kubeconfig": "YXBpVmVyc2lvbjogdjEK"}


async def test_engage_reengage_on_change_only_and_disengage(
    host: Host, run: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="mcr.providers.kubeconfig")
    await host.put("a", host.members[1].kubeconfig)
    provider = KubeconfigProvider("fleet", cluster=host.admin)
    aware = run(provider)
    await eventually(lambda: "a" in aware.engaged, message="a engaged")
    a = aware.engaged["a"]
    assert a.config.host == host.members[1].url
    assert await provider.get("a") is a
    assert await a.api_reader.list("v1/Namespace")

    # Annotation and label edits: same cluster. Unlabelled Secrets of the namespace are ignored.
    await host.put("a", host.members[1].kubeconfig, annotations={"note": "rotated soon"})
    await host.admin.api_reader.create(
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "unrelated", "namespace": "fleet"},
            "data": {"kubeconfig": ""},
        }
    )
    await host.put("b", host.members[2].kubeconfig)  # a later event: the earlier ones are processed
    await eventually(lambda: "b" in aware.engaged)
    assert aware.engaged["a"] is a
    assert len(aware.engagements("a")) == 1
    assert "unrelated" not in aware.engaged
    assert provider.problems() == []

    # A new kubeconfig (another server): re-engaged with a new cluster object.
    await host.put("a", host.members[3].kubeconfig)
    await eventually(lambda: aware.engaged.get("a") not in (None, a), message="a re-engaged")
    assert aware.engaged["a"].config.host == host.members[3].url
    assert all(e.ended for e in aware.engagements("a") if e.cluster is a)

    # Deleted, and unlabelled: disengaged.
    await host.delete("a")
    await host.unlabel("b")
    await eventually(lambda: aware.engaged == {}, message="both disengaged")
    with pytest.raises(ClusterNotFoundError):
        await provider.get("a")
    messages = [r.getMessage() for r in caplog.records]
    assert any("disengaging cluster 'a': Secret fleet/a was deleted" in m for m in messages), messages


async def test_a_broken_kubeconfig_next_to_a_good_one(
    host: Host, run: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """Under a manager: bad Secrets are reported by name; the good cluster keeps reconciling."""
    good = host.members[1]
    await host.put("good", good.kubeconfig)
    await host.put("malformed", b"clusters: [\n  - {")
    await host.put("empty", None)
    no_context = dict(good.kubeconfig)
    no_context.pop("current-context")
    await host.put("no-context", no_context)
    token = good.kubeconfig["users"][0]["user"]["token"]
    caplog.set_level(logging.DEBUG)
    provider = KubeconfigProvider("fleet", cluster=host.admin)
    seen: set[tuple[str, str]] = set()

    async def reconcile(req: mcr.Request) -> None:
        seen.add((req.cluster_name, req.name))

    mgr = mcr.Manager(provider=provider, metrics_bind_address="0", health_probe_bind_address="0")
    mcr.controller_managed_by(mgr).named("kubeconfig-test").for_("v1/ConfigMap").complete(reconcile)
    runner = asyncio.create_task(mgr.start(handle_signals=False))
    try:
        await eventually(lambda: len(provider.problems()) == 3, message="three Secrets reported")
        found = reasons(provider)
        assert "Secret fleet/malformed key 'kubeconfig'" in found["malformed"]
        assert "malformed YAML" in found["malformed"]
        assert (
            found["empty"]
            == "Secret fleet/empty key 'kubeconfig' (cluster 'empty'): missing or empty: no kubeconfig"
        )
        assert "current-context" in found["no-context"]
        await eventually(lambda: "good" in provider.names())
        cluster = await provider.get("good")
        await cluster.client.create(
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "hello", "namespace": "default"}}
        )
        await eventually(lambda: ("good", "hello") in seen)
        # Fixing a Secret engages it; the good one is untouched.
        await host.put("empty", host.members[2].kubeconfig)
        await eventually(lambda: "empty" in provider.names())
        assert set(reasons(provider)) == {"malformed", "no-context"}
        assert await provider.get("good") is cluster
    finally:
        mgr.stop()
        await asyncio.wait_for(runner, 30)
    assert caplog.records, "the provider logged what it did"
    assert not any(token in r.getMessage() for r in caplog.records), "a credential reached the log"


async def test_custom_label_key_and_two_providers_side_by_side(host: Host, run: Any) -> None:
    await host.put("a", host.members[1].kubeconfig)
    other = kubeconfig_secret("b", "fleet", b"", label="example.com/cluster", key="config")
    other["data"]["config"] = kubeconfig_secret("x", "fleet", yaml.safe_dump(host.members[2].kubeconfig))[
        "data"
    ]["kubeconfig"]
    await host.admin.api_reader.create(other)
    default = run(KubeconfigProvider("fleet", cluster=host.admin))
    custom = run(
        KubeconfigProvider(
            "fleet", label="example.com/cluster", key="config", controller_name="custom", cluster=host.admin
        )
    )
    await eventually(lambda: set(default.engaged) == {"a"} and set(custom.engaged) == {"b"})
    assert custom.engaged["b"].config.host == host.members[2].url


async def test_conformance(host: Host) -> None:
    provider = KubeconfigProvider("fleet", cluster=host.admin)
    counter = itertools.count()
    await host.put("existing", host.members[1].kubeconfig)

    async def add() -> str:
        name = f"c{next(counter)}"
        await host.put(name, host.members[2].kubeconfig)
        return name

    async def change(name: str) -> None:
        await host.put(name, host.members[3].kubeconfig)

    await check_provider(
        provider, existing=["existing"], add_cluster=add, change_cluster=change, remove_cluster=host.delete
    )


async def test_kubeconfigs_from_secrets_may_not_use_the_controllers_own_credentials(
    host: Host, run: Any, tmp_path: Path
) -> None:
    """An exec plugin or a token file in a Secret would run commands in, or read files of, the
    controller: refused unless allow_local_credentials=True."""
    good = host.members[1].kubeconfig
    exec_user = yaml.safe_load(yaml.safe_dump(good))
    exec_user["users"][0]["user"] = {
        "exec": {"apiVersion": "client.authentication.k8s.io/v1", "command": "/bin/sh", "args": ["-c", "id"]}
    }
    token_file = yaml.safe_load(yaml.safe_dump(good))
    secret_token = tmp_path / "token"  # stands for the controller's own ServiceAccount token
    secret_token.write_text(good["users"][0]["user"]["token"])
    token_file["users"][0]["user"] = {"tokenFile": str(secret_token)}
    await host.put("runs-a-command", exec_user)
    await host.put("reads-a-file", token_file)
    await host.put("fine", good)
    provider = KubeconfigProvider("fleet", cluster=host.admin)
    aware = run(provider)
    await eventually(lambda: len(provider.problems()) == 2 and "fine" in aware.engaged)
    found = reasons(provider)
    assert "uses an exec plugin" in found["runs-a-command"]
    assert "uses a token file" in found["reads-a-file"]
    trusting = KubeconfigProvider(
        "fleet", cluster=host.admin, controller_name="trusting", allow_local_credentials=True
    )
    trusted = run(trusting)
    await eventually(lambda: {"runs-a-command", "reads-a-file", "fine"} <= set(trusted.engaged))
