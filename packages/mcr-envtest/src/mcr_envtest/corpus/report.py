"""The allow-list of accepted differences, and the report of a corpus run.

``allowlist.yaml`` has three lists of entries, each ``{sequence, step, path, reason}``:
``allowed`` (differences that are acceptable for good, with the reason why), ``being_fixed``
(known faults of mcr-envtest whose fixes are under way) and ``to_fix`` (faults the corpus found
that nobody fixes yet). The last two are meant to become empty; the report names their entries
apart from the accepted ones.
``sequence`` and ``step`` are shell-style patterns (``*`` matches all); ``path`` is a pointer
prefix: the entry covers a difference at that pointer or below it (``<status>``,
``<content-type>`` and ``<header:NAME>`` name those; no ``path`` covers the whole step). A path
with ``*`` is a shell-style pattern whose ``*`` also matches ``/`` (``/items/*/kind``,
``*/fieldsV1/*/.``), again covering what lies below a match.
"""

from __future__ import annotations

import fnmatch
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import yaml

from .compare import Answer, Difference
from .model import CorpusError, Sequence
from .runner import Outcome

__all__ = ["ALLOWLIST", "Allowance", "Report", "load_allowlist"]

ALLOWLIST = Path(__file__).parent / "allowlist.yaml"
SECTIONS = ("allowed", "being_fixed", "to_fix")


@dataclass(frozen=True)
class Allowance:
    sequence: str
    step: str
    path: str | None
    reason: str
    section: str = "allowed"

    def covers(self, sequence: str, step: str, diff: Difference) -> bool:
        if not fnmatch.fnmatchcase(sequence, self.sequence) or not fnmatch.fnmatchcase(step, self.step):
            return False
        if self.path is None:
            return True
        if "*" in self.path:
            return any(fnmatch.fnmatchcase(diff.path, p) for p in (self.path, self.path + "/*"))
        return diff.path == self.path or diff.path.startswith(self.path.rstrip("/") + "/")

    def __str__(self) -> str:
        where = f"{self.sequence}/{self.step}" + (f" {self.path}" if self.path else "")
        return f"{where}: {self.reason}"


def load_allowlist(path: Path = ALLOWLIST) -> list[Allowance]:
    """The entries of an allow-list file; :class:`CorpusError` names a malformed entry."""
    try:
        raw = yaml.safe_load(path.read_text()) or {}
    except (OSError, yaml.YAMLError) as err:
        raise CorpusError(f"{path}: cannot read the allow-list: {err}") from None
    if not isinstance(raw, dict) or set(raw) - set(SECTIONS):
        raise CorpusError(f"{path}: the allow-list holds the lists {', '.join(SECTIONS)}")
    out = []
    for section in SECTIONS:
        for i, entry in enumerate(raw.get(section) or []):
            if not isinstance(entry, dict) or set(entry) - {"sequence", "step", "path", "reason"}:
                raise CorpusError(f"{path}: {section}[{i}] takes sequence, step, path, reason")
            if not str(entry.get("reason", "")).strip():
                raise CorpusError(f"{path}: {section}[{i}] needs a reason")
            out.append(
                Allowance(
                    str(entry.get("sequence", "*")),
                    str(entry.get("step", "*")),
                    entry.get("path"),
                    " ".join(str(entry["reason"]).split()),
                    section,
                )
            )
    return out


def _short(value: Any, limit: int = 160) -> str:
    text = value if isinstance(value, str) else orjson.dumps(value, default=repr).decode()
    return text if len(text) <= limit else text[: limit - 3] + "..."


