"""Authentication, RBAC, self reviews and TokenRequest (F30)."""

from __future__ import annotations

import base64
import json
import uuid
from typing import Any

import pytest

from mcr_envtest import ServerThread
from mcr_envtest.auth import (
    Authenticator,
    Authorizer,
    RequestAttributes,
    Unauthenticated,
    UserInfo,
    forbidden_message,
)
from mcr_envtest.errors import StatusError
from mcr_envtest.reviews import (
    self_subject_access_review,
    self_subject_review,
    self_subject_rules_review,
    token_request,
)
from mcr_envtest.schema.protobuf import decode_protobuf

RBAC = "rbac.authorization.k8s.io"


class Req:
    """The two request attributes the authenticator reads (pure-function input, no HTTP involved)."""

    def __init__(self, token: str | None = None) -> None:
        self.headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.transport = None


class Store:
    """A minimal in-memory object table with the read API the authorizer uses."""

    def __init__(self, *objs: tuple[str, str, dict[str, Any]]) -> None:
        self.objs = objs

    def get(self, group: str, resource: str, namespace: str, name: str) -> dict[str, Any] | None:
        for g, r, o in self.objs:
            md = o["metadata"]
            if (g, r, md.get("namespace", ""), md["name"]) == (group, resource, namespace, name):
                return o
        return None

    def list_objects(self, group: str, resource: str, namespace: str | None = None) -> list[dict[str, Any]]:
        return [
            o
            for g, r, o in self.objs
            if (g, r) == (group, resource) and namespace in (None, o["metadata"].get("namespace"))
        ]


def attrs(
    verb: str, resource: str, namespace: str = "", name: str = "", group: str = "", sub: str = ""
) -> RequestAttributes:
    return RequestAttributes(verb, group, resource, sub, namespace, name, "", True)


def test_static_and_service_account_tokens() -> None:
    authn = Authenticator()
    authn.add_token("t1", UserInfo("alice", ("dev",)))
    assert authn.authenticate(Req("t1")) == UserInfo("alice", ("dev", "system:authenticated"))
    assert authn.authenticate(Req()) is None
    with pytest.raises(Unauthenticated):
        authn.authenticate(Req("nope"))
    out = token_request(
        authn, "ns1", "robot", "uid-1", {"spec": {"audiences": ["a"], "expirationSeconds": 600}}
    )
    assert out["kind"] == "TokenRequest"
    assert out["spec"] == {"audiences": ["a"], "expirationSeconds": 600, "boundObjectRef": None}
    assert out["status"]["expirationTimestamp"].endswith("Z")
    with pytest.raises(Unauthenticated, match="audiences"):  # not meant for this server
        authn.authenticate(Req(out["status"]["token"]))
    out = token_request(
        authn, "ns1", "robot", "uid-1", {"spec": {"audiences": ["a", authn.issuer], "expirationSeconds": 600}}
    )
    user = authn.authenticate(Req(out["status"]["token"]))
    assert user == UserInfo(
        "system:serviceaccount:ns1:robot",
        ("system:serviceaccounts", "system:serviceaccounts:ns1", "system:authenticated"),
        "uid-1",
    )
    head, payload, sig = out["status"]["token"].split(".")
    claims = json.loads(base64.urlsafe_b64decode(payload + "=="))
    claims["kubernetes.io"]["serviceaccount"]["name"] = "admin"
    forged = base64.urlsafe_b64encode(json.dumps(claims).encode()).rstrip(b"=").decode()
    with pytest.raises(Unauthenticated):
        authn.authenticate(Req(f"{head}.{forged}.{sig}"))
    with pytest.raises(Unauthenticated):
        Authenticator().authenticate(Req(out["status"]["token"]))  # another server's key
    expired, _ = authn.issue_service_account_token(
        "ns1", "robot", "u", audiences=["a"], expiration_seconds=-1
    )
    with pytest.raises(Unauthenticated, match="expired"):
        authn.authenticate(Req(expired))
    with pytest.raises(StatusError) as exc:
        token_request(authn, "ns1", "robot", "u", {"spec": {"expirationSeconds": 10}})
    assert exc.value.code == 422


