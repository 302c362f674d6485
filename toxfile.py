"""tox inline plugin: find the Python interpreters that version managers keep off ``PATH``.

pyenv (and uv) install several Python versions but put only one on ``PATH`` (pyenv's shims
fail for the others), so ``tox run -m test`` would not find Python 3.13 on a machine that has
it. Before tox looks for interpreters, this appends their ``bin`` directories to ``PATH``. An
interpreter that is really missing is skipped with a notice (``skip_missing_interpreters`` in
tox.ini); CI checks beforehand that both tested versions are present.
"""

from __future__ import annotations

import glob
import os
from typing import Any

from tox.plugin import impl


def interpreter_dirs() -> list[str]:
    """``bin`` directories of the CPython 3.x versions installed by pyenv or uv, newest first."""
    pyenv_root = os.environ.get("PYENV_ROOT") or os.path.expanduser("~/.pyenv")
    uv_root = os.environ.get("UV_PYTHON_INSTALL_DIR") or os.path.expanduser("~/.local/share/uv/python")
    found = glob.glob(os.path.join(pyenv_root, "versions", "3.*", "bin"))
    found += glob.glob(os.path.join(uv_root, "cpython-3.*", "bin"))
    return sorted((d for d in found if os.path.isdir(d)), reverse=True)


@impl
def tox_add_core_config(core_conf: Any, state: Any) -> None:
    path = os.environ.get("PATH", "").split(os.pathsep)
    extra = [d for d in interpreter_dirs() if d not in path]
    if extra:
        os.environ["PATH"] = os.pathsep.join([*path, *extra])
