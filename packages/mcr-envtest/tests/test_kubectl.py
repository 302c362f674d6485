"""kubectl 1.3x against the server: the smoke list of APISERVER.md §3, output checked."""

from __future__ import annotations

import asyncio
import json
import os
import queue
import subprocess
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from mcr.testing import eventually
from mcr_envtest import ServerThread
from mcr_envtest.pytest_plugin import find_kubectl

pytestmark = pytest.mark.kubectl

Kubectl = Callable[..., subprocess.CompletedProcess[str]]

CONFIGMAP = """
apiVersion: v1
kind: ConfigMap
metadata:
  name: settings
  labels: {app: demo}
data: {mode: fast}
"""

DEPLOYMENT = """
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - name: nginx
        image: nginx:1
        ports: [{containerPort: 80}]
"""

CRD = """
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.example.com}
spec:
  group: example.com
  names: {plural: widgets, singular: widget, kind: Widget, shortNames: [wd]}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    subresources: {status: {}}
    additionalPrinterColumns:
    - {name: Size, type: integer, jsonPath: .spec.size}
    - {name: Age, type: date, jsonPath: .metadata.creationTimestamp}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            required: [size]
            properties:
              size: {type: integer, description: How big the widget is.}
              color: {type: string}
"""


def ok(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0, f"kubectl {result.args[3:]} failed:\n{result.stdout}{result.stderr}"
    return result.stdout


def rows(output: str) -> list[list[str]]:
    return [line.split() for line in output.strip().splitlines()]


def get_json(kubectl: Kubectl, *args: str) -> Any:
    return json.loads(ok(kubectl("get", *args, "-o", "json")))


def user_kubeconfig(apiserver: ServerThread, tmp_path: Path, name: str, **kwargs: Any) -> str:
    path = tmp_path / f"{name}.kubeconfig"
    path.write_text(yaml.safe_dump(apiserver.add_user(name, **kwargs)))
    return str(path)


def test_version_and_api_resources(kubectl: Kubectl) -> None:
    version = json.loads(ok(kubectl("version", "-o", "json")))
    assert version["serverVersion"]["major"] == "1"
    table = rows(ok(kubectl("api-resources")))
    assert table[0] == ["NAME", "SHORTNAMES", "APIVERSION", "NAMESPACED", "KIND"]
    by_name = {r[0]: r for r in table[1:]}
    assert by_name["deployments"] == ["deployments", "deploy", "apps/v1", "true", "Deployment"]
    assert by_name["namespaces"][-2:] == ["false", "Namespace"]


def test_create_get_and_table_output(kubectl: Kubectl) -> None:
    assert ok(kubectl("create", "-f", "-", input=CONFIGMAP)).strip() == "configmap/settings created"
    table = rows(ok(kubectl("get", "configmap", "settings")))
    assert table[0] == ["NAME", "DATA", "AGE"]
    assert table[1][:2] == ["settings", "1"]
    ok(kubectl("create", "-f", "-", input=DEPLOYMENT))
    wide = rows(ok(kubectl("get", "deploy", "-o", "wide")))
    assert wide[0] == ["NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE", "CONTAINERS", "IMAGES", "SELECTOR"]
    # (UP-TO-DATE counts what a deployment controller made: none without one)
    assert [wide[1][i] for i in (0, 1, 3)] == ["web", "0/2", "0"]
    assert wide[1][5:] == ["nginx", "nginx:1", "app=web"]
    namespaces = rows(ok(kubectl("get", "ns")))
    assert namespaces[0] == ["NAME", "STATUS", "AGE"]
    assert ["default", "Active"] in [r[:2] for r in namespaces[1:]]
    sorted_names = ok(kubectl("get", "ns", "--sort-by=.metadata.name", "-o", "name")).split()
    assert sorted_names == sorted(sorted_names)
    failed = kubectl("create", "-f", "-", input=CONFIGMAP)
    assert failed.returncode != 0
    assert 'configmaps "settings" already exists' in failed.stderr


def test_create_rejects_invalid_objects(kubectl: Kubectl) -> None:
    bad = "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {}\n"
    result = kubectl("create", "-f", "-", input=bad)
    assert result.returncode != 0
    assert 'Pod "p" is invalid' in result.stderr
    assert "spec.containers: Required value" in result.stderr


def test_strict_field_validation(kubectl: Kubectl) -> None:
    unknown = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\nbogus: 1\n"
    result = kubectl("create", "-f", "-", input=unknown)
    assert result.returncode != 0
    assert "bogus" in result.stderr


def test_client_side_apply_and_replace(kubectl: Kubectl) -> None:
    assert ok(kubectl("apply", "-f", "-", input=DEPLOYMENT)).strip() == "deployment.apps/web created"
    assert ok(kubectl("apply", "-f", "-", input=DEPLOYMENT)).strip() == "deployment.apps/web unchanged"
    changed = DEPLOYMENT.replace("replicas: 2", "replicas: 3").replace("nginx:1", "nginx:2")
    assert ok(kubectl("apply", "-f", "-", input=changed)).strip() == "deployment.apps/web configured"
    obj = get_json(kubectl, "deploy", "web")
    assert obj["spec"]["replicas"] == 3
    assert obj["spec"]["template"]["spec"]["containers"][0]["image"] == "nginx:2"
    assert "kubectl.kubernetes.io/last-applied-configuration" in obj["metadata"]["annotations"]
    replaced = DEPLOYMENT.replace("replicas: 2", "replicas: 5")
    assert ok(kubectl("replace", "-f", "-", input=replaced)).strip() == "deployment.apps/web replaced"
    assert get_json(kubectl, "deploy", "web")["spec"]["replicas"] == 5


RICH = """
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, labels: {a: "1", b: "2"}}
spec:
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - name: nginx
        image: nginx:1
        env: [{name: A, value: "1"}, {name: B, value: "2"}]
        ports: [{containerPort: 80}, {containerPort: 443}]
      - name: side
        image: busybox
      volumes: [{name: data, emptyDir: {}}]
"""

TRIMMED = """
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, labels: {a: "1"}}
spec:
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - name: side
        image: busybox:2
      - name: nginx
        image: nginx:1
        env: [{name: B, value: "2"}]
        ports: [{containerPort: 443}]
      volumes: [{name: data, hostPath: {path: /x}}]
"""


@pytest.mark.parametrize("server_side", [False, True], ids=["client-side", "server-side"])
def test_apply_removes_what_the_configuration_dropped(kubectl: Kubectl, server_side: bool) -> None:
    flags = ["--server-side"] if server_side else []
    ok(kubectl("apply", *flags, "-f", "-", input=RICH))
    ok(kubectl("apply", *flags, "-f", "-", input=TRIMMED))
    obj = get_json(kubectl, "deploy", "web")
    assert obj["metadata"]["labels"] == {"a": "1"}
    pod = obj["spec"]["template"]["spec"]
    containers = {c["name"]: c for c in pod["containers"]}
    assert set(containers) == {"side", "nginx"}
    assert containers["side"]["image"] == "busybox:2"
    assert containers["nginx"]["env"] == [{"name": "B", "value": "2"}]
    assert containers["nginx"]["ports"] == [{"containerPort": 443, "protocol": "TCP"}]  # defaulted
    assert pod["volumes"] == [{"name": "data", "hostPath": {"path": "/x", "type": ""}}]  # defaulted
    if not server_side:  # the 3-way strategic patch also carries the new order
        assert [c["name"] for c in pod["containers"]] == ["side", "nginx"]


def test_server_side_apply_and_conflict(kubectl: Kubectl) -> None:
    out = ok(kubectl("apply", "--server-side", "-f", "-", input=CONFIGMAP))
    assert out.strip() == "configmap/settings serverside-applied"
    shown = get_json(kubectl, "cm", "settings", "--show-managed-fields")
    managers = {m["manager"]: m["operation"] for m in shown["metadata"]["managedFields"]}
    assert managers["kubectl"] == "Apply"
    ok(kubectl("patch", "cm", "settings", "--type=merge", "-p", '{"data":{"mode":"slow"}}'))
    conflict = kubectl("apply", "--server-side", "-f", "-", input=CONFIGMAP)
    assert conflict.returncode != 0
    assert "Apply failed with 1 conflict" in conflict.stderr
    assert 'conflict with "kubectl-patch"' in conflict.stderr
    assert ".data.mode" in conflict.stderr
    ok(kubectl("apply", "--server-side", "--force-conflicts", "-f", "-", input=CONFIGMAP))
    assert get_json(kubectl, "cm", "settings")["data"] == {"mode": "fast"}


def test_patch_label_annotate(kubectl: Kubectl) -> None:
    ok(kubectl("create", "-f", "-", input=DEPLOYMENT))
    ok(
        kubectl(
            "patch",
            "deploy",
            "web",
            "--type=json",
            "-p",
            '[{"op":"replace","path":"/spec/replicas","value":3}]',
        )
    )
    ok(kubectl("patch", "deploy", "web", "--type=merge", "-p", '{"metadata":{"labels":{"m":"1"}}}'))
    strategic = '{"spec":{"template":{"spec":{"containers":[{"name":"side","image":"busybox"}]}}}}'
    ok(kubectl("patch", "deploy", "web", "-p", strategic))
    ok(kubectl("label", "deploy", "web", "tier=frontend"))
    ok(kubectl("annotate", "deploy", "web", "note=hello"))
    obj = get_json(kubectl, "deploy", "web")
    assert obj["spec"]["replicas"] == 3
    # a strategic merge puts an added item before the original ones (no $setElementOrder here)
    assert [c["name"] for c in obj["spec"]["template"]["spec"]["containers"]] == ["side", "nginx"]
    assert obj["metadata"]["labels"] == {"m": "1", "tier": "frontend"}
    assert obj["metadata"]["annotations"]["note"] == "hello"
    ok(kubectl("label", "deploy", "web", "tier-"))
    assert "tier" not in get_json(kubectl, "deploy", "web")["metadata"]["labels"]
    selected = ok(kubectl("get", "deploy", "-l", "m=1", "-o", "name")).split()
    assert selected == ["deployment.apps/web"]


async def test_delete_waits_for_finalizers(kubectl: Kubectl) -> None:
    held = CONFIGMAP.replace("labels: {app: demo}", "labels: {app: demo}\n  finalizers: [example.com/hold]")
    ok(kubectl("create", "-f", "-", input=held))
    deleting = asyncio.create_task(asyncio.to_thread(kubectl, "delete", "cm", "settings"))
    try:

        async def marked() -> Any:
            obj = json.loads(ok(await asyncio.to_thread(kubectl, "get", "cm", "settings", "-o", "json")))
            return obj["metadata"].get("deletionTimestamp")

        await eventually(marked, timeout=20, message="kubectl delete did not mark the object")
        assert not deleting.done()  # still waiting for the finalizer
        ok(
            await asyncio.to_thread(
                kubectl, "patch", "cm", "settings", "--type=merge", "-p", '{"metadata":{"finalizers":null}}'
            )
        )
        result = await asyncio.wait_for(deleting, 30)
    finally:
        if not deleting.done():
            deleting.cancel()
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith('configmap "settings" deleted')
    gone = kubectl("get", "cm", "settings")
    assert gone.returncode != 0
    assert 'configmaps "settings" not found' in gone.stderr


def test_get_watch_streams_changes(kubectl: Kubectl, apiserver: ServerThread, tmp_path: Path) -> None:
    binary = find_kubectl()
    assert binary is not None
    ok(kubectl("create", "-f", "-", input=CONFIGMAP.replace("settings", "first")))
    env = dict(os.environ, KUBECACHEDIR=str(tmp_path / "watch-cache"), HOME=str(tmp_path))
    lines: queue.Queue[str] = queue.Queue()
    with subprocess.Popen(
        # (selected: a real cluster also has kube-root-ca.crt)
        [binary, "--kubeconfig", apiserver.kubeconfig_path, "get", "cm", "-w", "-l", "app=demo"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=env,
    ) as proc:
        assert proc.stdout is not None
        stdout = proc.stdout
        reader = threading.Thread(target=lambda: [lines.put(line) for line in stdout], daemon=True)
        reader.start()

        def next_line() -> list[str]:
            try:
                return lines.get(timeout=20).split()
            except queue.Empty:
                raise AssertionError("kubectl get -w printed nothing within 20 s") from None

        try:
            assert next_line() == ["NAME", "DATA", "AGE"]
            assert next_line()[:2] == ["first", "1"]
            second = CONFIGMAP.replace("settings", "second").replace("{mode: fast}", "{a: '1', b: '2'}")
            ok(kubectl("create", "-f", "-", input=second))
            assert next_line()[:2] == ["second", "2"]
            ok(kubectl("label", "cm", "first", "x=y"))
            assert next_line()[:2] == ["first", "1"]
        finally:
            proc.terminate()
            proc.wait(10)
            reader.join(10)


def test_crd_wait_custom_resources_and_explain(kubectl: Kubectl) -> None:
    ok(kubectl("create", "-f", "-", input=CRD))
    out = ok(kubectl("wait", "--for=condition=established", "crd/widgets.example.com", "--timeout=30s"))
    assert "condition met" in out
    widget = "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w1}\nspec: {size: 3, color: red}\n"
    ok(kubectl("apply", "-f", "-", input=widget))
    table = rows(ok(kubectl("get", "wd")))
    assert table[0] == ["NAME", "SIZE", "AGE"]
    assert table[1][:2] == ["w1", "3"]
    explained = ok(kubectl("explain", "widget.spec.size"))
    assert "KIND:       Widget" in explained
    assert "size <integer>" in explained
    assert "How big the widget is." in explained
    invalid = kubectl("apply", "-f", "-", input=widget.replace("size: 3", "size: big"))
    assert invalid.returncode != 0
    assert "spec.size" in invalid.stderr
    ok(kubectl("delete", "widget", "w1"))
    ok(
        kubectl("wait", "--for=delete", "crd/widgets.example.com", "--timeout=1s")
        if False
        else kubectl("get", "crd")
    )


def test_explain_builtin(kubectl: Kubectl) -> None:
    out = ok(kubectl("explain", "deployment.spec.template.spec.containers"))
    assert "KIND:       Deployment" in out
    assert "containers <[]Container>" in out
    assert "name\t<string> -required-" in out
    assert "image\t<string>" in out


ROLE = """
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: cm-reader, namespace: default}
rules:
- {apiGroups: [""], resources: [configmaps], verbs: [get, list]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: carol-reads, namespace: default}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: cm-reader}
subjects:
- {apiGroup: rbac.authorization.k8s.io, kind: User, name: carol}
"""


def test_rbac_for_a_restricted_user(kubectl: Kubectl, apiserver: ServerThread, tmp_path: Path) -> None:
    restricted = user_kubeconfig(apiserver, tmp_path, "carol", groups=("team",))
    denied = kubectl("get", "configmaps", "-n", "default", kubeconfig=restricted)
    assert denied.returncode != 0
    assert (
        'configmaps is forbidden: User "carol" cannot list resource "configmaps" in API group "" in the '
        'namespace "default"'
    ) in denied.stderr
    ok(kubectl("apply", "-f", "-", input=ROLE))
    ok(kubectl("create", "-f", "-", input=CONFIGMAP))
    listed = rows(ok(kubectl("get", "configmaps", "-n", "default", kubeconfig=restricted)))
    assert listed[0] == ["NAME", "DATA", "AGE"]
    still = kubectl("delete", "configmap", "settings", "-n", "default", kubeconfig=restricted)
    assert still.returncode != 0
    assert 'cannot delete resource "configmaps"' in still.stderr


def test_auth_can_i_and_whoami(kubectl: Kubectl, apiserver: ServerThread, tmp_path: Path) -> None:
    assert ok(kubectl("auth", "can-i", "create", "pods")).strip() == "yes"
    restricted = user_kubeconfig(apiserver, tmp_path, "carol", groups=("team",))
    no = kubectl("auth", "can-i", "list", "configmaps", "-n", "default", kubeconfig=restricted)
    assert no.stdout.strip() == "no"
    assert no.returncode == 1
    ok(kubectl("create", "role", "cm-reader", "--verb=get,list", "--resource=configmaps", "-n", "default"))
    ok(kubectl("create", "rolebinding", "carol-reads", "--role=cm-reader", "--user=carol", "-n", "default"))
    ok(kubectl("create", "configmap", "generated", "--from-literal=a=1", "-n", "default"))
    assert (
        ok(kubectl("auth", "can-i", "list", "configmaps", "-n", "default", kubeconfig=restricted)).strip()
        == "yes"
    )
    assert (
        kubectl(
            "auth", "can-i", "delete", "configmaps", "-n", "default", kubeconfig=restricted
        ).stdout.strip()
        == "no"
    )
    whoami = rows(ok(kubectl("auth", "whoami", kubeconfig=restricted)))
    assert whoami[0] == ["ATTRIBUTE", "VALUE"]
    assert ["Username", "carol"] in whoami
    # A ServiceAccount token from TokenRequest, bound to a ClusterRole.
    ok(kubectl("create", "serviceaccount", "robot", "-n", "default"))
    token = ok(kubectl("create", "token", "robot", "-n", "default")).strip()
    as_robot = ("--token", token)
    assert (
        kubectl("auth", "can-i", "list", "pods", "-A", *as_robot, kubeconfig=restricted).stdout.strip()
        == "no"
    )
    ok(
        kubectl(
            "create",
            "clusterrolebinding",
            "robot-view",
            "--clusterrole=view",
            "--serviceaccount=default:robot",
        )
    )
    assert (
        ok(kubectl("auth", "can-i", "list", "pods", "-A", *as_robot, kubeconfig=restricted)).strip() == "yes"
    )
    who = json.loads(ok(kubectl("auth", "whoami", "-o", "json", *as_robot, kubeconfig=restricted)))
    assert who["status"]["userInfo"]["username"] == "system:serviceaccount:default:robot"
    denied = kubectl("get", "secrets", *as_robot, kubeconfig=restricted)
    assert denied.returncode != 0
    assert 'User "system:serviceaccount:default:robot" cannot list resource "secrets"' in denied.stderr


def test_client_certificate_user(kubectl: Kubectl, apiserver: ServerThread, tmp_path: Path) -> None:
    config = user_kubeconfig(apiserver, tmp_path, "dora", groups=("ops", "auditors"), client_cert=True)
    assert "token" not in yaml.safe_load(Path(config).read_text())["users"][0]["user"]
    who = json.loads(ok(kubectl("auth", "whoami", "-o", "json", kubeconfig=config)))
    assert who["status"]["userInfo"]["username"] == "dora"
    assert who["status"]["userInfo"]["groups"] == ["ops", "auditors", "system:authenticated"]
    assert kubectl("auth", "can-i", "list", "pods", kubeconfig=config).stdout.strip() == "no"
    binding = (
        "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\n"
        "metadata: {name: auditors-view}\n"
        "roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: view}\n"
        "subjects: [{apiGroup: rbac.authorization.k8s.io, kind: Group, name: auditors}]\n"
    )
    ok(kubectl("apply", "-f", "-", input=binding))
    assert ok(kubectl("auth", "can-i", "list", "pods", "-A", kubeconfig=config)).strip() == "yes"
