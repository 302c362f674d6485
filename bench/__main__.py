"""``python -m bench [name ...] [--option ...]``: run the named benchmark packages (all by default).

Every sub-package of ``bench`` that exposes ``main(argv)`` is a benchmark; the names come first,
and everything from the first argument starting with ``-`` on is passed to each one. Exits
non-zero when any benchmark fails or a name is unknown.
"""

from __future__ import annotations

import importlib
import pkgutil
import sys
from pathlib import Path


def available() -> list[str]:
    """Names of the benchmark packages next to this file, sorted."""
    return sorted(m.name for m in pkgutil.iter_modules([str(Path(__file__).parent)]) if m.ispkg)


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    first_option = next((i for i, a in enumerate(args) if a.startswith("-")), len(args))
    names, options = args[:first_option], args[first_option:]
    known = available()
    unknown = [n for n in names if n not in known]
    if unknown:
        print(f"unknown benchmark(s) {', '.join(unknown)}; available: {', '.join(known)}", file=sys.stderr)
        return 2
    status = 0
    for name in names or known:
        module = importlib.import_module(f"bench.{name}")
        run = getattr(module, "main", None)
        if run is None:
            continue
        print(f"== bench {name}", flush=True)
        code = run(options)
        status = status or int(code or 0)
    return status


if __name__ == "__main__":
    raise SystemExit(main())
