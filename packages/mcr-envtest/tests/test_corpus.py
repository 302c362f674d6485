"""The differential corpus: mcr-envtest answers as kube-apiserver does, request by request.

``test_envtest_matches_kube_apiserver`` runs every sequence against mcr-envtest and a real
kube-apiserver (the real lane: KUBEBUILDER_ASSETS set) and fails with the report of differences
outside the allow-list. The other tests check the corpus data, the normaliser, the comparison and
the runner against mcr-envtest alone.
"""

from __future__ import annotations

import os
import time
from typing import Any

import pytest

from mcr_envtest import Server
from mcr_envtest.corpus import (
    Allowance,
    Answer,
    Difference,
    Normaliser,
    Report,
    Target,
    count_exchanges,
    load_allowlist,
    load_corpus,
    run_corpus,
)
from mcr_envtest.corpus.__main__ import main
from mcr_envtest.corpus.compare import STATUS, compare, diff
from mcr_envtest.corpus.model import CorpusError, Step, load_file
from mcr_envtest.corpus.pointer import MISSING, drop, resolve

UID_A = "0f8fad5b-d9cb-469f-a165-70867728950e"
UID_B = "7c9e6679-7425-40de-944b-e07fc1f90ae7"


# ---------------------------------------------------------------------------------- the data
def test_corpus_loads_with_enough_exchanges() -> None:
    sequences = load_corpus()
    assert len(sequences) >= 20
    assert count_exchanges(sequences) >= 300
    assert len({s.name for s in sequences}) == len(sequences)


def test_every_allowlist_entry_names_a_step_that_exists() -> None:
    import fnmatch

    steps = {(s.name, st.id) for s in load_corpus() for st in s.steps}
    for entry in load_allowlist():
        assert entry.reason
        assert any(
            fnmatch.fnmatchcase(seq, entry.sequence) and fnmatch.fnmatchcase(step, entry.step)
            for seq, step in steps
        ), f"allow-list entry matches no step: {entry}"


def test_a_malformed_sequence_is_refused_naming_file_and_step(tmp_path: Any) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: bad\nsteps:\n  - {id: one, method: FETCH, path: /api}\n")
    with pytest.raises(CorpusError, match=r"bad\.yaml \(bad\): step 'one': method 'FETCH'"):
        load_file(bad)
    bad.write_text("name: bad\nsteps:\n  - {id: one, path: /api, colour: red}\n")
    with pytest.raises(CorpusError, match=r"step 'one': unknown keys \['colour'\]"):
        load_file(bad)
    with pytest.raises(CorpusError, match="no sequence named nope"):
        load_corpus(names=("nope",))


# ---------------------------------------------------------------------------------- normaliser
def test_normaliser_replaces_what_servers_choose_and_keeps_the_rest() -> None:
    norm = Normaliser()
    obj = {
        "metadata": {
            "name": "web-x7k2p",
            "generateName": "web-",
            "uid": UID_A,
            "resourceVersion": "12345",
            "creationTimestamp": "2026-11-28T02:52:12Z",
            "labels": {"controller-uid": UID_A, "app": "web"},
            "ownerReferences": [{"name": "owner", "uid": UID_B}],
            "managedFields": [
                {
                    "manager": "m",
                    "time": "2026-11-28T02:52:12Z",
                    "fieldsV1": {"f:metadata": {"f:ownerReferences": {f'k:{{"uid":"{UID_B}"}}': {}}}},
                }
            ],
        },
        "spec": {
            "clusterIP": "10.96.4.7",
            "clusterIPs": ["10.96.4.7"],
            "ports": [{"port": 80, "nodePort": 31234}],
        },
        "status": {
            "token": "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJ4In0.c2lnbmF0dXJl",
            "renewTime": "2026-01-01T00:00:01.000000Z",
        },
    }
    out = norm(obj)
    meta = out["metadata"]
    assert meta["name"] == "web-<gen-1>"
    assert meta["uid"] == "<uid:web-<gen-1>>"
    assert meta["labels"] == {"controller-uid": "<uid:web-<gen-1>>", "app": "web"}
    assert meta["ownerReferences"] == [{"name": "owner", "uid": "<uid-2>"}]
    assert meta["resourceVersion"] == "<rv>"
    assert meta["creationTimestamp"] == "<time>"
    assert meta["managedFields"][0]["time"] == "<time>"
    assert meta["managedFields"][0]["fieldsV1"] == {
        "f:metadata": {"f:ownerReferences": {'k:{"uid":"<uid-2>"}': {}}}
    }
    assert out["spec"] == {
        "clusterIP": "<ip>",
        "clusterIPs": ["<ip>"],
        "ports": [{"port": 80, "nodePort": "<port>"}],
    }
    assert out["status"] == {"token": "<token>", "renewTime": "<time>"}
    # the same UID later in the sequence keeps its placeholder; a message quoting RVs loses them
    again = norm({"message": f"UID {UID_A}: too old resource version: 5 (9)", "clusterIP": "None"})
    assert again == {
        "message": "UID <uid:web-<gen-1>>: too old resource version: <rv> (<rv>)",
        "clusterIP": "None",
    }
    assert norm({"metadata": {"continue": "eyJ2IjoibWV0YS5rOHMuaW8vdjEifQ", "resourceVersion": ""}}) == {
        "metadata": {"continue": "<continue>", "resourceVersion": ""}
    }


