"""Informers under injected watch faults: streams cut after a few events, in-stream ERROR events,
malformed lines and dropped connections. Whatever the fault, the cache ends equal to the server
and every change reaches the handlers."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from mcr.cache import BackoffPolicy, CacheOptions, InformerCache
from mcr.client import Client
from mcr.rest.config import load_config
from mcr.rest.mapper import RESTMapper
from mcr.testing import eventually, open_sockets

pytestmark = pytest.mark.envtest_only(
    "every test injects a watch fault (cut, in-stream ERROR, reset, malformed line) through srv.faults"
)

CM = "v1/ConfigMap"
FAST = BackoffPolicy(initial=0.02, cap=0.1, jitter=0.1)


class Seen:
    """Handler recording every (name, resourceVersion) it is given."""

    def __init__(self) -> None:
        self.versions: dict[str, list[str]] = {}

    def _note(self, obj: dict[str, Any]) -> None:
        md = obj["metadata"]
        self.versions.setdefault(md["name"], []).append(md["resourceVersion"])

    def on_add(self, obj: dict[str, Any], is_initial_list: bool) -> None:
        self._note(obj)

    def on_update(self, old: dict[str, Any], new: dict[str, Any]) -> None:
        self._note(new)

    def on_delete(self, obj: Any) -> None:
        pass


@pytest.fixture
async def env(apiserver: Any) -> AsyncIterator[tuple[Any, Client, Callable[[], InformerCache]]]:
    sockets = open_sockets()
    transport = load_config(apiserver.kubeconfig).transport("faults")
    mapper = RESTMapper(transport)
    caches: list[InformerCache] = []

    def cache() -> InformerCache:
        c = InformerCache(transport, mapper, CacheOptions(backoff=FAST, stall_timeout=5.0))
        caches.append(c)
        return c

    try:
        yield apiserver, Client(transport, rest_mapper=mapper), cache
    finally:
        for c in caches:
            await c.stop()
        await transport.close()
        await eventually(lambda: open_sockets() <= sockets, message="a connection stayed open")


async def server_state(client: Client) -> dict[str, str]:
    return {
        o["metadata"]["name"]: o["metadata"]["resourceVersion"]
        for o in await client.list(CM, namespace="default")
    }


async def churn(client: Client, n: int) -> None:
    """Create ``n`` ConfigMaps and update each once."""
    for i in range(n):
        await client.create(
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"c{i}", "namespace": "default"}}
        )
    for i in range(n):
        await client.patch(CM, f"c{i}", {"data": {"v": "2"}}, namespace="default")


async def run_scenario(
    env: Any, arm: Callable[[Any], None], n: int = 8, *, every_version: bool = True, timeout: float = 10
) -> tuple[Any, Seen]:
    """Sync an informer, arm a fault, change ``n`` objects twice each; the cache must converge
    and (``every_version``) the handler must have seen both versions of each object (a relist
    hands over only the latest)."""
    srv, client, make_cache = env
    cache = make_cache()
    await cache.start()
    informer = await cache.get_informer(CM)
    seen = Seen()
    informer.add_event_handler(seen)
    assert await informer.wait_for_sync(10)
    arm(srv.faults)
    await churn(client, n)

    async def converged() -> bool:
        want = await server_state(client)
        got = {o["metadata"]["name"]: o["metadata"]["resourceVersion"] for o in informer.list("default")}
        assert got == want
        return True

    await eventually(converged, timeout=timeout, message="cache equals the server")
    srv.faults.clear()
    state = await server_state(client)
    for i in range(n):
        versions = seen.versions[f"c{i}"]
        assert versions[-1] == state[f"c{i}"]
        if every_version:  # each object's creation and its update, nothing skipped
            assert len(versions) == 2, versions
    return informer, seen


async def test_cut_streams_resume_without_relisting(env: Any) -> None:
    informer, _ = await run_scenario(env, lambda f: f.cut_watches_after(1))
    (reflector,) = informer.reflectors
    assert reflector.lists == 1  # resumed from its last resourceVersion every time
    assert reflector.watches >= 8


async def test_in_stream_error_events(env: Any) -> None:
    informer, _ = await run_scenario(env, lambda f: f.error_watches(after=1, status=500, count=None))
    (reflector,) = informer.reflectors
    assert reflector.watches >= 8


async def test_in_stream_expired_relists(env: Any) -> None:
    informer, _ = await run_scenario(
        env, lambda f: f.error_watches(after=2, status=410, count=3), every_version=False
    )
    (reflector,) = informer.reflectors
    assert reflector.lists >= 2


async def test_connection_resets(env: Any) -> None:
    informer, _ = await run_scenario(env, lambda f: f.reset_watches_after(1, count=None))
    (reflector,) = informer.reflectors
    assert reflector.watches >= 8


async def test_malformed_watch_lines(env: Any) -> None:
    await run_scenario(env, lambda f: f.malform_watches(after=1, count=3), timeout=5)
