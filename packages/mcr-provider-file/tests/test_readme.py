"""The README's sample controller runs as printed: against a fleet, it reconciles in every cluster
and stops cleanly on SIGTERM."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import kubernetes

from mcr_envtest import FleetThread

README = Path(__file__).resolve().parents[3] / "README.md"


def _sample() -> str:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    assert blocks, "README has no python sample"
    return blocks[0]


def test_readme_sample_reconciles_every_cluster_and_stops_on_sigterm(tmp_path: Path) -> None:
    script = tmp_path / "sample.py"
    script.write_text(_sample())
    with FleetThread(2, kubeconfig_dir=tmp_path / "fleet") as fleet:
        with subprocess.Popen(
            [sys.executable, str(script), str(tmp_path / "fleet")],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        ) as proc:
            code, stderr = _drive(proc, fleet)
        assert code == 0, stderr


def _wait_for(what: str, lines: list[str], proc: subprocess.Popen[str], pattern: str) -> None:
    deadline = time.monotonic() + 60
    while not any(re.search(pattern, line) for line in list(lines)):
        assert proc.poll() is None, f"sample exited early while waiting for {what}"
        assert time.monotonic() < deadline, f"no {what} within 60s: {lines}"
        time.sleep(0.05)


def _drive(proc: subprocess.Popen[str], fleet: FleetThread) -> tuple[int, str]:
    """Create a ConfigMap per cluster, wait for the sample to reconcile each, remove one cluster's
    kubeconfig file, then SIGTERM it. Returns the exit code and what it logged."""
    lines: list[str] = []
    logged: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(proc.stdout or ()), daemon=True)
    reader.start()
    log_reader = threading.Thread(target=lambda: logged.extend(proc.stderr or ()), daemon=True)
    log_reader.start()
    try:
        # It says which clusters it engaged.
        for path in fleet.kubeconfig_paths:
            _wait_for(
                f"engage line for {path}",
                logged,
                proc,
                rf'msg="engaged cluster" cluster={re.escape(str(path))}\+',
            )
        for i, server in enumerate(fleet.servers):
            with kubernetes.config.new_client_from_config_dict(server.kubeconfig) as api:
                kubernetes.client.CoreV1Api(api).create_namespaced_config_map(
                    "default", {"metadata": {"name": "hello"}, "data": {"from": f"cluster-{i}"}}
                )
        deadline = time.monotonic() + 60
        want = {f"cluster-{i}" for i in range(2)}
        while time.monotonic() < deadline:
            seen = {m for line in list(lines) for m in re.findall(r"data=\{'from': '(cluster-\d)'\}", line)}
            if seen >= want:
                break
            assert proc.poll() is None, f"sample exited early: {proc.stderr.read() if proc.stderr else ''}"
            time.sleep(0.1)
        else:
            raise AssertionError(f"not every cluster reconciled: {lines}")
        # Request strings carry the cluster: cluster://<path>+<context>/default/hello
        assert any(re.match(r"cluster://\S+cluster-1\.kubeconfig\+\S+/default/hello ", x) for x in lines)
        # Removing a kubeconfig file disengages its cluster, and the sample says so.
        gone = fleet.kubeconfig_paths[0]
        gone.unlink()
        _wait_for(
            "disengage line", logged, proc, rf'msg="disengaged cluster" cluster={re.escape(str(gone))}\+'
        )
    finally:
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=60)
        reader.join(timeout=10)
        log_reader.join(timeout=10)
    return code, "".join(logged)