def test_rbac_rules() -> None:
    role = {
        "metadata": {"name": "cm-reader", "namespace": "team"},
        "rules": [
            {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list"]},
            {"apiGroups": ["apps"], "resources": ["deployments/scale"], "verbs": ["update"]},
            {"apiGroups": [""], "resources": ["secrets"], "resourceNames": ["one"], "verbs": ["get"]},
        ],
    }
    binding = {
        "metadata": {"name": "rb", "namespace": "team"},
        "roleRef": {"kind": "Role", "name": "cm-reader"},
        "subjects": [{"kind": "User", "name": "alice"}, {"kind": "ServiceAccount", "name": "bot"}],
    }
    crb = {
        "metadata": {"name": "viewers"},
        "roleRef": {"kind": "ClusterRole", "name": "view"},
        "subjects": [{"kind": "Group", "name": "auditors"}],
    }
    authz = Authorizer(
        Store((RBAC, "roles", role), (RBAC, "rolebindings", binding), (RBAC, "clusterrolebindings", crb))
    )
    alice = UserInfo("alice", ("system:authenticated",))
    bot = UserInfo("system:serviceaccount:team:bot", ("system:serviceaccounts", "system:authenticated"))
    auditor = UserInfo("eve", ("auditors", "system:authenticated"))
    assert authz.authorize(alice, attrs("get", "configmaps", "team"))[0]
    assert authz.authorize(bot, attrs("list", "configmaps", "team"))[0]
    assert not authz.authorize(alice, attrs("delete", "configmaps", "team"))[0]
    assert not authz.authorize(alice, attrs("get", "configmaps", "other"))[0]
    assert authz.authorize(alice, attrs("update", "deployments", "team", "d", "apps", "scale"))[0]
    assert not authz.authorize(alice, attrs("update", "deployments", "team", "d", "apps"))[0]
    assert authz.authorize(alice, attrs("get", "secrets", "team", "one"))[0]
    assert not authz.authorize(alice, attrs("get", "secrets", "team", "two"))[0]
    assert authz.authorize(auditor, attrs("list", "pods", "anywhere"))[0]
    assert not authz.authorize(auditor, attrs("create", "pods", "anywhere"))[0]
    # "view" cannot read secrets.
    assert not authz.authorize(auditor, attrs("get", "secrets", "anywhere", "s"))[0]
    assert authz.authorize(UserInfo("root", ("system:masters",)), attrs("delete", "nodes"))[0]
    _allowed, reason = authz.authorize(alice, attrs("get", "configmaps", "team"))
    assert reason == 'RBAC: allowed by RoleBinding "rb/team" of Role "cm-reader" to User "alice"'
    # Discovery and self reviews are open to every authenticated user, health paths to everyone.
    assert authz.authorize(alice, RequestAttributes("get", "", "", "", "", "", "/apis/apps/v1", False))[0]
    assert authz.authorize(alice, attrs("create", "selfsubjectaccessreviews", group="authorization.k8s.io"))[
        0
    ]
    anonymous = UserInfo("system:anonymous", ("system:unauthenticated",))
    assert authz.authorize(anonymous, RequestAttributes("get", "", "", "", "", "", "/healthz", False))[0]
    assert not authz.authorize(anonymous, RequestAttributes("get", "", "", "", "", "", "/api", False))[0]
    assert forbidden_message(
        alice, attrs("delete", "deployments", "team", "web", "apps"), "deployments.apps"
    ) == (
        'deployments.apps "web" is forbidden: User "alice" cannot delete resource "deployments" in API group '
        '"apps" in the namespace "team"'
    )
    assert forbidden_message(alice, attrs("list", "nodes"), "nodes").endswith("at the cluster scope")


def test_aggregated_cluster_roles() -> None:
    widgets = {
        "metadata": {"name": "widget-viewer", "labels": {f"{RBAC}/aggregate-to-view": "true"}},
        "rules": [{"apiGroups": ["example.com"], "resources": ["widgets"], "verbs": ["get", "list"]}],
    }
    custom = {
        "metadata": {"name": "monitoring"},
        "aggregationRule": {
            "clusterRoleSelectors": [
                {"matchExpressions": [{"key": "team", "operator": "In", "values": ["mon"]}]}
            ]
        },
        "rules": [],
    }
    part = {
        "metadata": {"name": "mon-pods", "labels": {"team": "mon"}},
        "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]}],
    }
    crb = {
        "metadata": {"name": "b1"},
        "roleRef": {"kind": "ClusterRole", "name": "edit"},
        "subjects": [{"kind": "User", "name": "ed"}],
    }
    crb2 = {
        "metadata": {"name": "b2"},
        "roleRef": {"kind": "ClusterRole", "name": "monitoring"},
        "subjects": [{"kind": "User", "name": "mo"}],
    }
    authz = Authorizer(
        Store(
            (RBAC, "clusterroles", widgets),
            (RBAC, "clusterroles", custom),
            (RBAC, "clusterroles", part),
            (RBAC, "clusterrolebindings", crb),
            (RBAC, "clusterrolebindings", crb2),
        )
    )
    ed = UserInfo("ed", ("system:authenticated",))
    mo = UserInfo("mo", ("system:authenticated",))
    # "edit" aggregates what is labelled aggregate-to-view (edit ⊇ view).
    assert authz.authorize(ed, attrs("list", "widgets", "ns", group="example.com"))[0]
    assert not authz.authorize(ed, attrs("delete", "widgets", "ns", group="example.com"))[0]
    assert authz.authorize(mo, attrs("list", "pods", "ns"))[0]
    assert not authz.authorize(mo, attrs("list", "configmaps", "ns"))[0]


async def test_self_reviews() -> None:
    authz = Authorizer(Store())
    alice = UserInfo("alice", ("dev", "system:authenticated"), "u1")
    spec = {"resourceAttributes": {"verb": "get", "resource": "pods", "namespace": "x"}}
    out = await self_subject_access_review(authz, alice, {"spec": spec})
    assert out["kind"] == "SelfSubjectAccessReview"
    assert out["status"] == {"allowed": False}
    admin = UserInfo("admin", ("system:masters",))
    assert (await self_subject_access_review(authz, admin, {"spec": spec}))["status"]["allowed"] is True
    with pytest.raises(StatusError):
        await self_subject_access_review(authz, alice, {"spec": {}})
    binding = {
        "metadata": {"name": "rb", "namespace": "x"},
        "roleRef": {"kind": "ClusterRole", "name": "view"},
        "subjects": [{"kind": "Group", "name": "dev"}],
    }
    rules = await self_subject_rules_review(
        Authorizer(Store((RBAC, "rolebindings", binding))), alice, {"spec": {"namespace": "x"}}
    )
    assert rules["kind"] == "SelfSubjectRulesReview"
    assert rules["status"]["incomplete"] is False
    granted = rules["status"]["resourceRules"]
    assert {"verbs": ["get", "list", "watch"], "apiGroups": ["apps"]}.items() <= next(
        r for r in granted if r.get("apiGroups") == ["apps"]
    ).items()
    assert not any("secrets" in r.get("resources", []) for r in granted)
    elsewhere = await self_subject_rules_review(authz, alice, {"spec": {"namespace": "y"}})
    assert all(r["apiGroups"] != ["apps"] for r in elsewhere["status"]["resourceRules"])
    review = self_subject_review(alice, {})
    assert review["status"]["userInfo"] == {
        "username": "alice",
        "groups": ["dev", "system:authenticated"],
        "uid": "u1",
    }


def test_protobuf_review_bodies() -> None:
    # A SelfSubjectAccessReview as kubectl 1.37 sends it for `auth can-i create pods -n default`.
    body = bytes.fromhex(
        "6b3873000a320a17617574686f72697a6174696f6e2e6b38732e696f2f763112175365"
        "6c665375626a6563744163636573735265766965771"
        "23f0a100a0012001a0022002a00320038004200122"
        "10a1f0a0764656661756c74120663726561746"
        "51a0022002a04706f647332003a001a0808001200"
        "1a0020001a002200"
    )
    obj = decode_protobuf(body)
    assert obj["kind"] == "SelfSubjectAccessReview"
    assert obj["spec"]["resourceAttributes"]["verb"] == "create"
    assert obj["spec"]["resourceAttributes"]["resource"] == "pods"
    assert obj["spec"]["resourceAttributes"]["namespace"] == "default"
    with pytest.raises(ValueError, match="envelope"):
        decode_protobuf(b"{}")

    def field(number: int, payload: bytes) -> bytes:
        return bytes([(number << 3) | 2, len(payload)]) + payload

    type_meta = field(1, b"authorization.k8s.io/v1") + field(2, b"SelfSubjectRulesReview")
    rules = b"k8s\x00" + field(1, type_meta) + field(2, field(2, field(1, b"team")))
    assert decode_protobuf(rules)["spec"] == {"namespace": "team"}
    # `kubectl create rolebinding rb --role=r --user=carol`
    binding = bytes.fromhex(
        "6b3873000a2b0a1c726261632e617574686f72697a6174696f6e2e6b38732e696f2f7631120b526f6c6542696e64696e67"
        "12660a120a02726212001a0022002a00320038004200122a0a04557365721219726261632e617574686f72697a6174696f"
        "6e2e6b38732e696f1a056361726f6c22001a240a19726261632e617574686f72697a6174696f6e2e6b38732e696f120452"
        "6f6c651a01721a002200"
    )
    assert decode_protobuf(binding) == {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        # the zero creationTimestamp is null, as in the JSON kubectl would send
        "metadata": {"name": "rb", "creationTimestamp": None},
        "subjects": [{"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": "carol"}],
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "r"},
    }


