"""Structured logging: context fields follow the task that set them and reach every handler."""

from __future__ import annotations

import asyncio
import io
import json
import logging
from collections.abc import Iterator
from typing import Literal

import pytest

from mcr.log import current_fields, get_logger, log_context, setup_logging


@pytest.fixture
def json_stream() -> Iterator[io.StringIO]:
    stream = io.StringIO()
    handler = setup_logging(logging.DEBUG, fmt="json", stream=stream, logger="mcrtest")
    yield stream
    logging.getLogger("mcrtest").removeHandler(handler)


def _lines(stream: io.StringIO) -> list[dict[str, object]]:
    return [json.loads(line) for line in stream.getvalue().splitlines() if line.startswith("{")]


async def test_concurrent_reconciles_keep_their_own_fields(json_stream: io.StringIO) -> None:
    log = logging.getLogger("mcrtest.user")

    async def reconcile(cluster: str, name: str) -> None:
        with log_context(controller="cm", cluster=cluster, namespace="ns", name=name):
            await asyncio.sleep(0)  # interleave with the other task
            log.info("reconciling")
            await asyncio.sleep(0)
            log.info("done", extra={"object": f"ns/{name}"})

    await asyncio.gather(reconcile("a", "x"), reconcile("b", "y"))
    log.info("outside")
    lines = _lines(json_stream)
    by_name = {(ln["msg"], ln["name"]): ln for ln in lines}
    assert by_name[("reconciling", "x")]["cluster"] == "a"
    assert by_name[("reconciling", "y")]["cluster"] == "b"
    assert by_name[("done", "y")]["object"] == "ns/y"
    assert by_name[("done", "x")]["controller"] == "cm"
    outside = next(ln for ln in lines if ln["msg"] == "outside")
    assert outside["cluster"] == ""
    assert outside["name"] == ""
    assert current_fields() == {}


def test_key_value_format_and_exceptions() -> None:
    stream = io.StringIO()
    handler = setup_logging(logging.INFO, fmt="kv", stream=stream, logger="mcrtest2")
    try:
        log = logging.getLogger("mcrtest2")
        with log_context(controller="cm", cluster="zoo", namespace="default", name="a b"):
            try:
                raise ValueError("bad thing")
            except ValueError:
                log.exception("reconcile failed")
        log.debug("not shown")
    finally:
        logging.getLogger("mcrtest2").removeHandler(handler)
    text = stream.getvalue()
    first = text.splitlines()[0]
    assert 'msg="reconcile failed"' in first
    assert "controller=cm cluster=zoo namespace=default" in first
    assert 'name="a b"' in first
    assert 'error="bad thing"' in first
    assert "Traceback" in text
    assert "not shown" not in text


def test_repeat_setup_replaces_handler_and_get_logger_prefix() -> None:
    stream = io.StringIO()
    h1 = setup_logging(fmt="kv", stream=stream, logger="mcrtest3")
    h2 = setup_logging(fmt="json", stream=stream, logger="mcrtest3")
    try:
        assert h1 not in logging.getLogger("mcrtest3").handlers
        assert logging.getLogger("mcrtest3").handlers == [h2]
    finally:
        logging.getLogger("mcrtest3").removeHandler(h2)
    assert get_logger("manager").name == "mcr.manager"
    assert get_logger("mcr.cache").name == "mcr.cache"


def test_extra_fields_win_over_empty_context_fields_in_every_format() -> None:
    """A line about a cluster, logged outside any reconcile, names that cluster."""
    formats: tuple[Literal["kv"], Literal["json"]] = ("kv", "json")
    for fmt in formats:
        stream = io.StringIO()
        handler = setup_logging(logging.INFO, fmt=fmt, stream=stream, logger="mcrtest3")
        try:
            log = logging.getLogger("mcrtest3.manager")
            log.info("engaged cluster", extra={"cluster": "prod#eu-1"})
            with log_context(controller="cm", cluster="ctx-cluster"):
                log.info("replaced", extra={"cluster": "explicit"})
        finally:
            logging.getLogger("mcrtest3").removeHandler(handler)
        out = stream.getvalue().splitlines()
        if fmt == "kv":
            assert "cluster=prod#eu-1" in out[0], out[0]
            assert "cluster=explicit" in out[1]
            assert "controller=cm" in out[1]
        else:
            first, second = (json.loads(line) for line in out)
            assert first["cluster"] == "prod#eu-1"
            assert (second["cluster"], second["controller"]) == ("explicit", "cm")
