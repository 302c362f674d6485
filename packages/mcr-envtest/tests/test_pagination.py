"""Paginated lists: every page is served at the first page's RV from a cached snapshot, writes
between pages do not leak into later pages, and an expired snapshot answers 410 like before."""

from __future__ import annotations

from typing import Any

import pytest

from mcr_envtest import ServerThread

from .conftest import Raw

CM = "/api/v1/namespaces/default/configmaps"
ALL_CM = "/api/v1/configmaps"


def _summary(items: list[dict[str, Any]]) -> list[tuple[str, str, str, Any, Any]]:
    return [
        (
            i["metadata"].get("namespace", ""),
            i["metadata"]["name"],
            i["metadata"]["resourceVersion"],
            (i["metadata"].get("labels") or {}).get("tier"),
            i.get("data"),
        )
        for i in items
    ]


async def _cm(raw: Raw, ns: str, name: str, tier: str, v: str = "0") -> None:
    status, body = await raw.json(
        "POST",
        f"/api/v1/namespaces/{ns}/configmaps",
        json={"metadata": {"name": name, "labels": {"tier": tier}}, "data": {"v": v}},
    )
    assert status == 201, body


async def _page_all(
    raw: Raw, path: str, query: str, limit: int, between: list[Any]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Read every page; before page n (n >= 1) await ``between[n-1]()`` if present."""
    items: list[dict[str, Any]] = []
    metas: list[dict[str, Any]] = []
    token = ""
    n = 0
    while True:
        q = f"{query}&limit={limit}" + (f"&continue={token}" if token else "")
        status, page = await raw.json("GET", f"{path}?{q}")
        assert status == 200, page
        assert len(page["items"]) <= limit
        items.extend(page["items"])
        metas.append(page["metadata"])
        token = page["metadata"].get("continue", "")
        if not token:
            return items, metas
        if n < len(between):
            await between[n]()
        n += 1


@pytest.mark.parametrize("cache_size", [8, 0], ids=["cached", "uncached"])
@pytest.mark.envtest_only("tests mcr-envtest's list snapshot cache through its store")
async def test_pages_stay_at_first_page_rv_while_writes_happen(
    apiserver: ServerThread, raw: Raw, cache_size: int
) -> None:
    apiserver.call(lambda: setattr(apiserver.store, "list_cache_size", cache_size))
    status, _ = await raw.json("POST", "/api/v1/namespaces", json={"metadata": {"name": "pages"}})
    assert status == 201
    for i in range(12):
        await _cm(raw, "default", f"d{i:02}", "web" if i % 2 else "db")
        await _cm(raw, "pages", f"p{i:02}", "web" if i % 3 else "db")
    status, full = await raw.json("GET", ALL_CM)
    assert status == 200
    expected = _summary(full["items"])
    rv0 = full["metadata"]["resourceVersion"]

    async def writes_late() -> None:  # touches objects on later pages and adds/deletes some
        status, _ = await raw.json("DELETE", "/api/v1/namespaces/pages/configmaps/p10")
        assert status == 200
        status, _ = await raw.json(
            "PUT", f"{CM}/d11", json={"metadata": {"name": "d11"}, "data": {"v": "changed"}}
        )
        assert status == 200
        await _cm(raw, "pages", "p05x", "web")
        await _cm(raw, "default", "d99", "web")

    async def writes_early() -> None:  # touches objects already returned
        status, _ = await raw.json("DELETE", f"{CM}/d00")
        assert status == 200
        await _cm(raw, "default", "a00", "web")

    async def writes_more() -> None:
        status, _ = await raw.json("DELETE", "/api/v1/namespaces/pages/configmaps/p11")
        assert status == 200
        await _cm(raw, "pages", "p10", "db", "recreated")

    items, metas = await _page_all(raw, ALL_CM, "", 5, [writes_late, writes_early, writes_more])
    assert _summary(items) == expected
    assert {m["resourceVersion"] for m in metas} == {rv0}
    for n, m in enumerate(metas):
        seen = min(len(expected), 5 * (n + 1))
        if "continue" in m:
            assert m["remainingItemCount"] == len(expected) - seen
        else:
            assert seen == len(expected)
    # a new list sees the writes
    status, now = await raw.json("GET", ALL_CM)
    names = {i["metadata"]["name"] for i in now["items"]}
    assert {"a00", "d99", "p05x", "p10"} <= names
    assert not {"d00", "p11"} & names
    assert now["metadata"]["resourceVersion"] != rv0


@pytest.mark.parametrize("cache_size", [8, 0], ids=["cached", "uncached"])
@pytest.mark.envtest_only("tests mcr-envtest's list snapshot cache through its store")
async def test_selector_pages_use_labels_at_first_page_rv(
    apiserver: ServerThread, raw: Raw, cache_size: int
) -> None:
    apiserver.call(lambda: setattr(apiserver.store, "list_cache_size", cache_size))
    for i in range(10):
        await _cm(raw, "default", f"s{i}", "web" if i % 2 else "db")
    status, first = await raw.json("GET", f"{CM}?labelSelector=tier%3Dweb&limit=2")
    assert status == 200
    assert [i["metadata"]["name"] for i in first["items"]] == ["s1", "s3"]
    assert "remainingItemCount" not in first["metadata"]  # not counted for a selector, as upstream
    # the same RV with another selector is its own snapshot
    status, db_first = await raw.json("GET", f"{CM}?labelSelector=tier%3Ddb&limit=2")
    assert db_first["metadata"]["resourceVersion"] == first["metadata"]["resourceVersion"]
    assert [i["metadata"]["name"] for i in db_first["items"]] == ["s0", "s2"]
    assert "remainingItemCount" not in db_first["metadata"]
    # relabel later objects both ways: the next pages still show the labels at the first page's RV
    for name, tier in (("s5", "db"), ("s6", "web"), ("s9", "db")):
        status, _ = await raw.json(
            "PATCH",
            f"{CM}/{name}",
            data=f'{{"metadata":{{"labels":{{"tier":"{tier}"}}}}}}',
            headers={"Content-Type": "application/merge-patch+json"},
        )
        assert status == 200
    status, second = await raw.json(
        "GET", f"{CM}?labelSelector=tier%3Dweb&limit=2&continue={first['metadata']['continue']}"
    )
    assert status == 200
    assert [i["metadata"]["name"] for i in second["items"]] == ["s5", "s7"]
    assert "remainingItemCount" not in second["metadata"]
    assert second["metadata"]["resourceVersion"] == first["metadata"]["resourceVersion"]
    status, third = await raw.json(
        "GET", f"{CM}?labelSelector=tier%3Dweb&limit=2&continue={second['metadata']['continue']}"
    )
    assert [i["metadata"]["name"] for i in third["items"]] == ["s9"]
    assert (third["items"][0]["metadata"].get("labels") or {}).get("tier") == "web"
    assert "continue" not in third["metadata"]
    # another selector's list is not served from the first selector's snapshot
    status, db = await raw.json("GET", f"{CM}?labelSelector=tier%3Ddb&limit=100")
    assert [i["metadata"]["name"] for i in db["items"]] == ["s0", "s2", "s4", "s5", "s8", "s9"]


@pytest.mark.envtest_only("tests mcr-envtest's list snapshot cache through its store")
async def test_cached_snapshot_is_not_served_after_compaction(apiserver: ServerThread, raw: Raw) -> None:
    for i in range(6):
        await _cm(raw, "default", f"c{i}", "web")
    status, first = await raw.json("GET", f"{CM}?limit=2")
    assert status == 200
    assert apiserver.call(lambda: apiserver.store.list_snapshot_count()) == 1
    token = first["metadata"]["continue"]
    status, second = await raw.json("GET", f"{CM}?limit=2&continue={token}")
    assert status == 200
    assert [i["metadata"]["name"] for i in second["items"]] == ["c2", "c3"]
    await _cm(raw, "default", "after", "web")  # the list's RV is now older than the newest
    apiserver.faults.compact()
    assert apiserver.call(lambda: apiserver.store.list_snapshot_count()) == 0
    for t in (token, second["metadata"]["continue"]):
        status, body = await raw.json("GET", f"{CM}?limit=2&continue={t}")
        assert status == 410, body
        assert body["reason"] == "Expired"
        assert body["metadata"]["continue"]


@pytest.mark.envtest_only("a 3-event watch history (history_size) and the store are mcr-envtest's")
async def test_cached_snapshot_expires_with_the_history() -> None:
    with ServerThread(history_size=3) as srv:
        r = Raw(srv)
        try:
            for i in range(5):
                await _cm(r, "default", f"h{i}", "web")
            status, first = await r.json("GET", f"{CM}?limit=2")
            assert status == 200
            assert srv.call(lambda: srv.store.list_snapshot_count()) == 1
            for i in range(5, 9):  # push the list's RV out of the kept history
                await _cm(r, "default", f"h{i}", "web")
            status, body = await r.json("GET", f"{CM}?limit=2&continue={first['metadata']['continue']}")
            assert status == 410, body
            assert body["reason"] == "Expired"
            assert srv.call(lambda: srv.store.list_snapshot_count()) == 0
        finally:
            await r.close()


@pytest.mark.envtest_only("tests mcr-envtest's list snapshot cache through its store")
async def test_snapshot_cache_is_bounded(apiserver: ServerThread, raw: Raw) -> None:
    size = apiserver.call(lambda: apiserver.store.list_cache_size)
    for i in range(3):
        await _cm(raw, "default", f"b{i}", "web")
    for i in range(size + 4):  # a new RV, hence a new snapshot, for every list
        await _cm(raw, "default", f"x{i}", "web")
        status, page = await raw.json("GET", f"{CM}?limit=1")
        assert status == 200
        assert page["metadata"]["continue"]
    assert apiserver.call(lambda: apiserver.store.list_snapshot_count()) == size


async def _namespace(raw: Raw) -> str:
    import uuid

    ns = f"pg-{uuid.uuid4().hex[:8]}"
    status, body = await raw.json("POST", "/api/v1/namespaces", json={"metadata": {"name": ns}})
    assert status == 201, body
    return ns


async def test_a_full_filtered_page_continues_while_any_object_follows(raw: Raw) -> None:
    ns = await _namespace(raw)
    path = f"/api/v1/namespaces/{ns}/configmaps"
    for name, tier in (("a1", "web"), ("a2", "web"), ("a3", "db")):
        await _cm(raw, ns, name, tier)
    # kube-apiserver stops at the limit without looking further: an object after the page,
    # even one the selector does not match, leaves a continue token and an empty last page
    status, page = await raw.json("GET", f"{path}?labelSelector=tier%3Dweb&limit=2")
    assert status == 200, page
    assert [i["metadata"]["name"] for i in page["items"]] == ["a1", "a2"]
    token = page["metadata"]["continue"]
    assert "remainingItemCount" not in page["metadata"]
    status, last = await raw.json("GET", f"{path}?labelSelector=tier%3Dweb&limit=2&continue={token}")
    assert status == 200, last
    assert last["items"] == []
    assert "continue" not in last["metadata"]
    # a page that is not full ends the list
    status, page = await raw.json("GET", f"{path}?labelSelector=tier%3Ddb&limit=2")
    assert status == 200, page
    assert [i["metadata"]["name"] for i in page["items"]] == ["a3"]
    assert "continue" not in page["metadata"]
    await raw.status("DELETE", f"/api/v1/namespaces/{ns}")


async def test_a_list_at_resource_version_0_ignores_the_limit(raw: Raw) -> None:
    ns = await _namespace(raw)
    path = f"/api/v1/namespaces/{ns}/configmaps"
    for name in ("b1", "b2", "b3"):
        await _cm(raw, ns, name, "web")
    query = "labelSelector=tier%3Dweb&limit=1"
    status, page = await raw.json("GET", f"{path}?{query}")
    assert status == 200, page
    token = page["metadata"]["continue"]
    status, page = await raw.json("GET", f"{path}?{query}&resourceVersion=0")
    assert status == 200, page
    assert [i["metadata"]["name"] for i in page["items"]] == ["b1", "b2", "b3"]
    assert "continue" not in page["metadata"]
    # a continue token still says where to start
    status, page = await raw.json("GET", f"{path}?{query}&resourceVersion=0&continue={token}")
    assert status == 200, page
    assert [i["metadata"]["name"] for i in page["items"]] == ["b2", "b3"]
    await raw.status("DELETE", f"/api/v1/namespaces/{ns}")
