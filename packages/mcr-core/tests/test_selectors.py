"""Label selectors are checked where they are given, as the API server checks them.

A selector the server answers with 400 Bad Request must be refused by the option, predicate or
provider that takes it — naming it — not accepted and then retried for ever by a watch. GOOD and
BAD agree with kube-apiserver 1.37 (the server test below runs them against it).
"""

from __future__ import annotations

from typing import Any

import pytest

from mcr.builder import controller_managed_by
from mcr.cache import ByObject, CacheOptions, NamespaceConfig
from mcr.cache.selectors import parse_label_selector
from mcr.client import Client
from mcr.errors import BadRequestError
from mcr.manager import Manager
from mcr.predicate import LabelSelectorPredicate

GOOD = [
    "",
    "app",
    "!app",
    "app=web",
    "app==web",
    "app!=web",
    "app=",
    "app in (web,db)",
    "app notin ()",
    "app in (web,)",
    "app in (in)",
    "app.kubernetes.io/name=web",
    " app = web , tier ",
    "n>3",
    "n>02",
    "a-b_c.d=E-f_g.H",
    "a in (,)",
    "a in (x,,y)",
    "!a,b",
    "a ==b",
    "in",
    "notin=x",
    "a=in",
    "A=B",
    "a!=",
    "a in(x) ,b",
]

BAD = {
    "a b c": "found 'b' after 'a'",
    "app=web,": "where a key was expected after ','",
    ",": "where a key was expected",
    "-app=web": "key '-app'",
    "a/b/c=d": "at most one '/'",
    "Example.COM/app=web": "lower-case DNS subdomain",
    "/app=web": "prefix before '/' must not be empty",
    "app=web=db": "found '='",
    "!app=web": "'!app' takes no operator",
    "app in web": "'(' was expected",
    "app in (web db)": "found 'db' in the values of 'app'",
    "app in (web": "found the end in the values",
    "n>x": "must be an integer",
    "app=" + "x" * 64: "longer than 63 characters",
    "x" * 64: "longer than 63 characters",
    "app=-web": "the value '-web'",
    "app=we/b": "the value 'we/b'",
    "=web": "found '=' where a key was expected",
    "n<-2": "the value '-2'",
    "n>+3": "the value '+3'",
    "example.com/=z": "the name must not be empty",
    "_a=b": "key '_a'",
    "a=b_": "the value 'b_'",
    "a,,b": "found ',' where a key was expected after ','",
    "!": "found the end where a key was expected",
    "a>=3": "found '=' where the value of 'a' was expected",
    "a===b": "found '=' where the value of 'a' was expected",
}


@pytest.mark.parametrize("selector", GOOD)
def test_selectors_the_server_accepts_parse(selector: str) -> None:
    parse_label_selector(selector)


@pytest.mark.parametrize(("selector", "why"), sorted(BAD.items()))
def test_selectors_the_server_refuses_raise_naming_selector_and_fault(selector: str, why: str) -> None:
    with pytest.raises(ValueError, match="invalid label selector") as info:
        parse_label_selector(selector)
    assert repr(selector) in str(info.value)
    assert why in str(info.value)


def test_match_labels_mappings_are_checked_too() -> None:
    assert parse_label_selector({"app": "web"}).matches({"app": "web", "x": "y"})
    with pytest.raises(ValueError, match="key 'a b'"):
        parse_label_selector({"a b": "c"})
    with pytest.raises(ValueError, match="the value 'c d'"):
        parse_label_selector({"app": "c d"})


@pytest.mark.parametrize(
    ("selector", "labels", "expected"),
    [
        ("n>3", {"n": "4"}, True),
        ("n>3", {"n": "3"}, False),
        ("n>3", {"n": "four"}, False),
        ("n>3", {}, False),
        ("n<0", {"n": "-1"}, True),
        ("app in (web,)", {"app": ""}, True),
        ("app notin ()", {"app": "web"}, True),
        ("app notin (web)", {}, True),
        ("app in (in)", {"app": "in"}, True),
        ("!app,tier", {"tier": "a"}, True),
        ("!app,tier", {"tier": "a", "app": "x"}, False),
    ],
)
def test_matching(selector: str, labels: dict[str, str], expected: bool) -> None:
    assert parse_label_selector(selector).matches(labels) is expected


