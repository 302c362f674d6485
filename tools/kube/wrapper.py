"""Write the go.mod of a wrapper module that builds one Kubernetes release's binaries.

Usage: ``python3 wrapper.py KUBERNETES_GO_MOD VERSION > go.mod``

KUBERNETES_GO_MOD is k8s.io/kubernetes's own go.mod at that release (``go mod download -json``
names it). Each of its replace directives that points into ``./staging`` becomes a replace with the
staging module's published ``v0.<minor>.<patch>``; the list changes between minors, so it is read,
never written down. etcd's server is required at the version Kubernetes pins.
"""

from __future__ import annotations

import json
import subprocess
import sys


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print("usage: wrapper.py KUBERNETES_GO_MOD VERSION", file=sys.stderr)
        return 2
    gomod, version = argv[1], argv[2].removeprefix("v")
    _, minor, patch = version.split(".")[:3]
    doc = json.loads(subprocess.run(["go", "mod", "edit", "-json", gomod], check=True, capture_output=True).stdout)
    staging = sorted(r["Old"]["Path"] for r in doc.get("Replace") or [] if r["New"]["Path"].startswith("./staging/"))
    etcd = next(
        (r["Version"] for r in doc.get("Require") or [] if r["Path"] == "go.etcd.io/etcd/server/v3"),
        None,
    )
    if not staging or etcd is None:
        print(f"wrapper.py: {gomod}: no staging replaces or no etcd server requirement", file=sys.stderr)
        return 1
    go_version = doc.get("Go") or "1.26.0"
    lines = [
        "// Written by tools/kube/wrapper.py, then `go mod tidy`: builds Kubernetes binaries from Go modules.",
        "module mcr.local/tools/kube",
        "",
        f"go {go_version}",
        "",
        "require (",
        f"\tk8s.io/kubernetes v{version}",
        f"\tgo.etcd.io/etcd/server/v3 {etcd}",
        ")",
        "",
        "tool (",
        "\tk8s.io/kubernetes/cmd/kube-apiserver",
        "\tk8s.io/kubernetes/cmd/kube-controller-manager",
        "\tgo.etcd.io/etcd/server/v3",
        ")",
        "",
        "replace (",
        *(f"\t{path} => {path} v0.{minor}.{patch}" for path in staging),
        ")",
    ]
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
