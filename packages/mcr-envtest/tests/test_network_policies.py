"""NetworkPolicies as kube-apiserver serves them: discovery, defaulting, generation and
validation in its words (both lanes)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from .conftest import Raw, fresh_namespace

MERGE = {"Content-Type": "application/merge-patch+json"}


@pytest.fixture
async def ns(raw: Raw) -> AsyncIterator[str]:
    async for name in fresh_namespace(raw, "netpol"):
        yield name


def path(ns: str, name: str = "") -> str:
    return f"/apis/networking.k8s.io/v1/namespaces/{ns}/networkpolicies" + (f"/{name}" if name else "")


async def create(raw: Raw, ns: str, name: str, spec: dict[str, Any]) -> tuple[int, Any]:
    return await raw.json("POST", path(ns), json={"metadata": {"name": name}, "spec": spec})


async def test_network_policies_are_discovered_with_their_short_name(raw: Raw) -> None:
    status, body = await raw.json("GET", "/apis/networking.k8s.io/v1")
    assert status == 200, body
    found = {r["name"]: r for r in body["resources"]}
    assert found["networkpolicies"]["kind"] == "NetworkPolicy"
    assert found["networkpolicies"]["namespaced"] is True
    assert found["networkpolicies"]["shortNames"] == ["netpol"]


async def test_policy_types_ports_and_selector_are_defaulted(raw: Raw, ns: str) -> None:
    status, deny = await create(raw, ns, "deny", {})
    assert status == 201, deny
    assert deny["spec"] == {"podSelector": {}, "policyTypes": ["Ingress"]}
    assert deny["metadata"]["generation"] == 1

    spec = {
        "podSelector": {"matchLabels": {"app": "web"}},
        "ingress": [{"ports": [{"port": 80}, {"protocol": "UDP", "port": "dns"}]}],
        "egress": [{"to": [{"ipBlock": {"cidr": "10.0.0.0/8", "except": ["10.1.0.0/16"]}}]}],
    }
    status, web = await create(raw, ns, "web", spec)
    assert status == 201, web
    assert web["spec"]["policyTypes"] == ["Ingress", "Egress"]
    assert web["spec"]["ingress"][0]["ports"] == [
        {"protocol": "TCP", "port": 80},
        {"protocol": "UDP", "port": "dns"},
    ]

    # Policy types sent are kept; only a spec change moves the generation.
    status, out = await raw.json(
        "PATCH", path(ns, "web"), headers=MERGE, json={"spec": {"policyTypes": ["Egress"]}}
    )
    assert status == 200, out
    assert (out["spec"]["policyTypes"], out["metadata"]["generation"]) == (["Egress"], 2)
    status, out = await raw.json(
        "PATCH", path(ns, "web"), headers=MERGE, json={"metadata": {"labels": {"a": "b"}}}
    )
    assert status == 200, out
    assert out["metadata"]["generation"] == 2


@pytest.mark.parametrize(
    ("spec", "causes"),
    [
        (
            {"policyTypes": ["Sideways"]},
            [
                (
                    "FieldValueNotSupported",
                    'Unsupported value: "Sideways": supported values: "Ingress", "Egress"',
                    "spec.policyTypes[0]",
                )
            ],
        ),
        (
            {"ingress": [{"from": [{"ipBlock": {"cidr": "10.0.0.0/16", "except": ["192.168.0.0/24"]}}]}]},
            [
                (
                    "FieldValueInvalid",
                    'Invalid value: "192.168.0.0/24": must be a strict subset of `cidr`',
                    "spec.ingress[0].from[0].ipBlock.except[0]",
                )
            ],
        ),
        (
            {"egress": [{"ports": [{"endPort": 90}, {"port": 90, "endPort": 80}]}]},
            [
                (
                    "FieldValueInvalid",
                    "Invalid value: 90: may not be specified when `port` is not specified",
                    "spec.egress[0].ports[0].endPort",
                ),
                (
                    "FieldValueInvalid",
                    "Invalid value: 80: must be greater than or equal to `port`",
                    "spec.egress[0].ports[1].endPort",
                ),
            ],
        ),
        (
            {"ingress": [{"from": [{}, {"podSelector": {}, "ipBlock": {"cidr": "10.0.0.0/8"}}]}]},
            [
                ("FieldValueRequired", "Required value: must specify a peer", "spec.ingress[0].from[0]"),
                (
                    "FieldValueForbidden",
                    "Forbidden: may not specify both ipBlock and another peer",
                    "spec.ingress[0].from[1]",
                ),
            ],
        ),
        (
            {
                "podSelector": {
                    "matchExpressions": [{"key": "a", "operator": "In"}, {"key": "b", "operator": "Is"}]
                }
            },
            [
                (
                    "FieldValueRequired",
                    "Required value: must be specified when `operator` is 'In' or 'NotIn'",
                    "spec.podSelector.matchExpressions[0].values",
                ),
                (
                    "FieldValueInvalid",
                    'Invalid value: "Is": not a valid selector operator',
                    "spec.podSelector.matchExpressions[1].operator",
                ),
            ],
        ),
    ],
)
async def test_invalid_policies_are_refused_in_kube_apiservers_words(
    raw: Raw, ns: str, spec: dict[str, Any], causes: list[tuple[str, str, str]]
) -> None:
    status, body = await create(raw, ns, "bad", {"podSelector": {}, **spec})
    assert status == 422, body
    assert [(c["reason"], c["message"], c["field"]) for c in body["details"]["causes"]] == causes
