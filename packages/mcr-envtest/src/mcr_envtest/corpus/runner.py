"""Runs sequences against one or two servers and compares the answers step by step.

Each sequence runs in a fresh namespace of its own (made before its first step and deleted after
its cleanup steps; neither is compared) on each server; both servers run the same sequence at the
same time, and a few sequences run concurrently. A failed request (connection error, timeout) is
recorded as an answer with status 0 naming the error, so it shows as a difference, and the
sequence goes on.
"""

from __future__ import annotations

import asyncio
import re
import secrets
import time
from dataclasses import dataclass, field
from typing import Any

import aiohttp

from .client import Raw, Target
from .compare import Answer, Difference, compare
from .model import Sequence, Step
from .normalise import Normaliser
from .pointer import MISSING, resolve

__all__ = ["Outcome", "Run", "run_corpus", "run_sequence"]

VAR = re.compile(r"\{\{(\w+)\}\}")


@dataclass
class Run:
    """What one sequence got from one server: the normalised answer to each compared step."""

    target: str
    answers: dict[str, Answer] = field(default_factory=dict)
    seconds: float = 0.0


@dataclass
class Outcome:
    """One sequence's runs and, with a reference, the differences per step id."""

    sequence: Sequence
    against: Run
    reference: Run | None
    differences: dict[str, list[Difference]] = field(default_factory=dict)


def substitute(value: Any, variables: dict[str, Any]) -> Any:
    """``value`` with every ``{{name}}`` replaced; a string that is exactly one variable takes the
    variable's value (and type). An unknown variable is left as it is."""
    if isinstance(value, str):
        whole = VAR.fullmatch(value)
        if whole and whole.group(1) in variables:
            return variables[whole.group(1)]
        return VAR.sub(lambda m: str(variables.get(m.group(1), m.group(0))), value)
    if isinstance(value, dict):
        return {substitute(k, variables): substitute(v, variables) for k, v in value.items()}
    if isinstance(value, list):
        return [substitute(v, variables) for v in value]
    return value


def _holds(step: Step, raw: Raw) -> bool:
    until = step.until
    assert until is not None
    if until.status and raw.status not in until.status:
        return False
    return all(resolve(raw.body, p) == want for p, want in until.equals.items())


async def _send(target: Target, step: Step, variables: dict[str, Any]) -> Raw:
    path = substitute(step.path, variables)
    query = {k: str(substitute(v, variables)) for k, v in step.query.items()}
    headers = {k: str(substitute(v, variables)) for k, v in step.headers.items()}
    body = substitute(step.body, variables)
    try:
        if step.watch is not None:
            return await target.watch(path, query, step.watch.events, step.watch.timeout, headers)
        return await target.request(step.method, path, query, body, step.content_type, headers)
    except (aiohttp.ClientError, TimeoutError) as err:
        return Raw(0, "", f"{step.method} {path}: {err!r}")


async def _run_step(target: Target, step: Step, variables: dict[str, Any]) -> Raw:
    raw = await _send(target, step, variables)
    if step.until is None:
        return raw
    deadline = time.monotonic() + step.until.timeout
    while not _holds(step, raw) and time.monotonic() < deadline:
        await asyncio.sleep(step.until.interval)  # polling a server that converges on its own
        raw = await _send(target, step, variables)
    return raw


async def run_sequence(seq: Sequence, target: Target, run_id: str) -> Run:
    """Run ``seq`` against ``target``; the namespace is ``c-<run_id>-<name>`` (cut to 63)."""
    started = time.monotonic()
    ns = f"c-{run_id}-{seq.name}"[:63].rstrip("-")
    variables: dict[str, Any] = {"ns": ns, "run": run_id}
    result = Run(target.name)
    normalise = Normaliser()
    if seq.namespace:
        await target.request("POST", "/api/v1/namespaces", body={"metadata": {"name": ns}})
    try:
        for step in seq.steps:
            raw = await _run_step(target, step, variables)
            for var, pointer in step.save.items():
                value = resolve(raw.body, pointer)
                variables[var] = "" if value is MISSING else value
            # every answer is normalised, so that placeholders learnt from setup steps are used
            body = normalise(raw.body)
            if step.compare != "none":
                headers = {h: normalise(raw.headers[h]) for h in step.response_headers if h in raw.headers}
                result.answers[step.id] = Answer(raw.status, raw.content_type, body, headers)
    finally:
        for step in seq.cleanup:
            await _run_step(target, step, variables)
        if seq.namespace:
            await target.request("DELETE", f"/api/v1/namespaces/{ns}")
    result.seconds = time.monotonic() - started
    return result


async def _outcome(seq: Sequence, against: Target, reference: Target | None, run_id: str) -> Outcome:
    if reference is None:
        return Outcome(seq, await run_sequence(seq, against, run_id), None)
    async with asyncio.TaskGroup() as tg:
        ta = tg.create_task(run_sequence(seq, against, run_id))
        tb = tg.create_task(run_sequence(seq, reference, run_id))
    a, b = ta.result(), tb.result()
    out = Outcome(seq, a, b)
    for step in seq.steps:
        if step.compare == "none":
            continue
        found = compare(step, seq.ignore, a.answers[step.id], b.answers[step.id])
        if found:
            out.differences[step.id] = found
    return out


async def run_corpus(
    sequences: list[Sequence], against: Target, reference: Target | None = None, concurrency: int = 4
) -> list[Outcome]:
    """Run every sequence against ``against`` (and ``reference`` at the same time), at most
    ``concurrency`` sequences at once; outcomes come back in the order of ``sequences``.
    Cancelling cancels the sequences still running."""
    run_id = secrets.token_hex(3)
    gate = asyncio.Semaphore(concurrency)

    async def one(seq: Sequence) -> Outcome:
        async with gate:
            return await _outcome(seq, against, reference, run_id)

    async with asyncio.TaskGroup() as tg:
        tasks = [tg.create_task(one(s)) for s in sequences]
    return [t.result() for t in tasks]
