"""``mcr.Request``: value semantics and its string form."""

from __future__ import annotations

import pytest

from mcr import Request


@pytest.mark.parametrize(
    ("req", "text"),
    [
        (Request("default", "web", "prod#eu-1"), "cluster://prod#eu-1/default/web"),
        (Request("", "node-1", "c"), "cluster://c//node-1"),
        (Request("default", "web"), "cluster:///default/web"),
        # A path as a cluster name (the file provider's): its slashes cannot be read as the
        # separators of namespace and name.
        (Request("a", "b", "/fleet/x.kubeconfig+ctx"), "cluster://%2Ffleet%2Fx.kubeconfig+ctx/a/b"),
        (Request("a", "b", "x/a"), "cluster://x%2Fa/a/b"),
        (Request("a", "b", "x%2Fa"), "cluster://x%252Fa/a/b"),
    ],
)
def test_str_names_cluster_namespace_and_name_unambiguously(req: Request, text: str) -> None:
    assert str(req) == text


def test_requests_differing_only_in_where_the_slash_is_print_differently() -> None:
    one = Request("b", "c", "a/x")  # cluster "a/x", namespace "b"
    two = Request("x/b", "c", "a")  # not a valid namespace, but the string must still differ
    assert str(one) != str(two)


def test_requests_compare_by_value_and_never_equal_a_tuple() -> None:
    assert Request("n", "x", "c") == Request("n", "x", "c")
    assert hash(Request("n", "x", "c")) == hash(Request("n", "x", "c"))
    assert Request("n", "x", "c") != ("n", "x", "c")
