"""The README's first command runs examples/quickstart.py: run it as a user would and read its output."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

QUICKSTART = Path(__file__).resolve().parents[3] / "examples" / "quickstart.py"


def test_quickstart_reconciles_every_cluster_and_follows_the_fleet() -> None:
    proc = subprocess.run(
        [sys.executable, str(QUICKSTART), "--clusters", "2", "--configmaps", "2"],
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    out = proc.stdout
    assert proc.returncode == 0, f"exit {proc.returncode}\nstdout:\n{out}\nstderr:\n{proc.stderr}"
    assert "Every cluster reconciled: 2 clusters x 2 ConfigMaps" in out
    # Each table row: <cluster> <state> <count> <keys> of the greeting ConfigMaps the demo made;
    # the last table follows the removal.
    tables = [t for t in out.split("\n\n") if "greetings reconciled" in t]
    assert len(tables) == 3, out
    rows = [re.findall(r"(cluster-\d)\S*\s+(\w+)\s+(\d+)", t) for t in tables]
    assert sorted(rows[0]) == [("cluster-0", "synced", "2"), ("cluster-1", "synced", "2")]
    assert sorted(rows[1]) == [(f"cluster-{i}", "synced", "2") for i in range(3)]
    assert sorted(rows[2]) == [("cluster-1", "synced", "2"), ("cluster-2", "synced", "2")]
    # The reconciler's log lines name the cluster of every ConfigMap it reconciled.
    for i in range(3):
        assert re.search(
            rf"ConfigMap default/greeting-1 in cluster \S+cluster-{i}\.kubeconfig\+", proc.stderr
        )


def test_quickstart_rejects_a_bad_cluster_count() -> None:
    proc = subprocess.run(
        [sys.executable, str(QUICKSTART), "--clusters", "0"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 2
    assert "--clusters must be at least 1" in proc.stderr
