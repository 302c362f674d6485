"""The informer store's indexes, the reader's selectors and the reflector's backoff."""

from __future__ import annotations

import random
from typing import Any

import pytest

from mcr.cache import NAMESPACE_INDEX, Indexer, IndexerConflictError, meta_namespace_key
from mcr.cache.backoff import Backoff, BackoffPolicy
from mcr.cache.selectors import parse_field_selector, parse_label_selector
from mcr.cache.store import namespace_index_func


def cm(ns: str, name: str, **labels: str) -> dict[str, object]:
    return {"metadata": {"namespace": ns, "name": name, "labels": labels}}


def by_app(obj: dict[str, Any]) -> list[str]:
    labels = obj["metadata"]["labels"]
    return [labels["app"]] if "app" in labels else []


def test_keys_follow_client_go() -> None:
    assert meta_namespace_key(cm("a", "x")) == "a/x"
    assert meta_namespace_key({"metadata": {"name": "node-1"}}) == "node-1"


def test_indexes_follow_puts_updates_and_pops() -> None:
    store = Indexer({NAMESPACE_INDEX: namespace_index_func, "app": by_app})
    store.put("a/x", cm("a", "x", app="web"))
    store.put("b/y", cm("b", "y", app="web"))
    assert {o["metadata"]["name"] for o in store.by_index("app", "web")} == {"x", "y"}
    store.put("a/x", cm("a", "x", app="db"))
    assert [o["metadata"]["name"] for o in store.by_index("app", "web")] == ["y"]
    assert [o["metadata"]["name"] for o in store.by_index("app", "db")] == ["x"]
    store.pop("b/y")
    assert store.by_index("app", "web") == []
    assert store.index_values("app") == ["db"]  # empty buckets are dropped
    assert store.index_keys(NAMESPACE_INDEX, "a") == {"a/x"}


def test_indexer_added_later_covers_existing_objects_and_names_are_unique() -> None:
    store = Indexer()
    store.put("a/x", cm("a", "x", app="web"))
    store.add_indexers({"app": by_app})
    assert [o["metadata"]["name"] for o in store.by_index("app", "web")] == ["x"]
    with pytest.raises(IndexerConflictError, match="app"):
        store.add_indexers({"app": by_app})
    with pytest.raises(KeyError, match="nope"):
        store.by_index("nope", "x")


@pytest.mark.parametrize(
    ("selector", "labels", "expected"),
    [
        ("app=web", {"app": "web"}, True),
        ("app==web", {"app": "db"}, False),
        ("app!=web", {}, True),
        ("app in (web, db),tier", {"app": "db", "tier": "x"}, True),
        ("app in (web, db),tier", {"app": "db"}, False),
        ("app notin (web)", {"app": "db"}, True),
        ("!canary", {"canary": "1"}, False),
        ({"app": "web"}, {"app": "web", "x": "y"}, True),
    ],
)
def test_label_selectors(selector: str, labels: dict[str, str], expected: bool) -> None:
    assert parse_label_selector(selector).matches(labels) is expected


def test_bad_selectors_name_the_term() -> None:
    with pytest.raises(ValueError, match="a b c"):
        parse_label_selector("a b c")
    with pytest.raises(ValueError, match="nope"):
        parse_field_selector("nope")
    assert parse_field_selector("metadata.name=x,spec.a!=b") == [
        ("metadata.name", "x", True),
        ("spec.a", "b", False),
    ]


def test_backoff_grows_with_jitter_caps_and_resets() -> None:
    backoff = Backoff(BackoffPolicy(initial=0.8, cap=30.0, factor=2.0, jitter=1.0), rng=random.Random(1))
    delays = [backoff.next_delay() for _ in range(10)]
    assert 0.8 <= delays[0] <= 1.6
    assert 1.6 <= delays[1] <= 3.2
    assert all(30.0 <= d <= 60.0 for d in delays[-3:])
    backoff.reset()
    assert backoff.next_delay() <= 1.6


def test_key_derived_namespace_index_tracks_inserts_and_deletes_only() -> None:
    store = Indexer({"app": by_app}, namespace_index=True)
    store.put("a/x", cm("a", "x", app="web"))
    store.put("a/x", cm("a", "x", app="db"))  # an update: the namespace bucket is unchanged
    store.put("node-1", {"metadata": {"name": "node-1", "labels": {}}})
    assert sorted(store.index_names) == ["app", "namespace"]
    assert [o["metadata"]["labels"]["app"] for o in store.by_index(NAMESPACE_INDEX, "a")] == ["db"]
    assert store.index_keys(NAMESPACE_INDEX, "") == {"node-1"}
    store.pop("a/x")
    assert store.index_values(NAMESPACE_INDEX) == [""]
    with pytest.raises(IndexerConflictError):
        store.add_indexers({NAMESPACE_INDEX: namespace_index_func})
