"""Resource quantities: parsing, the canonical text, ordering and arithmetic (both lanes), and the
canonical text checked against what a real kube-apiserver writes back (the real lane)."""

from __future__ import annotations

import os
import re
from collections.abc import AsyncIterator

import orjson
import pytest

from mcr_envtest.quantity import FORMAT_ERROR, NUMERIC_ERROR, SUFFIX_ERROR, Quantity

from .conftest import Raw, fresh_namespace, workload_namespace

# Text a client sends and what kube-apiserver writes back; the real lane checks every pair.
CANONICAL = {
    "0": "0",
    "1000m": "1",
    "0.5": "500m",
    "1.5": "1500m",
    "2000": "2k",
    "1500": "1500",
    "1024": "1024",
    "1024Mi": "1Gi",
    "1536Mi": "1536Mi",
    "0.5Gi": "512Mi",
    "0.5Ki": "512",
    "1.5Ki": "1536",
    "8Ki": "8Ki",
    "1023Ki": "1023Ki",
    "1025Ki": "1025Ki",
    "1Ei": "1Ei",
    "1e3": "1e3",
    "1E3": "1E3",
    "1e+3": "1e+3",
    "1e03": "1e03",
    "1000e0": "1e3",
    "2.5e2": "250",
    "250e-3": "250e-3",
    "1.5e-3": "1500e-6",
    "100M": "100M",
    "1.0001": "1000100u",
    "0.0000000001": "1n",
    "1e-10": "1e-9",
    "0.5n": "1n",
    "1000n": "1u",
    "1000000u": "1",
    "0.1": "100m",
    "1.1": "1100m",
    "3.14159265358979": "3141592654n",
    "12345678901234567890": "12345678901234567890",
    "123456789012345678901234567890": "123456789012345678901234567890",
    "10E": "10E",
    "1P": "1P",
    # Text the server keeps as given: already canonical by its quick check.
    "+1": "+1",
    "1.500k": "1.500k",
    "5.": "5.",
    "1.G": "1.G",
    "01Ki": "01Ki",
    "  7  ": "7",
    # Empty parts.
    "007": "007",
    "00": "0",
    "0.0": "0",
    ".5": "500m",
    ".5Gi": "512Mi",
    "k": "0",
    "+": "0",
    "Ti": "0",
    # Beyond the int64 range: binary values are capped, decimal ones past E lose their suffix.
    "8Ei": "9223372036854775807",
    "9999999999999999999999999Ki": "9223372036854775807",
    "1000E": "1",
    "1.0000000001Ki": "1024000000103n",
}

BAD = {
    "": FORMAT_ERROR,
    "1x": FORMAT_ERROR,
    "1.5.5": FORMAT_ERROR,
    "1 k": FORMAT_ERROR,
    "1ki": SUFFIX_ERROR,
    "1K": SUFFIX_ERROR,
    "1e": SUFFIX_ERROR,
    "1e+": SUFFIX_ERROR,
    "1ee3": SUFFIX_ERROR,
    "Pi": NUMERIC_ERROR,
    ".e-10": NUMERIC_ERROR,
}


def q(text: str) -> Quantity:
    return Quantity.parse(text)


@pytest.mark.parametrize(("text", "canonical"), CANONICAL.items())
def test_the_canonical_text_is_kube_apiservers(text: str, canonical: str) -> None:
    assert Quantity.parse(text).canonical() == canonical
    assert str(Quantity.parse(text)) == canonical