def test_cache_options_refuse_a_bad_selector_when_made() -> None:
    with pytest.raises(ValueError, match=r"CacheOptions.default_label_selector: invalid .* 'a b'"):
        CacheOptions(default_label_selector="a b")
    with pytest.raises(ValueError, match=r"ByObject.label_selector: invalid label selector 'app=web,'"):
        ByObject(label_selector="app=web,")
    with pytest.raises(ValueError, match=r"NamespaceConfig.label_selector: .*'-x'"):
        NamespaceConfig(label_selector="-x")
    with pytest.raises(ValueError, match=r"ByObject.field_selector: .*'nope' has no operator"):
        ByObject(field_selector="nope")
    with pytest.raises(ValueError, match=r"CacheOptions.default_field_selector: .*names no field"):
        CacheOptions(default_field_selector="=x")
    with pytest.raises(TypeError, match=r"by_object\['v1/Secret'\]: expected a ByObject"):
        CacheOptions(by_object={"v1/Secret": {"label_selector": "a"}})  # type: ignore[dict-item]
    options = CacheOptions(
        default_label_selector="app in (web,db)",
        default_namespaces={"a": NamespaceConfig(label_selector="tier=x")},
        by_object={"v1/Secret": ByObject(label_selector="n>3", field_selector="metadata.name=x")},
    )
    assert options.by_object


def test_label_selector_predicate_checks_its_selector_when_made() -> None:
    with pytest.raises(ValueError, match=r"LabelSelectorPredicate: invalid label selector 'app in web'"):
        LabelSelectorPredicate("app in web")
    p = LabelSelectorPredicate("app=web")
    on = {"metadata": {"labels": {"app": "web"}}}
    off = {"metadata": {"labels": {"app": "db"}}}
    assert [p.create(on), p.create(off)] == [True, False]
    assert [p.update(off, on), p.update(on, off)] == [True, False]
    assert [p.delete(on), p.generic(on), p.generic({"metadata": {}})] == [True, True, False]


def test_builder_refuses_what_is_not_a_predicate_at_the_call() -> None:
    b = controller_managed_by(Manager(metrics_bind_address="0"))
    with pytest.raises(TypeError, match=r"for_\('v1/ConfigMap'\): 'app=web' is not a predicate.*Label"):
        b.for_("v1/ConfigMap", predicates=["app=web"])
    with pytest.raises(TypeError, match=r"with_event_filter\(\): 'app=web' is not a predicate"):
        b.with_event_filter("app=web")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"watches\('v1/Secret'\): 3 is not a predicate"):
        b.watches("v1/Secret", predicates=[3])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="invalid label selector 'tier in x'"):
        b.owns("v1/Secret", predicates=[LabelSelectorPredicate("tier in x")])


async def accepted_by_server(client: Client, selector: str) -> bool:
    try:
        await client.list("v1/ConfigMap", namespace="default", label_selector=selector)
    except BadRequestError:
        return False
    return True


async def test_what_parses_the_server_accepts_and_syntax_errors_both_refuse(apiserver: Any) -> None:
    from mcr.cluster import Cluster

    cluster = Cluster.from_kubeconfig(apiserver.kubeconfig, name="selectors")
    try:
        for selector in GOOD:
            assert await accepted_by_server(cluster.api_reader, selector), selector
        # The server checks keys and values as strictly as the parser (kube-apiserver does; a
        # laxer server may accept some of these), but a selector it refuses never parses.
        for selector in BAD:
            if not await accepted_by_server(cluster.api_reader, selector):
                with pytest.raises(ValueError, match="invalid label selector"):
                    parse_label_selector(selector)
        for selector in ("a b c", "app in web", "!app=web", "n>x", "app=web=db"):
            assert not await accepted_by_server(cluster.api_reader, selector), selector
    finally:
        await cluster.stop()