def test_rbac_through_the_server(apiserver: ServerThread) -> None:
    from .test_openapi import raw_request

    apiserver.add_user("bob", token="bob-token")
    ns = "/api/v1/namespaces/default"
    status, body = raw_request(apiserver, "GET", f"{ns}/configmaps", token="bob-token")
    assert status == 403
    assert body["message"] == (
        'configmaps is forbidden: User "bob" cannot list resource "configmaps" in API group "" in the '
        'namespace "default"'
    )
    role = {
        "metadata": {"name": "r"},
        "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["list"]}],
    }
    binding = {
        "metadata": {"name": "b"},
        "roleRef": {"apiGroup": RBAC, "kind": "Role", "name": "r"},
        "subjects": [{"kind": "User", "name": "bob", "apiGroup": RBAC}],
    }
    assert raw_request(apiserver, "POST", f"/apis/{RBAC}/v1/namespaces/default/roles", role)[0] == 201
    assert (
        raw_request(apiserver, "POST", f"/apis/{RBAC}/v1/namespaces/default/rolebindings", binding)[0] == 201
    )
    assert raw_request(apiserver, "GET", f"{ns}/configmaps", token="bob-token")[0] == 200
    assert raw_request(apiserver, "GET", f"{ns}/secrets", token="bob-token")[0] == 403
    assert raw_request(apiserver, "GET", f"{ns}/configmaps", token="wrong")[0] == 401
    review = {
        "spec": {"resourceAttributes": {"verb": "list", "resource": "configmaps", "namespace": "default"}}
    }
    status, out = raw_request(
        apiserver, "POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", review, token="bob-token"
    )
    assert status == 201
    assert out["status"]["allowed"] is True
    status, out = raw_request(
        apiserver, "POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews", {}, token="bob-token"
    )
    assert status == 201
    assert out["status"]["userInfo"]["username"] == "bob"