@dataclass
class Report:
    """The outcome of a corpus run judged against an allow-list."""

    outcomes: list[Outcome]
    allowlist: list[Allowance]
    failures: list[tuple[str, str, Difference]] = field(default_factory=list)
    allowed: Counter[Allowance] = field(default_factory=Counter)

    def __post_init__(self) -> None:
        for out in self.outcomes:
            for step, diffs in out.differences.items():
                for d in diffs:
                    entry = next((e for e in self.allowlist if e.covers(out.sequence.name, step, d)), None)
                    if entry is None:
                        self.failures.append((out.sequence.name, step, d))
                    else:
                        self.allowed[entry] += 1

    @property
    def ok(self) -> bool:
        """No difference outside the allow-list."""
        return not self.failures

    @property
    def sequences(self) -> list[Sequence]:
        return [o.sequence for o in self.outcomes]

    def dump(self) -> dict[str, Any]:
        """Every normalised answer (and, with a reference, each step's differences) as JSON-ready
        data: ``{sequence: {step: {"against": ..., "reference": ..., "differences": [...]}}}``."""

        def answer(a: Answer | None) -> Any:
            if a is None:
                return None
            return {"status": a.status, "content_type": a.content_type, "headers": a.headers, "body": a.body}

        out: dict[str, Any] = {}
        for o in self.outcomes:
            steps: dict[str, Any] = {}
            for step_id, a in o.against.answers.items():
                b = o.reference.answers.get(step_id) if o.reference else None
                diffs = o.differences.get(step_id, [])
                steps[step_id] = {
                    "against": answer(a),
                    "reference": answer(b),
                    "differences": [
                        {"path": d.path, "against": d.against, "reference": d.reference} for d in diffs
                    ],
                }
            out[o.sequence.name] = steps
        return out

    def format(self) -> str:
        """A plain-text report: totals, each difference outside the allow-list, the allow-list
        entries that matched (and those that matched nothing), and the slowest sequences."""
        exchanges = sum(s.exchanges for s in self.sequences)
        compared = any(o.reference is not None for o in self.outcomes)
        lines = [
            f"corpus: {len(self.outcomes)} sequences, {exchanges} exchanges",
        ]
        if not compared:
            lines.append("no reference server: the answers' status codes per sequence")
            for o in self.outcomes:
                codes = Counter(a.status for a in o.against.answers.values())
                summary = ", ".join(f"{c} x{n}" for c, n in sorted(codes.items()))
                lines.append(f"  {o.sequence.name} ({o.against.seconds:.1f}s): {summary}")
            return "\n".join(lines)
        differing = sum(len(o.differences) for o in self.outcomes)
        lines.append(
            f"{differing} exchanges differ; {len(self.failures)} differences outside the allow-list,"
            f" {sum(self.allowed.values())} allowed"
        )
        if self.failures:
            lines.append("")
            lines.append("DIFFERENCES (against | reference):")
            for seq, step, d in self.failures:
                lines.append(f"  {seq}/{step} {d.path or '/'}: {_short(d.against)} | {_short(d.reference)}")
        if self.allowed:
            lines.append("")
            lines.append("allowed differences (entry: count):")
            for section in SECTIONS:
                for entry, n in self.allowed.items():
                    if entry.section == section:
                        lines.append(f"  [{section}] {entry}: {n}")
        ran = [(o.sequence.name, step) for o in self.outcomes for step in o.against.answers]
        unused = [
            e
            for e in self.allowlist
            if e not in self.allowed
            and any(fnmatch.fnmatchcase(q, e.sequence) and fnmatch.fnmatchcase(s, e.step) for q, s in ran)
        ]
        if unused:
            lines.append("")
            lines.append(
                f"{len(unused)} allow-list entries for steps that ran matched nothing (remove them?):"
            )
            lines.extend(f"  {e}" for e in unused[:30])
            if len(unused) > 30:
                lines.append(f"  ... and {len(unused) - 30} more")

        def took(o: Outcome) -> float:
            return max(o.against.seconds, o.reference.seconds if o.reference else 0.0)

        slow = sorted(self.outcomes, key=took, reverse=True)[:5]
        lines.append("")
        lines.append("slowest sequences: " + ", ".join(f"{o.sequence.name} {took(o):.1f}s" for o in slow))
        return "\n".join(lines)
