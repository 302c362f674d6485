"""``python -m mcr_envtest.corpus``: run the differential corpus and print its report.

    python -m mcr_envtest.corpus                       # fresh mcr-envtest vs fresh kube-apiserver
    python -m mcr_envtest.corpus --against URL --kubeconfig F --reference real
    python -m mcr_envtest.corpus --against URL --kubeconfig F \\
        --reference URL2 --reference-kubeconfig F2     # two running servers
    python -m mcr_envtest.corpus --reference none      # one server: status codes per sequence
    python -m mcr_envtest.corpus --dump answers.json   # also write every answer and difference

``--against`` is the server under test: ``envtest`` (default: a fresh mcr-envtest in this
process), ``real`` (a fresh kube-apiserver from ``KUBEBUILDER_ASSETS``) or a URL whose
credentials come from ``--kubeconfig`` (its current context; its server when no URL is given).
``--reference`` is the same for the server it is compared with; it defaults to ``real`` when
``KUBEBUILDER_ASSETS`` is set, else ``none``. Exit status: 0 when every difference is on the
allow-list, 1 when one is not, 2 for usage errors (a bad kubeconfig, an unknown sequence).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import orjson

from mcr_envtest import Server
from mcr_envtest.real import ENV, close_default_pool

from .client import Target, TargetError
from .model import SEQUENCES_DIR, CorpusError, count_exchanges, load_corpus
from .report import ALLOWLIST, Report, load_allowlist
from .runner import run_corpus


@contextlib.asynccontextmanager
async def _target(
    flag: str, spec: str, kubeconfig: str | None, kubeconfig_flag: str
) -> AsyncIterator[Target]:
    if spec in ("envtest", "real"):
        async with Server(real=spec == "real") as srv, Target(spec, srv.kubeconfig) as target:
            yield target
        return
    if kubeconfig is None:
        raise TargetError(f"{flag} {spec}: give its credentials with {kubeconfig_flag}")
    async with Target(spec, kubeconfig, spec) as target:
        yield target


async def _main(args: argparse.Namespace) -> Report | None:
    sequences = load_corpus(Path(args.sequences), tuple(args.sequence))
    allowlist = load_allowlist(Path(args.allowlist))
    if args.list:
        for s in sequences:
            print(f"{s.name} ({s.exchanges}): {s.description}")
        print(f"{len(sequences)} sequences, {count_exchanges(sequences)} exchanges")
        return None
    async with contextlib.AsyncExitStack() as stack:
        against = await stack.enter_async_context(
            _target("--against", args.against, args.kubeconfig, "--kubeconfig")
        )
        reference = None
        if args.reference != "none":
            reference = await stack.enter_async_context(
                _target("--reference", args.reference, args.reference_kubeconfig, "--reference-kubeconfig")
            )
        outcomes = await run_corpus(sequences, against, reference, concurrency=args.concurrency)
    return Report(outcomes, allowlist)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m mcr_envtest.corpus", description=__doc__.split("\n")[0])
    parser.add_argument("--against", default="envtest", help="envtest (default), real, or a URL")
    parser.add_argument("--kubeconfig", help="credentials for --against URL")
    parser.add_argument(
        "--reference",
        default="real" if os.environ.get(ENV) else "none",
        help="real (default with KUBEBUILDER_ASSETS set), envtest, a URL, or none",
    )
    parser.add_argument("--reference-kubeconfig", help="credentials for --reference URL")
    parser.add_argument("--sequence", action="append", default=[], help="run only this sequence (repeatable)")
    parser.add_argument("--sequences", default=str(SEQUENCES_DIR), help="directory of sequence files")
    parser.add_argument("--allowlist", default=str(ALLOWLIST), help="allow-list file")
    parser.add_argument("--concurrency", type=int, default=4, help="sequences run at once (default 4)")
    parser.add_argument("--list", action="store_true", help="list the sequences and exit")
    parser.add_argument("--dump", metavar="FILE", help="write every normalised answer and difference as JSON")
    args = parser.parse_args(argv)
    try:
        report = asyncio.run(_main(args))
    except (CorpusError, TargetError) as err:
        print(f"mcr_envtest.corpus: {err}", file=sys.stderr)
        return 2
    finally:
        close_default_pool()
    if report is None:
        return 0
    if args.dump:
        Path(args.dump).write_bytes(orjson.dumps(report.dump(), default=repr, option=orjson.OPT_INDENT_2))
    print(report.format())
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