def test_reviews_and_tokens_parse_in_the_official_client(apiserver: ServerThread) -> None:
    from kubernetes import client, config

    api = config.new_client_from_config_dict(apiserver.kubeconfig)
    try:
        core = client.CoreV1Api(api)
        core.create_namespaced_service_account("default", {"metadata": {"name": "robot"}})
        issued = core.create_namespaced_service_account_token(
            "robot", "default", {"spec": {"audiences": ["x"]}}
        )
        assert issued.spec.audiences == ["x"]
        assert issued.status.expiration_timestamp is not None
        review = client.AuthorizationV1Api(api).create_self_subject_access_review(
            {"spec": {"resourceAttributes": {"verb": "get", "resource": "pods"}}}
        )
        assert review.status.allowed is True
        me = client.AuthenticationV1Api(api).create_self_subject_review({})
        assert "system:masters" in me.status.user_info.groups
    finally:
        api.close()
    # The issued token authenticates as the ServiceAccount.
    from .test_openapi import raw_request

    review_path = "/apis/authentication.k8s.io/v1/selfsubjectreviews"
    status, body = raw_request(apiserver, "POST", review_path, {}, token=issued.status.token)
    assert status == 401  # its audience is not the server's
    status, issued = raw_request(
        apiserver, "POST", "/api/v1/namespaces/default/serviceaccounts/robot/token", {"spec": {}}
    )
    assert status == 201
    assert issued["spec"]["audiences"] == ["https://kubernetes.default.svc.cluster.local"]
    status, body = raw_request(apiserver, "POST", review_path, {}, token=issued["status"]["token"])
    assert status == 201
    assert body["status"]["userInfo"]["username"] == "system:serviceaccount:default:robot"


