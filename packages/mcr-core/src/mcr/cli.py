"""The ``mcr`` command.

``mcr providers`` lists the installed providers (name, distribution, version, description);
``--json`` prints the same as JSON. ``mcr --version`` prints mcr's version. ``python -m mcr``
is the same command. Exit status 0 on success; 1 when a plugin failed to load or
its hook failed (reported on stderr, naming the plugin and distribution; the providers that did
load are still listed); 2 on usage errors, reported on one line.

``mcr run APP`` runs a program's controllers in a manager configured by flags (see
:mod:`mcr.cli_run`). ``mcr manifests APP``, ``mcr fleet-rbac APP`` and ``mcr fleet-credentials
APP`` print (or create) what deploys it (see :mod:`mcr.cli_manifests`).
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Iterable, Sequence
from typing import NoReturn, TextIO

__all__ = ["main"]


def _providers(args: argparse.Namespace, out: TextIO, plugins: Iterable[object]) -> int:
    from mcr.plugins import load_registry, plugin_manager

    # The command reports load errors itself, below: a handler of its own keeps logging's
    # last-resort handler from printing each one a second time (handlers the program configured
    # still get them).
    quiet, logger = logging.NullHandler(), logging.getLogger("mcr.plugins")
    logger.addHandler(quiet)
    try:
        reg = load_registry(plugin_manager(plugins=plugins))
    finally:
        logger.removeHandler(quiet)
    for error in reg.load_errors:
        print(f"mcr: {error}", file=sys.stderr)
    status = 1 if reg.load_errors else 0
    rows = [(i.name, i.distribution, i.version, i.description) for i in reg]
    if args.json:
        keys = ("name", "distribution", "version", "description")
        json.dump([dict(zip(keys, row, strict=True)) for row in rows], out, indent=2)
        out.write("\n")
        return status
    header = ("NAME", "DISTRIBUTION", "VERSION", "DESCRIPTION")
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(3)]
    for row in [header, *rows]:
        out.write("  ".join(cell.ljust(w) for cell, w in zip(row[:3], widths, strict=True)))
        out.write(f"  {row[3]}".rstrip() + "\n")
    return status


class _Parser(argparse.ArgumentParser):
    """Usage errors on one line naming what is wrong, exit status 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def _parser() -> argparse.ArgumentParser:
    from mcr import __version__

    parser = _Parser(prog="mcr", description="mcr: multi-cluster controllers in Python")
    parser.add_argument("--version", action="version", version=f"mcr {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    providers = sub.add_parser("providers", help="list the installed cluster providers")
    providers.add_argument("--json", action="store_true", help="print JSON instead of a table")
    providers.set_defaults(func=_providers)
    from mcr.cli_run import add_run_parser

    add_run_parser(sub)
    from mcr.cli_manifests import add_manifests_parsers

    add_manifests_parsers(sub)
    sub.metavar = "{" + ",".join(sub.choices) + "}"
    return parser


def main(
    argv: Sequence[str] | None = None, *, out: TextIO | None = None, plugins: Iterable[object] = ()
) -> int:
    """Run the command line ``argv`` (default: ``sys.argv[1:]``); returns the exit status.

    ``out`` replaces stdout; ``plugins`` are registered in addition to the installed ones (for
    programs embedding the command).
    """
    args = _parser().parse_args(argv)
    try:
        status: int = args.func(args, out if out is not None else sys.stdout, plugins)
    except Exception as exc:  # noqa: BLE001 -- a broken plugin: report it, exit 1
        notes = "".join(f"\n  {note}" for note in getattr(exc, "__notes__", ()))
        print(f"mcr: cannot load the provider plugins: {type(exc).__name__}: {exc}{notes}", file=sys.stderr)
        return 1
    return status


if __name__ == "__main__":
    sys.exit(main())