def test_object_uids_do_not_shift_when_one_server_makes_an_extra_object() -> None:
    # server A made "extra" (which B refused); "next" still gets the same placeholder on both
    a, b = Normaliser(), Normaliser()
    a({"metadata": {"name": "extra", "uid": UID_A}})
    assert a({"metadata": {"name": "next", "uid": UID_B}}) == b({"metadata": {"name": "next", "uid": UID_A}})


def test_managed_fields_written_in_other_seconds_compare_alike() -> None:
    # Servers order one operation's entries by the second each was written in: with the times
    # replaced, the entries are put in one order on both sides.
    def entry(manager: str, second: int, operation: str = "Apply") -> dict[str, Any]:
        return {"manager": manager, "operation": operation, "time": f"2026-11-28T10:00:0{second}Z"}

    first = {
        "metadata": {"managedFields": [entry("alpha", 1), entry("beta", 2), entry("kubectl", 0, "Update")]}
    }
    second = {
        "metadata": {"managedFields": [entry("beta", 1), entry("alpha", 2), entry("kubectl", 0, "Update")]}
    }
    assert Normaliser()(first) == Normaliser()(second)
    managers = [e["manager"] for e in Normaliser()(second)["metadata"]["managedFields"]]
    assert managers == ["alpha", "beta", "kubectl"]
    # Entries that differ in what they say still differ.
    other = {
        "metadata": {"managedFields": [entry("alpha", 1), entry("gamma", 2), entry("kubectl", 0, "Update")]}
    }
    assert Normaliser()(first) != Normaliser()(other)


# ---------------------------------------------------------------------------------- comparison
def test_diff_is_structural_and_names_each_place() -> None:
    assert diff({"a": 1, "b": [1, 2]}, {"b": [1, 2], "a": 1}) == []
    found = diff({"a": {"x/y": 1}, "l": [1]}, {"a": {"x/y": 2}, "l": [1, 3], "n": None})
    assert found == [
        Difference("/a/x~1y", 1, 2),
        Difference("/l/1", MISSING, 3),
        Difference("/n", MISSING, None),
    ]
    assert diff(1, 1.0) == [Difference("", 1, 1.0)]


def test_pointers_select_list_items_and_drop_with_wildcards() -> None:
    doc = {"resources": [{"name": "pods", "verbs": ["get"]}, {"name": "configmaps", "verbs": ["list"]}]}
    assert resolve(doc, "/resources/[name=configmaps]/verbs") == ["list"]
    assert resolve(doc, "/resources/1/name") == "configmaps"
    assert resolve(doc, "/resources/[name=nodes]") is MISSING
    assert drop(doc, ["/resources/*/verbs"]) == {"resources": [{"name": "pods"}, {"name": "configmaps"}]}
    assert drop(doc, ["/resources/[name=pods]"]) == {"resources": [{"name": "configmaps", "verbs": ["list"]}]}
    assert doc["resources"][0]["verbs"] == ["get"]  # drop copies


