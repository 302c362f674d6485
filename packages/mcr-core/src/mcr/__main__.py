"""``python -m mcr``: the ``mcr`` command (see :mod:`mcr.cli`)."""

from __future__ import annotations

import sys

from mcr.cli import main

if __name__ == "__main__":
    sys.exit(main())
