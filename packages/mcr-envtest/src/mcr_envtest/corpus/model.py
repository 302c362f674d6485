"""The corpus as data: sequences of steps, loaded from YAML files and checked on load.

A sequence file holds one mapping::

    name: configmap-crud            # unique over the corpus
    description: what it covers
    namespace: true                 # default: the runner makes a fresh namespace {{ns}} first
    ignore: [/status]               # pointers dropped from every step's bodies before comparing
    steps:
      - id: create                  # unique in the sequence (default step-<n>)
        method: POST
        path: /api/v1/namespaces/{{ns}}/configmaps
        query: {dryRun: All}        # optional, values substituted
        body: {...}                 # JSON body; a string is sent as it is
        content_type: application/merge-patch+json
        headers: {Impersonate-User: nobody}
        response_headers: [Warning]               # compare these response headers too
        save: {rv: /metadata/resourceVersion}     # variables for later steps, per server
        compare: full | status | none             # none: a setup step, not an exchange
        paths: [/resources/[name=pods]/verbs]     # compare only these parts of the body
        exists: [/definitions/io.k8s.api.core.v1.Pod]   # compare only whether these exist
        ignore: [/metadata/annotations]           # drop these before comparing
        until: {status: [404], equals: {/status/phase: Active}, timeout: 30}
        watch: {events: 3, timeout: 5}            # read a watch stream: at most 3 events or 5 s
    cleanup: [...]                  # steps run at the end, never compared

``{{name}}`` in paths, query values, headers and bodies is replaced by a variable: ``ns`` (the
sequence's namespace), ``run`` (a suffix unique to this run, for cluster-scoped names) and those
saved by earlier steps. A body string that is exactly ``{{name}}`` keeps the variable's type.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

__all__ = ["CorpusError", "Sequence", "Step", "Until", "Watch", "count_exchanges", "load_corpus", "load_file"]

SEQUENCES_DIR = Path(__file__).parent / "sequences"
METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE")
COMPARE_MODES = ("full", "status", "none")


class CorpusError(ValueError):
    """A corpus file is malformed; the message names the file, the sequence and the step."""


@dataclass(frozen=True)
class Until:
    """Repeat the request until its answer has one of ``status`` and every ``equals`` pointer
    holds its value (bounded by ``timeout`` seconds); the last answer is the one recorded."""

    status: tuple[int, ...] = ()
    equals: dict[str, Any] = field(default_factory=dict)
    timeout: float = 30.0
    interval: float = 0.1


@dataclass(frozen=True)
class Watch:
    """Read a watch stream: stop after ``events`` events, at its end, or after ``timeout`` s."""

    events: int = 1
    timeout: float = 5.0


@dataclass(frozen=True)
class Step:
    id: str
    method: str
    path: str
    query: dict[str, str] = field(default_factory=dict)
    body: Any = None
    content_type: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    response_headers: tuple[str, ...] = ()
    save: dict[str, str] = field(default_factory=dict)
    compare: str = "full"
    paths: tuple[str, ...] = ()
    exists: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()
    until: Until | None = None
    watch: Watch | None = None


@dataclass(frozen=True)
class Sequence:
    name: str
    description: str
    steps: tuple[Step, ...]
    file: Path
    namespace: bool = True
    ignore: tuple[str, ...] = ()
    cleanup: tuple[Step, ...] = ()

    @property
    def exchanges(self) -> int:
        """How many request/response pairs this sequence compares."""
        return sum(1 for s in self.steps if s.compare != "none")


_STEP_KEYS = {f.name for f in dataclasses.fields(Step)}


def _strs(value: Any, where: str, what: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise CorpusError(f"{where}: {what} must be a list of strings")
    return tuple(value)


def _str_map(value: Any, where: str, what: str) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise CorpusError(f"{where}: {what} must be a mapping")
    return {str(k): str(v) for k, v in value.items()}


def _pointers(values: tuple[str, ...], where: str, what: str) -> tuple[str, ...]:
    for p in values:
        if p and not p.startswith("/"):
            raise CorpusError(f"{where}: {what} pointer {p!r} must start with '/'")
    return values


def _step(raw: Any, where: str, index: int) -> Step:
    if not isinstance(raw, dict):
        raise CorpusError(f"{where}: step {index} must be a mapping")
    sid = str(raw.get("id", f"step-{index}"))
    where = f"{where}: step {sid!r}"
    unknown = set(raw) - _STEP_KEYS
    if unknown:
        raise CorpusError(f"{where}: unknown keys {sorted(unknown)}")
    method = str(raw.get("method", "GET")).upper()
    if method not in METHODS:
        raise CorpusError(f"{where}: method {method!r} is not one of {', '.join(METHODS)}")
    path = raw.get("path")
    if not isinstance(path, str) or not path.startswith("/"):
        raise CorpusError(f"{where}: path must be a string starting with '/'")
    compare = str(raw.get("compare", "full"))
    if compare not in COMPARE_MODES:
        raise CorpusError(f"{where}: compare {compare!r} is not one of {', '.join(COMPARE_MODES)}")
    until = None
    if raw.get("until") is not None:
        u = raw["until"]
        if not isinstance(u, dict) or set(u) - {"status", "equals", "timeout", "interval"}:
            raise CorpusError(f"{where}: until takes status, equals, timeout, interval")
        status = u.get("status", [])
        status = [status] if isinstance(status, int) else status
        equals = u.get("equals") or {}
        _pointers(tuple(equals), where, "until.equals")
        until = Until(
            tuple(int(s) for s in status),
            dict(equals),
            float(u.get("timeout", 30)),
            float(u.get("interval", 0.1)),
        )
    watch = None
    if raw.get("watch") is not None:
        w = raw["watch"]
        if not isinstance(w, dict) or set(w) - {"events", "timeout"}:
            raise CorpusError(f"{where}: watch takes events, timeout")
        watch = Watch(int(w.get("events", 1)), float(w.get("timeout", 5)))
    save = _str_map(raw.get("save"), where, "save")
    _pointers(tuple(save.values()), where, "save")
    return Step(
        id=sid,
        method=method,
        path=path,
        query=_str_map(raw.get("query"), where, "query"),
        body=raw.get("body"),
        content_type=raw.get("content_type"),
        headers=_str_map(raw.get("headers"), where, "headers"),
        response_headers=tuple(
            h.lower() for h in _strs(raw.get("response_headers"), where, "response_headers")
        ),
        save=save,
        compare=compare,
        paths=_pointers(_strs(raw.get("paths"), where, "paths"), where, "paths"),
        exists=_pointers(_strs(raw.get("exists"), where, "exists"), where, "exists"),
        ignore=_pointers(_strs(raw.get("ignore"), where, "ignore"), where, "ignore"),
        until=until,
        watch=watch,
    )


def _steps(raw: Any, where: str, what: str) -> tuple[Step, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise CorpusError(f"{where}: {what} must be a list of steps")
    steps = tuple(_step(s, where, i) for i, s in enumerate(raw))
    ids = [s.id for s in steps]
    dup = sorted({i for i in ids if ids.count(i) > 1})
    if dup:
        raise CorpusError(f"{where}: duplicate step ids {dup}")
    return steps


def load_file(path: Path) -> Sequence:
    """Load and check one sequence file (:class:`CorpusError` names what is wrong)."""
    try:
        raw = yaml.safe_load(path.read_text())
    except yaml.YAMLError as err:
        raise CorpusError(f"{path}: not valid YAML: {err}") from None
    if not isinstance(raw, dict):
        raise CorpusError(f"{path}: a sequence file holds one mapping")
    unknown = set(raw) - {"name", "description", "namespace", "ignore", "steps", "cleanup"}
    if unknown:
        raise CorpusError(f"{path}: unknown keys {sorted(unknown)}")
    name = raw.get("name")
    if not isinstance(name, str) or not name:
        raise CorpusError(f"{path}: name is missing")
    where = f"{path} ({name})"
    steps = _steps(raw.get("steps"), where, "steps")
    if not steps:
        raise CorpusError(f"{where}: no steps")
    return Sequence(
        name=name,
        description=str(raw.get("description", "")),
        steps=steps,
        file=path,
        namespace=bool(raw.get("namespace", True)),
        ignore=_pointers(_strs(raw.get("ignore"), where, "ignore"), where, "ignore"),
        cleanup=_steps(raw.get("cleanup"), where, "cleanup"),
    )


def load_corpus(directory: Path = SEQUENCES_DIR, names: tuple[str, ...] = ()) -> list[Sequence]:
    """Every ``*.yaml`` sequence in ``directory`` (sorted by file name), or only those whose name
    is in ``names``; raises :class:`CorpusError` for a malformed file, a duplicate name or an
    unknown name asked for."""
    sequences = [load_file(p) for p in sorted(directory.glob("*.yaml"))]
    seen: dict[str, Path] = {}
    for s in sequences:
        if s.name in seen:
            raise CorpusError(f"{s.file}: sequence name {s.name!r} is also used by {seen[s.name]}")
        seen[s.name] = s.file
    if names:
        missing = sorted(set(names) - set(seen))
        if missing:
            raise CorpusError(f"no sequence named {', '.join(missing)} in {directory}")
        sequences = [s for s in sequences if s.name in names]
    return sequences


def count_exchanges(sequences: list[Sequence]) -> int:
    """The number of compared request/response pairs in ``sequences``."""
    return sum(s.exchanges for s in sequences)
