"""The chaos tests' model of what a frozen replica ran (chaos_fleet.as_worked), on made-up logs:
it excuses only what a stopped process could not have run, never a piece that completed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mcr.testing import import_script

chaos = import_script(Path(__file__).with_name("chaos_fleet.py"))

FROZEN = {"a": [(10.0, 20.0)]}  # replica "a" stopped at 10 s, resumed at 20 s


def piece(r: str, c: str, s: float, e: float, *, cancelled: bool = False) -> dict[str, Any]:
    return {"r": r, "c": c, "s": s, "e": e, **({"x": 1} if cancelled else {})}


def test_a_cancelled_piece_in_flight_at_the_stop_ends_there() -> None:
    worked = chaos.as_worked([piece("a", "c1", 9.99, 20.05, cancelled=True)], FROZEN)
    assert worked == [piece("a", "c1", 9.99, 10.0, cancelled=True)]
    assert chaos.overlaps([*worked, piece("b", "c1", 12.0, 12.03)]) == []


def test_a_completed_piece_across_the_freeze_keeps_its_interval_and_overlaps() -> None:
    late = piece("a", "c1", 9.99, 20.05)
    worked = chaos.as_worked([late], FROZEN)
    assert worked == [late]
    other = piece("b", "c1", 12.0, 12.03)
    assert chaos.overlaps([*worked, other]) == [(late, other)]


def test_only_each_tasks_first_cancelled_piece_after_the_resumption_is_left_out() -> None:
    entries = [
        piece("a", "c1", 20.01, 20.02, cancelled=True),  # checked before the stop: left out
        piece("a", chaos.RUNNABLE, 20.01, 20.02, cancelled=True),  # the runnable's own first: left out
        piece("a", "c2", 20.5, 20.6, cancelled=True),  # a later start needed a check after resuming
        piece("a", chaos.RUNNABLE, 21.0, 21.1),
    ]
    assert chaos.as_worked(entries, FROZEN) == entries[2:]


def test_a_completed_first_piece_after_the_resumption_is_kept() -> None:
    entries = [piece("a", "c1", 20.01, 20.05), piece("a", "c2", 20.06, 20.07, cancelled=True)]
    assert chaos.as_worked(entries, FROZEN) == entries


def test_a_replica_never_frozen_is_taken_as_logged() -> None:
    entries = [piece("b", "c1", 20.01, 20.02, cancelled=True), piece("b", "c1", 5.0, 25.0, cancelled=True)]
    assert chaos.as_worked(entries, FROZEN) == entries


def test_leadership_overlaps_across_clusters_only_when_global() -> None:
    one, two = piece("b", "c1", 1.0, 2.0), piece("a", "c2", 1.5, 2.5)
    assert chaos.overlaps([one, two]) == []
    assert chaos.overlaps([one, two], global_=True) == [(one, two)]