def test_compare_honours_the_step_options() -> None:
    a = Answer(200, "application/json", {"kind": "X", "big": {"a": 1}, "meta": {"t": 1}})
    b = Answer(200, "application/json", {"kind": "X", "big": {"a": 2}, "meta": {"t": 2}, "extra": 1})
    step = Step(id="s", method="GET", path="/x")
    assert {d.path for d in compare(step, (), a, b)} == {"/big/a", "/meta/t", "/extra"}
    assert {d.path for d in compare(step, ("/meta",), a, b)} == {"/big/a", "/extra"}
    only = Step(id="s", method="GET", path="/x", paths=("/kind",), exists=("/big", "/extra"))
    assert compare(only, (), a, b) == [Difference("/extra", MISSING, "present")]
    assert compare(Step(id="s", method="GET", path="/x", compare="status"), (), a, b) == []
    warned = Answer(200, "application/json", a.body, {"warning": '299 - "unknown field"'})
    headers = Step(id="s", method="GET", path="/x", compare="status", response_headers=("warning",))
    assert compare(headers, (), a, warned) == [
        Difference("<header:warning>", MISSING, '299 - "unknown field"')
    ]
    failed = Answer(404, "application/json", {"kind": "Status", "reason": "NotFound", "message": "gone"})
    assert compare(step, (), a, failed) == [Difference(STATUS, 200, "404 NotFound: gone")]


def test_allowlist_entries_cover_their_path_and_below_only() -> None:
    entry = Allowance("secret*", "create-*", "/data", "why", "being_fixed")
    assert entry.covers("secret", "create-x", Difference("/data/a", 1, 2))
    assert entry.covers("secret", "create-x", Difference("/data", 1, 2))
    assert not entry.covers("secret", "create-x", Difference("/database", 1, 2))
    assert not entry.covers("secret", "get", Difference("/data", 1, 2))
    assert Allowance("*", "*", None, "why").covers("x", "y", Difference(STATUS, 1, 2))
    pattern = Allowance("*", "*", "*/fieldsV1/*/.", "why")
    assert pattern.covers("x", "y", Difference("/items/0/metadata/managedFields/0/fieldsV1/f:data/.", 1, 2))
    assert not pattern.covers("x", "y", Difference("/metadata/managedFields/0/fieldsV1/f:data/f:a", 1, 2))
    assert Allowance("*", "*", "/items/*/kind", "why").covers("x", "y", Difference("/items/12/kind", 1, 2))


# ---------------------------------------------------------------------------------- the runner
async def test_runner_compares_two_servers_and_finds_no_difference_between_twins() -> None:
    sequences = load_corpus(names=("configmap-crud", "patch", "watch"))
    async with (
        Server(real=False) as one,
        Server(real=False) as two,
        Target("one", one.kubeconfig) as a,
        Target("two", two.kubeconfig) as b,
    ):
        outcomes = await run_corpus(sequences, a, b)
    report = Report(outcomes, [])
    assert report.ok, report.format()
    answers = outcomes[0].against.answers
    assert answers["create"].status == 201
    assert answers["create-duplicate"].status == 409
    assert answers["get-missing"].body["reason"] == "NotFound"
    assert [e["type"] for e in outcomes[2].against.answers["from-rv"].body] == [
        "ADDED",
        "MODIFIED",
        "DELETED",
    ]
    assert "0 differences outside the allow-list" in report.format()
    expired = outcomes[2].against.answers["expired"].body  # what the allow-list says of this step
    assert [(e["type"], e["object"]["code"], e["object"]["reason"]) for e in expired] == [
        ("ERROR", 410, "Expired")
    ]


def test_cli_lists_the_corpus_and_refuses_unknown_sequences(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--list", "--reference", "none"]) == 0
    assert f"{count_exchanges(load_corpus())} exchanges" in capsys.readouterr().out
    assert main(["--sequence", "nope", "--reference", "none"]) == 2
    assert "no sequence named nope" in capsys.readouterr().err
    assert main(["--against", "https://127.0.0.1:1", "--reference", "none"]) == 2
    assert "give its credentials with --kubeconfig" in capsys.readouterr().err


# ---------------------------------------------------------------------------------- real lane
@pytest.mark.skipif(
    not os.environ.get("KUBEBUILDER_ASSETS"),
    reason="compares mcr-envtest with a real kube-apiserver: set KUBEBUILDER_ASSETS to the real binaries",
)
async def test_envtest_matches_kube_apiserver() -> None:
    sequences = load_corpus()
    started = time.monotonic()
    async with (
        Server(real=False) as envtest,
        Server(real=True) as real,
        Target("mcr-envtest", envtest.kubeconfig) as a,
        Target("kube-apiserver", real.kubeconfig) as b,
    ):
        outcomes = await run_corpus(sequences, a, b)
    report = Report(outcomes, load_allowlist())
    text = report.format()
    print(f"{text}\n(corpus run: {time.monotonic() - started:.1f}s)")
    assert report.ok, text
