"""The webhook package's pure parts: JSON patches, cluster path segments, the builder's refusals."""

from __future__ import annotations

import copy
from typing import Any

import orjson
import pytest

from mcr.webhook import WebhookServer, json_patch, path_for, webhook_managed_by
from mcr.webhook.registration import Endpoint
from mcr.webhook.routing import cluster_from_segment, cluster_segment, parse


def apply(doc: Any, ops: list[dict[str, Any]]) -> Any:
    """A small RFC 6902 applier for add/remove/replace, independent of the diff under test."""
    doc = copy.deepcopy(doc)
    for op in ops:
        tokens = [t.replace("~1", "/").replace("~0", "~") for t in op["path"].split("/")[1:]]
        if not tokens:
            doc = op["value"]
            continue
        parent = doc
        for t in tokens[:-1]:
            parent = parent[int(t)] if isinstance(parent, list) else parent[t]
        last = tokens[-1]
        if isinstance(parent, list):
            if op["op"] == "add":
                parent.insert(len(parent) if last == "-" else int(last), op["value"])
            elif op["op"] == "remove":
                del parent[int(last)]
            else:
                parent[int(last)] = op["value"]
        elif op["op"] == "remove":
            del parent[last]
        else:
            parent[last] = op["value"]
    return doc


CASES = [
    ({"a": 1}, {"a": 1}),
    ({"a": {"b": [1, {"c": "d"}]}}, {"a": {"b": [1, {"c": "d"}]}}),
    ({"a": 1}, {"a": 2}),
    ({"a": 1, "b": 2}, {"b": 2, "c": {"d": [1, 2]}}),
    ({"m": {"a/b": 1, "t~": 2}}, {"m": {"a/b": 3}}),
    ({"l": [1, 2, 3, 4]}, {"l": [1, 5]}),
    ({"l": [1]}, {"l": [1, {"x": None}, [2]]}),
    ({"v": True}, {"v": 1}),
    ({"v": 1}, {"v": 1.5}),
    ({"v": [1]}, {"v": {"0": 1}}),
    ([1, 2], {"k": "v"}),
]


@pytest.mark.parametrize(("old", "new"), CASES)
def test_json_patch_turns_old_into_new(old: Any, new: Any) -> None:
    ops = json_patch(old, new)
    result = apply(old, ops)
    assert result == new
    assert [type(x) for x in _leaves(result)] == [type(x) for x in _leaves(new)]
    same_json = orjson.dumps(old, option=orjson.OPT_SORT_KEYS) == orjson.dumps(
        new, option=orjson.OPT_SORT_KEYS
    )
    assert (ops == []) == same_json


def _leaves(doc: Any) -> list[Any]:
    if isinstance(doc, dict):
        return [leaf for k in sorted(doc) for leaf in _leaves(doc[k])]
    if isinstance(doc, list):
        return [leaf for item in doc for leaf in _leaves(item)]
    return [doc]


def test_json_patch_escapes_pointer_tokens() -> None:
    assert json_patch({}, {"a/b~c": 1}) == [{"op": "add", "path": "/a~1b~0c", "value": 1}]


@pytest.mark.parametrize("name", ["", "a", "zone/1", "east#prod", "~", "%2F", "ünï", "a.b-c_d"])
def test_cluster_segments_round_trip_with_unreserved_characters(name: str) -> None:
    segment = cluster_segment(name)
    assert all(c.isascii() and (c.isalnum() or c in "-._~") for c in segment)
    assert cluster_from_segment(segment) == name
    route = parse(path_for("validate", name, "", "v1", "ConfigMap"))
    assert route.cluster == name
    assert route.key == ("core", "v1", "configmap")


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("/admit/a/core/v1/x", "first segment must be one of validate, mutate, convert"),
        ("/validate/a/core/v1", "expected /validate/<cluster>/<group>/<version>/<kind>"),
        ("/convert/a/core/v1/x", "expected /convert/<cluster>/<group>/<kind>"),
        ("/validate/a~zz/core/v1/x", "'~' must be followed by two hex digits"),
        ("/validate/a%/core/v1/x", "'%' must be escaped"),
    ],
)
def test_bad_paths_are_refused_with_the_reason(path: str, message: str) -> None:
    with pytest.raises(ValueError, match=r"path|segment") as err:
        parse(path)
    assert message in str(err.value)


def test_builder_refuses_misuse(tmp_path: Any) -> None:
    server = WebhookServer(tmp_path / "tls.crt", tmp_path / "tls.key")
    with pytest.raises(ValueError, match="for_\\(\\) must be called"):
        webhook_managed_by(server).with_validator(lambda r: None).complete()
    with pytest.raises(ValueError, match="no webhook for 'v1/ConfigMap'"):
        webhook_managed_by(server).for_("v1/ConfigMap").complete()
    with pytest.raises(ValueError, match="failure_policy must be one of"):
        webhook_managed_by(server).for_("v1/ConfigMap").with_validator(lambda r: None, failure_policy="Never")
    with pytest.raises(ValueError, match="timeout_seconds must be an integer from 1 to 30"):
        webhook_managed_by(server).for_("v1/ConfigMap").with_defaulter(lambda r: None, timeout_seconds=31)
    with pytest.raises(TypeError, match="unexpected options: reinvocation_policy"):
        webhook_managed_by(server).for_("v1/ConfigMap").with_validator(
            lambda r: None, reinvocation_policy="Never"
        )
    with pytest.raises(ValueError, match="has no webhook server"):
        webhook_managed_by(object())
    webhook_managed_by(server).for_("v1/ConfigMap").with_validator(lambda r: None).complete()
    with pytest.raises(ValueError, match="already has a validate handler"):
        webhook_managed_by(server).for_("v1/ConfigMap").with_validator(lambda r: None).complete()


def test_client_config_by_url_or_service() -> None:
    by_url = Endpoint(url="https://hooks.example:8443/").client_config("/validate/a/core/v1/pod", b"PEM")
    assert by_url == {"caBundle": "UEVN", "url": "https://hooks.example:8443/validate/a/core/v1/pod"}
    by_service = Endpoint(service=("ops", "hooks", 443)).client_config("/mutate/~/apps/v1/deployment", b"PEM")
    assert by_service == {
        "caBundle": "UEVN",
        "service": {"namespace": "ops", "name": "hooks", "port": 443, "path": "/mutate/~/apps/v1/deployment"},
    }
