"""A ``kind``-compatible command backed by local mcr-envtest servers (no Docker needed).

``mcr-envtest kind ...`` (also installed as ``mcr-envtest-kind``; put it on ``PATH`` as ``kind``)
answers the commands tools run against kind, with kind's output formats and exit codes:

* ``create cluster [--name N] [--kubeconfig P] [--wait D]``: start a detached ``mcr-envtest serve``
  process for cluster ``N`` (default ``kind``) and merge its kubeconfig, with cluster, user and
  context named ``kind-N``, into ``P`` / ``$KUBECONFIG`` / ``~/.kube/config``, as kind does;
* ``get clusters``: one name per line, sorted (``No kind clusters found.`` on stderr when none);
* ``get kubeconfig [--name N] [--internal]``: the cluster's kubeconfig on stdout;
* ``delete cluster [--name N] [--kubeconfig P]``: stop it and remove its kubeconfig entries
  (nothing to delete is not an error, as with kind); ``delete clusters --all | N...``;
* ``version``.

Each cluster is a process that outlives the command that created it. Its state — pid, admin
kubeconfig, log — lives in ``$MCR_ENVTEST_KIND_HOME/<name>/`` (default
``$XDG_STATE_HOME/mcr-envtest/kind``, i.e. ``~/.local/state/mcr-envtest/kind``), so every command
in any process sees the same clusters. A cluster whose process died is cleaned up and not listed.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from . import fleetctl
from ._version import __version__

__all__ = ["home", "main"]

_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


def home() -> Path:
    """The directory holding one sub-directory per cluster."""
    explicit = os.environ.get("MCR_ENVTEST_KIND_HOME")
    if explicit:
        return Path(explicit)
    state = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(state) / "mcr-envtest" / "kind"


def _alive(pid: int) -> bool:
    if not fleetctl._alive(pid):
        return False
    # A zombie (exited, not yet reaped by its parent) counts as gone.
    with contextlib.suppress(ChildProcessError):
        done, _ = os.waitpid(pid, os.WNOHANG)
        if done == pid:
            return False
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rpartition(")")[2].split()[:1] != ["Z"]


def _pid(directory: Path) -> int | None:
    try:
        return int((directory / "pid").read_text())
    except (OSError, ValueError):
        return None


def _clusters() -> list[str]:
    """Names of the running clusters; the directories of dead ones are removed."""
    root = home()
    if not root.is_dir():
        return []
    names = []
    for directory in sorted(root.iterdir()):
        if not directory.is_dir():
            continue
        pid = _pid(directory)
        if pid is None or not _alive(pid):
            if (directory / "kubeconfig").exists() or pid is not None:
                shutil.rmtree(directory, ignore_errors=True)
            continue
        names.append(directory.name)
    return names


def _kind_kubeconfig(name: str) -> dict[str, Any]:
    """The cluster's admin kubeconfig with cluster, user and context named ``kind-<name>``."""
    doc = yaml.safe_load((home() / name / "kubeconfig").read_text())
    if not isinstance(doc, dict):
        raise ValueError(f"the kubeconfig of cluster {name!r} is not a mapping")
    ctx_name = f"kind-{name}"
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "preferences": {},
        "clusters": [{"name": ctx_name, "cluster": doc["clusters"][0]["cluster"]}],
        "users": [{"name": ctx_name, "user": doc["users"][0]["user"]}],
        "contexts": [{"name": ctx_name, "context": {"cluster": ctx_name, "user": ctx_name}}],
        "current-context": ctx_name,
    }


def _kubeconfig_path(explicit: str | None) -> Path:
    if explicit:
        return Path(explicit)
    env = os.environ.get("KUBECONFIG")
    if env:
        return Path(env.split(os.pathsep)[0])
    return Path.home() / ".kube" / "config"


def _merge(path: Path, entry: dict[str, Any] | None, remove: str) -> None:
    """Replace (or with ``entry=None`` remove) the ``remove`` entries of the kubeconfig at ``path``."""
    doc: dict[str, Any] = {}
    if path.exists():
        loaded = yaml.safe_load(path.read_text())
        doc = loaded if isinstance(loaded, dict) else {}
    elif entry is None:
        return
    doc.setdefault("apiVersion", "v1")
    doc.setdefault("kind", "Config")
    for section in ("clusters", "users", "contexts"):
        items = [i for i in doc.get(section) or [] if i.get("name") != remove]
        if entry is not None:
            items.extend(entry[section])
        doc[section] = items
    if entry is not None:
        doc["current-context"] = remove
    elif doc.get("current-context") == remove:
        doc["current-context"] = ""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(yaml.safe_dump(doc, sort_keys=False))
    tmp.chmod(0o600)
    tmp.replace(path)


def _duration(text: str) -> float:
    match = re.fullmatch(r"(\d+(?:\.\d+)?)(ms|s|m|h)?", text)
    if not match:
        raise argparse.ArgumentTypeError(f"invalid duration {text!r} (e.g. 30s, 1m)")
    value, unit = float(match.group(1)), match.group(2) or "s"
    return value * {"ms": 0.001, "s": 1, "m": 60, "h": 3600}[unit]


def _err(message: str) -> int:
    print(f"ERROR: {message}", file=sys.stderr)
    return 1