@pytest.mark.parametrize(("text", "message"), BAD.items())
def test_bad_text_is_refused_in_kube_apiservers_words(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        Quantity.parse(text)


def test_json_numbers_read_as_their_decimal_text() -> None:
    assert [str(Quantity.parse(n)) for n in (2, 1.5, 0.25, 1024, -3)] == ["2", "1500m", "250m", "1024", "-3"]
    with pytest.raises(ValueError, match="regular expression"):
        Quantity.parse(True)
    with pytest.raises(TypeError, match="not NoneType"):
        Quantity.parse(None)  # type: ignore[arg-type]  # deliberately wrong: the test checks the error


def test_negative_values_round_away_from_zero() -> None:
    assert [str(q(t)) for t in ("-1", "-1.5", "-0.0000000001", "-1Ki", "-1536Mi", "-0")] == [
        "-1",
        "-1500m",
        "-1n",
        "-1Ki",
        "-1536Mi",
        "0",
    ]
    assert (q("-1.5").value(), q("-1.5").milli_value(), q("-1n").milli_value()) == (-2, -1500, -1)


def test_quantities_compare_by_value() -> None:
    assert q("1") == q("1000m") == q("1e0") == q("0.001k")
    assert hash(q("1")) == hash(q("1000m"))
    assert len({q("1Ki"), q("1024"), q("1.024k")}) == 1
    assert q("1Ki") > q("1k") > q("999") > q("0") > q("-1n") > q("-1")
    assert q("999m") < q("1") <= q("1") <= q("1000000u") < q("1001m")
    assert q("1e999999999") > q("1E") > q("1e-999999999") > q("0")
    assert q("-1e999999999") < q("-1E") < q("-1e-999999999") < q("0")
    assert max([q("1Gi"), q("1G"), q("100Mi")]) == q("1Gi")
    assert q("1") != "1"
    assert [q(t).format for t in ("1", "1Ki", "1e3")] == ["DecimalSI", "BinarySI", "DecimalExponent"]


def test_value_and_milli_value_round_up_to_whole_units() -> None:
    assert [q(t).value() for t in ("0", "1", "1.5", "1n", "1Ki", "2k")] == [0, 1, 2, 1, 1024, 2000]
    assert [q(t).milli_value() for t in ("0", "1", "1.5", "1n", "1.0001", "250m")] == [
        0,
        1000,
        1500,
        1,
        1001,
        250,
    ]
    # Beyond int64 the values saturate where Go's int64 would overflow.
    assert q("100E").value() == q("8Ei").value() == (1 << 63) - 1
    assert q("100P").milli_value() == (1 << 63) - 1
    assert q("-100E").value() == -(1 << 63)


def test_sums_are_exact_and_take_the_first_non_zero_terms_format() -> None:
    assert str(q("500m") + q("500m")) == "1"
    assert str(q("1Ki") + q("1Ki")) == "2Ki"
    assert str(q("1Ki") + q("1k")) == "2024"
    assert str(q("0") + q("1Ki")) == "1Ki"
    assert str(q("1k") + q("1Ki")) == "2024"
    assert str(q("1.5") + q("-1.5")) == "0"
    assert str(q("1n") + q("1E")) == "1000000000000000000000000001n"
    total = q("0")
    for text in ("100m", "200m", "300m", "400m"):
        total = total + q(text)
    assert total == q("1")
    assert str(total) == "1"


def test_resource_lists_round_up_to_thousandths() -> None:
    texts = ("0.0000000001", "1.0000000001Ki", "1e-10", "1.5e-3", "-1.5u", "+1", "5.", "1n", "1Ki", "0")
    rounded = [str(q(t).round_up(-3)) for t in texts]
    assert rounded == ["1m", "1024001m", "1e-3", "2e-3", "-1m", "+1", "5.", "1m", "1Ki", "0"]
    assert q("1.5").round_up(0) == q("2")
    assert q("1.5k").round_up(3) == q("2k")


def test_quantities_are_immutable() -> None:
    one = q("1")
    with pytest.raises(AttributeError, match="immutable"):
        one.format = "BinarySI"
    assert repr(one) == "Quantity('1')"


@pytest.fixture
async def ns(raw: Raw) -> AsyncIterator[str]:
    async for name in fresh_namespace(raw, "quantity"):
        yield name


JSON_TEXT_REAL_ONLY = pytest.mark.skipif(
    not os.environ.get("KUBEBUILDER_ASSETS"),
    reason="kube-apiserver reads a JSON number's text (1e3 stays 1e3), which mcr-envtest's JSON "
    "decoding does not keep; this checks the parser against the real server",
)


def quota(hard: dict[str, object]) -> dict[str, object]:
    return {"metadata": {"name": "q"}, "spec": {"hard": hard}}


@pytest.fixture
async def pod_ns(raw: Raw) -> AsyncIterator[str]:
    async for name in workload_namespace(raw, "quantity"):
        yield name


async def test_quantities_are_written_in_their_canonical_text(raw: Raw, pod_ns: str) -> None:
    # An emptyDir's sizeLimit is a bare quantity: the server writes back its canonical text.
    volumes = [{"name": f"v{i}", "emptyDir": {"sizeLimit": text}} for i, text in enumerate(CANONICAL)]
    spec = {"containers": [{"name": "c", "image": "x"}], "volumes": volumes}
    body = {"metadata": {"name": "p"}, "spec": spec}
    status, answer = await raw.json("POST", f"/api/v1/namespaces/{pod_ns}/pods", json=body)
    assert status == 201, answer
    texts = {v["name"]: v["emptyDir"]["sizeLimit"] for v in volumes}
    # The server adds the ServiceAccount token's volume after them.
    served = {
        texts[v["name"]]: v["emptyDir"]["sizeLimit"] for v in answer["spec"]["volumes"] if v["name"] in texts
    }
    assert served == {text: str(Quantity.parse(text)) for text in CANONICAL}
    assert served == CANONICAL


async def test_resource_lists_are_rounded_up_to_thousandths(raw: Raw, ns: str) -> None:
    # "requests.<domain>/..." names take any non-negative value, fractions included.
    names = {f"requests.example.com/q{i}": text for i, text in enumerate(CANONICAL)}
    status, body = await raw.json("POST", f"/api/v1/namespaces/{ns}/resourcequotas", json=quota(names))
    assert status == 201, body
    served = {names[name]: value for name, value in body["spec"]["hard"].items()}
    assert served == {text: str(Quantity.parse(text).round_up(-3)) for text in CANONICAL}


@JSON_TEXT_REAL_ONLY
async def test_kube_apiserver_reads_json_numbers_by_their_text(raw: Raw, ns: str) -> None:
    numbers = ["2", "1.5", "0.25", "1024", "1e3", "1E-3", "1.0"]
    hard = ", ".join(f'"requests.example.com/n{i}": {n}' for i, n in enumerate(numbers))
    data = '{"metadata": {"name": "n"}, "spec": {"hard": {' + hard + "}}}"  # the numbers as JSON text
    path = f"/api/v1/namespaces/{ns}/resourcequotas"
    status, body = await raw.json("POST", path, data=data, headers={"Content-Type": "application/json"})
    assert status == 201, body
    served = [body["spec"]["hard"][f"requests.example.com/n{i}"] for i in range(len(numbers))]
    assert served == [str(Quantity.parse(n)) for n in numbers]
    # Decoded JSON gives the float, whose shortest form is the text for the plain decimals.
    assert served[:4] == [str(Quantity.parse(orjson.loads(n))) for n in numbers[:4]]


async def test_plain_json_numbers_are_written_as_quantities(raw: Raw, ns: str) -> None:
    numbers = [2, 1.5, 0.25, 1024]
    hard = {f"requests.example.com/n{i}": n for i, n in enumerate(numbers)}
    status, body = await raw.json("POST", f"/api/v1/namespaces/{ns}/resourcequotas", json=quota(hard))
    assert status == 201, body
    assert [body["spec"]["hard"][name] for name in hard] == ["2", "1500m", "250m", "1024"]


async def test_bad_quantity_text_is_refused_in_kube_apiservers_words(raw: Raw, ns: str) -> None:
    answers = {}
    for text in BAD:
        body = quota({"requests.example.com/bad": text})
        status, answer = await raw.json("POST", f"/api/v1/namespaces/{ns}/resourcequotas", json=body)
        answers[text] = (status, answer.get("message"))
    lead = 'ResourceQuota in version "v1" cannot be handled as a ResourceQuota: '
    assert answers == {text: (400, lead + message) for text, message in BAD.items()}
