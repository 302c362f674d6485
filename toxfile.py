"""tox inline plugin: the interpreters version managers keep off ``PATH``, and the real lane's binaries.

pyenv (and uv) install several Python versions but put only one on ``PATH`` (pyenv's shims
fail for the others), so ``tox run-parallel -m test`` would not find Python 3.13 on a machine that has
it. Before tox looks for interpreters, this appends their ``bin`` directories to ``PATH``. An
interpreter that is really missing is skipped with a notice (``skip_missing_interpreters`` in
tox.ini); CI insists on both tested versions.

The ``real-*`` envs run the suites against kube-apiserver, etcd and kube-controller-manager.
Before their commands, ``tools/kube/build.sh`` builds the binaries (or finds them built) and the
env gets ``KUBEBUILDER_ASSETS``; a ``KUBEBUILDER_ASSETS`` already set is used as it is. Without a
Go toolchain the env is skipped with a notice, like a missing interpreter, unless missing
interpreters are not to be skipped (CI), where it fails.
"""

from __future__ import annotations

import glob
import os
import subprocess
from pathlib import Path
from typing import Any

from tox.plugin import impl
from tox.tox_env.errors import Fail, Skip

BUILD = Path(__file__).parent / "tools" / "kube" / "build.sh"
NO_GO = 3  # build.sh's exit status when there is no Go toolchain


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


def real_binaries() -> str:
    """The directory of the real control-plane binaries, built by ``tools/kube/build.sh`` if needed.

    Raises Skip (or Fail when missing interpreters must not be skipped) without a Go toolchain,
    and Fail when the build fails.
    """
    given = os.environ.get("KUBEBUILDER_ASSETS", "").strip()
    if given:
        return given
    done = subprocess.run(["bash", str(BUILD)], stdout=subprocess.PIPE, text=True, check=False)
    if done.returncode == NO_GO:
        message = "no Go toolchain to build kube-apiserver (tools/kube/build.sh)"
        if os.environ.get("TOX_SKIP_MISSING_INTERPRETERS", "").lower() == "false":
            raise Fail(message)
        raise Skip(message)
    if done.returncode != 0:
        raise Fail(f"tools/kube/build.sh failed with exit status {done.returncode}")
    return done.stdout.strip().splitlines()[-1]


@impl
def tox_before_run_commands(tox_env: Any) -> None:
    if tox_env.name.startswith("real"):
        tox_env.conf["set_env"].update({"KUBEBUILDER_ASSETS": real_binaries()})