def _create(args: argparse.Namespace) -> int:
    name = args.name
    if not _NAME.match(name):
        return _err(f"failed to create cluster: '{name}' is not a valid cluster name")
    if name in _clusters():
        return _err(f'failed to create cluster: node(s) already exist for a cluster with the name "{name}"')
    directory = home() / name
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True)
    print(f'Creating cluster "{name}" ...', file=sys.stderr)
    with (directory / "log").open("wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-c", "from mcr_envtest.cli import main; raise SystemExit(main())",
             "serve", "--kubeconfig", str(directory / "kubeconfig")],
            stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True,
        )  # fmt: skip
    (directory / "pid").write_text(str(proc.pid))
    deadline = time.monotonic() + max(args.wait, 30.0)
    kubeconfig = directory / "kubeconfig"
    while not (kubeconfig.exists() and kubeconfig.stat().st_size):
        if proc.poll() is not None or time.monotonic() > deadline:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            proc.wait()
            detail = (directory / "log").read_text(errors="replace").strip().splitlines()[-1:] or [
                "no output"
            ]
            shutil.rmtree(directory, ignore_errors=True)
            return _err(f"failed to create cluster: the API server did not start: {detail[0]}")
        time.sleep(0.05)
    print(" ✓ Starting control-plane (mcr-envtest) 🕹️", file=sys.stderr)
    path = _kubeconfig_path(args.kubeconfig)
    _merge(path, _kind_kubeconfig(name), f"kind-{name}")
    print(f'Set kubectl context to "kind-{name}"', file=sys.stderr)
    print(
        f"You can now use your cluster with:\n\nkubectl cluster-info --context kind-{name}", file=sys.stderr
    )
    return 0


def _stop(name: str) -> bool:
    directory = home() / name
    pid = _pid(directory)
    if pid is None or not directory.exists():
        shutil.rmtree(directory, ignore_errors=True)
        return False
    if _alive(pid):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + 10
        while _alive(pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        if _alive(pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    shutil.rmtree(directory, ignore_errors=True)
    return True


def _delete(args: argparse.Namespace) -> int:
    if args.what == "cluster":
        print(f'Deleting cluster "{args.name}" ...', file=sys.stderr)
        _stop(args.name)
        _merge(_kubeconfig_path(args.kubeconfig), None, f"kind-{args.name}")
        return 0
    names = _clusters() if args.all else list(args.names)
    deleted = []
    for name in names:
        if _stop(name):
            deleted.append(name)
        _merge(_kubeconfig_path(args.kubeconfig), None, f"kind-{name}")
    print(f"Deleted clusters: {deleted}", file=sys.stderr)
    return 0


def _get(args: argparse.Namespace) -> int:
    if args.what == "clusters":
        names = _clusters()
        if not names:
            print("No kind clusters found.", file=sys.stderr)
        for name in names:
            print(name)
        return 0
    if args.what == "kubeconfig":
        if args.name not in _clusters():
            return _err(f"could not locate any control plane nodes for cluster named '{args.name}'")
        try:
            doc = _kind_kubeconfig(args.name)
        except (OSError, ValueError, KeyError, IndexError, yaml.YAMLError) as exc:
            return _err(f"failed to get cluster internal kubeconfig: {exc}")
        sys.stdout.write(yaml.safe_dump(doc, sort_keys=False))
        return 0
    return _err(f"unknown resource {args.what!r}")


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="kind", description="kind-compatible clusters backed by mcr-envtest")
    sub = p.add_subparsers(dest="command", required=True)
    create = sub.add_parser("create").add_subparsers(dest="what", required=True).add_parser("cluster")
    create.add_argument("--name", "-n", default="kind")
    create.add_argument("--kubeconfig")
    create.add_argument("--wait", type=_duration, default=60.0)
    create.add_argument("--image", help="ignored: there is no node image")
    create.add_argument("--config", help="ignored: there are no nodes to configure")
    get = sub.add_parser("get")
    get.add_argument("what", choices=["clusters", "kubeconfig", "nodes"])
    get.add_argument("--name", "-n", default="kind")
    get.add_argument("--internal", action="store_true", help="same as without: no node network here")
    delete = sub.add_parser("delete").add_subparsers(dest="what", required=True)
    one = delete.add_parser("cluster")
    one.add_argument("--name", "-n", default="kind")
    one.add_argument("--kubeconfig")
    many = delete.add_parser("clusters")
    many.add_argument("names", nargs="*")
    many.add_argument("--all", "-A", action="store_true")
    many.add_argument("--kubeconfig")
    sub.add_parser("version")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``mcr-envtest kind`` and ``mcr-envtest-kind``; returns the exit code."""
    args = _parser().parse_args(argv)
    if args.command == "version":
        print(f"kind v0.27.0 (mcr-envtest {__version__}) {sys.platform}")
        return 0
    if args.command == "create":
        return _create(args)
    if args.command == "delete":
        return _delete(args)
    if args.what == "nodes":
        names = _clusters()
        if args.name in names:
            print(f"{args.name}-control-plane")
            return 0
        print(f'No kind nodes found for cluster "{args.name}".', file=sys.stderr)
        return 0
    return _get(args)


if __name__ == "__main__":
    sys.exit(main())