def test_token_review_and_subject_access_review_delegate_as_the_server_decides(
    apiserver: ServerThread,
) -> None:
    from .test_openapi import raw_request

    apiserver.add_user("dora", token="dora-token")
    sa = f"rev-{uuid.uuid4().hex[:8]}"  # unique: a real control plane is reused between tests
    status, _ = raw_request(
        apiserver, "POST", "/api/v1/namespaces/default/serviceaccounts", {"metadata": {"name": sa}}
    )
    assert status == 201
    status, out = raw_request(
        apiserver, "POST", f"/api/v1/namespaces/default/serviceaccounts/{sa}/token", {"spec": {}}
    )
    assert status == 201
    sa_token = out["status"]["token"]

    def token_review(token: str) -> dict[str, Any]:
        body = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": token}}
        status, out = raw_request(apiserver, "POST", "/apis/authentication.k8s.io/v1/tokenreviews", body)
        assert status == 201, out
        assert out["kind"] == "TokenReview"
        review_status = out["status"]
        assert isinstance(review_status, dict)
        return review_status

    review = token_review(sa_token)
    assert review["authenticated"] is True
    assert review["user"]["username"] == f"system:serviceaccount:default:{sa}"
    assert "system:serviceaccounts:default" in review["user"]["groups"]
    assert "system:authenticated" in review["user"]["groups"]
    assert review["audiences"]
    review = token_review("not-a-token")
    assert not review.get("authenticated")
    assert review.get("error")

    def access_review(spec: dict[str, Any], token: str | None = None) -> tuple[int, dict[str, Any]]:
        body = {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": spec}
        return raw_request(
            apiserver, "POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews", body, token=token
        )

    metrics = {"nonResourceAttributes": {"path": "/metrics", "verb": "get"}}
    status, out = access_review({"user": f"system:serviceaccount:default:{sa}", **metrics})
    assert status == 201
    assert out["status"]["allowed"] is False
    status, out = access_review({"user": "someone", "groups": ["system:masters"], **metrics})
    assert out["status"]["allowed"] is True
    status, out = access_review(
        {
            "user": "dora",
            "resourceAttributes": {"verb": "list", "resource": "secrets", "namespace": "default"},
        }
    )
    assert out["status"]["allowed"] is False
    status, out = access_review(metrics)
    assert status == 422
    assert out["reason"] == "Invalid"
    # Creating reviews for others is itself authorized: an unprivileged user is forbidden.
    status, out = access_review({"user": "dora", **metrics}, token="dora-token")
    assert status == 403
