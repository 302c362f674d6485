"""Authentication (bearer tokens, ServiceAccount tokens, client certificates) and RBAC (F30).

:class:`Authenticator` maps a request's credentials to a :class:`UserInfo`: static bearer tokens
the server registers (:meth:`Authenticator.add_token`), ServiceAccount tokens it issued through
TokenRequest (HMAC-signed JWTs with an expiry), and TLS client certificates (CN = user, O =
groups). :class:`Authorizer` evaluates RBAC Roles, ClusterRoles and their bindings as stored in
the server, plus upstream's default grants (discovery and health paths, self reviews, and the
``cluster-admin``/``admin``/``edit``/``view`` ClusterRoles when the store does not define them).
"""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import hmac
import json
import secrets
import time
import uuid
from dataclasses import dataclass
from typing import Any

from .schema.default_roles import AGGREGATES, DEFAULT_CLUSTER_ROLES, labels_match

__all__ = [
    "Authenticator",
    "Authorizer",
    "RequestAttributes",
    "Unauthenticated",
    "UserInfo",
    "forbidden_message",
]

AUTHENTICATED = "system:authenticated"
UNAUTHENTICATED = "system:unauthenticated"
MASTERS = "system:masters"
DEFAULT_AUDIENCE = "https://kubernetes.default.svc.cluster.local"
RBAC = "rbac.authorization.k8s.io"


@dataclass(frozen=True)
class UserInfo:
    """An authenticated (or anonymous) user: name, groups, an optional uid and extra attributes
    (``((key, (value, ...)), ...)``, as impersonation can set them)."""

    name: str
    groups: tuple[str, ...]
    uid: str = ""
    extra: tuple[tuple[str, tuple[str, ...]], ...] = ()


@dataclass(frozen=True)
class RequestAttributes:
    """What a request wants to do, as RBAC sees it.

    ``resource`` is the plural (``"deployments"``), ``verb`` an API verb (get, list, watch, create,
    update, patch, delete, deletecollection) for resource requests or the lower-cased HTTP method
    for non-resource requests (``path`` then matters).
    """

    verb: str
    group: str
    resource: str
    subresource: str
    namespace: str
    name: str
    path: str
    resource_request: bool


class Unauthenticated(Exception):
    """Credentials were presented but are not valid (answered with 401)."""


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _with_authenticated(groups: tuple[str, ...]) -> tuple[str, ...]:
    return groups if AUTHENTICATED in groups else (*groups, AUTHENTICATED)


class Authenticator:
    """Maps request credentials to users; raises :class:`Unauthenticated` for bad credentials.

    ``signing_key`` signs the ServiceAccount tokens this authenticator issues (random per
    instance by default, so tokens do not survive a server process; pass a fixed key to keep them
    valid across restarts).
    """

    def __init__(self, *, signing_key: bytes | None = None, issuer: str = DEFAULT_AUDIENCE) -> None:
        self._tokens: dict[str, UserInfo] = {}
        self._key = signing_key or secrets.token_bytes(32)
        self.issuer = issuer

    def add_token(self, token: str, user: UserInfo) -> None:
        """Accept ``Authorization: Bearer <token>`` as ``user`` (replaces an earlier mapping)."""
        self._tokens[token] = user

    def remove_token(self, token: str) -> None:
        """Stop accepting a static token (no-op when unknown)."""
        self._tokens.pop(token, None)

    def authenticate(self, request: Any) -> UserInfo | None:
        """The user behind ``request`` (an aiohttp request), or None when it carries no credentials.

        A bearer token wins over a client certificate. Raises :class:`Unauthenticated` for an
        unknown, badly signed or expired token. Every authenticated user is in
        ``system:authenticated``.
        """
        header = request.headers.get("Authorization", "")
        if header:
            scheme, _, token = header.partition(" ")
            token = token.strip()
            if scheme.lower() != "bearer" or not token:
                raise Unauthenticated("unsupported Authorization header")
            return self.user_for_token(token)
        transport = getattr(request, "transport", None)
        if transport is None:
            return None
        return _cert_user(transport.get_extra_info("peercert"), transport.get_extra_info("ssl_object"))

    def static_user(self, token: str) -> UserInfo | None:
        """The user a token registered with :meth:`add_token` stands for, or None."""
        user = self._tokens.get(token)
        return None if user is None else UserInfo(user.name, _with_authenticated(user.groups), user.uid)

    def user_for_token(self, token: str) -> UserInfo:
        """The user a bearer token stands for; raises :class:`Unauthenticated` when invalid."""
        user = self._tokens.get(token)
        if user is not None:
            return UserInfo(user.name, _with_authenticated(user.groups), user.uid)
        if token.count(".") == 2:
            return self._service_account_user(token)
        raise Unauthenticated("invalid bearer token")

    def issue_service_account_token(
        self, namespace: str, name: str, uid: str, *, audiences: list[str], expiration_seconds: int
    ) -> tuple[str, str]:
        """Sign a ServiceAccount token; returns (token, expiration timestamp RFC 3339)."""
        now = int(time.time())
        exp = now + expiration_seconds
        claims = {
            "aud": audiences,
            "exp": exp,
            "iat": now,
            "nbf": now,
            "iss": self.issuer,
            "jti": str(uuid.uuid4()),
            "sub": f"system:serviceaccount:{namespace}:{name}",
            "kubernetes.io": {"namespace": namespace, "serviceaccount": {"name": name, "uid": uid}},
        }
        header = _b64(json.dumps({"alg": "HS256", "typ": "JWT", "kid": "mcr-envtest"}).encode())
        payload = _b64(json.dumps(claims, separators=(",", ":")).encode())
        signature = _b64(hmac.new(self._key, f"{header}.{payload}".encode(), hashlib.sha256).digest())
        expires = dt.datetime.fromtimestamp(exp, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        return f"{header}.{payload}.{signature}", expires

    def _service_account_user(self, token: str) -> UserInfo:
        header, payload, signature = token.split(".")
        want = hmac.new(self._key, f"{header}.{payload}".encode(), hashlib.sha256).digest()
        try:
            ok = hmac.compare_digest(want, _unb64(signature))
            claims = json.loads(_unb64(payload))
        except (ValueError, TypeError):
            raise Unauthenticated("malformed bearer token") from None
        if not ok or not isinstance(claims, dict):
            raise Unauthenticated("invalid bearer token")
        if not isinstance(claims.get("exp"), int) or claims["exp"] <= time.time():
            raise Unauthenticated("token has expired")
        aud = claims.get("aud")
        if self.issuer not in (aud if isinstance(aud, list) else [aud]):
            raise Unauthenticated("token audiences do not include the server's")
        k8s = claims.get("kubernetes.io") or {}
        ns = str(k8s.get("namespace", ""))
        sa = k8s.get("serviceaccount") or {}
        return UserInfo(
            f"system:serviceaccount:{ns}:{sa.get('name', '')}",
            ("system:serviceaccounts", f"system:serviceaccounts:{ns}", AUTHENTICATED),
            str(sa.get("uid", "")),
        )


def _cert_user(peercert: Any, ssl_object: Any) -> UserInfo | None:
    """CN → user, O → groups, from a verified TLS peer certificate (None when there is none)."""
    names: list[tuple[str, str]] = []
    if isinstance(peercert, dict) and peercert.get("subject"):
        for rdn in peercert["subject"]:
            for attr, value in rdn:
                names.append((attr, value))
    elif ssl_object is not None:
        der = ssl_object.getpeercert(binary_form=True)
        if not der:
            return None
        from cryptography import x509
        from cryptography.x509.oid import NameOID

        cert = x509.load_der_x509_certificate(der)
        for attr in cert.subject:
            if attr.oid == NameOID.COMMON_NAME:
                names.append(("commonName", str(attr.value)))
            elif attr.oid == NameOID.ORGANIZATION_NAME:
                names.append(("organizationName", str(attr.value)))
    cn = next((v for a, v in names if a == "commonName"), "")
    if not cn:
        return None
    groups = tuple(v for a, v in names if a == "organizationName")
    return UserInfo(cn, _with_authenticated(groups))


_PUBLIC_PATHS = ("/healthz", "/livez", "/readyz", "/version", "/version/")
_DISCOVERY_PREFIXES = ("/api", "/apis", "/openapi", "/healthz", "/livez", "/readyz", "/version")
_SELF_REVIEWS = {
    ("authorization.k8s.io", "selfsubjectaccessreviews"),
    ("authorization.k8s.io", "selfsubjectrulesreviews"),
    ("authentication.k8s.io", "selfsubjectreviews"),
}


def _has(values: Any, want: str) -> bool:
    return isinstance(values, list) and ("*" in values or want in values)


def _rule_allows(rule: dict[str, Any], attrs: RequestAttributes) -> bool:
    if not _has(rule.get("verbs"), attrs.verb):
        return False
    if not attrs.resource_request:
        urls = rule.get("nonResourceURLs")
        if not isinstance(urls, list):
            return False
        return any(
            u == "*" or u == attrs.path or (u.endswith("*") and attrs.path.startswith(u[:-1])) for u in urls
        )
    if not _has(rule.get("apiGroups"), attrs.group):
        return False
    resources = rule.get("resources")
    if not isinstance(resources, list):
        return False
    if attrs.subresource:
        full = f"{attrs.resource}/{attrs.subresource}"
        ok = any(r in (full, "*", f"*/{attrs.subresource}", f"{attrs.resource}/*") for r in resources)
    else:
        ok = "*" in resources or attrs.resource in resources
    if not ok:
        return False
    names = rule.get("resourceNames")
    return not names or (bool(attrs.name) and attrs.name in names)


def _subject_matches(subject: Any, user: UserInfo, binding_ns: str) -> bool:
    if not isinstance(subject, dict):
        return False
    kind, name = subject.get("kind"), subject.get("name")
    if kind == "User":
        return bool(name == user.name)
    if kind == "Group":
        return name in user.groups
    if kind == "ServiceAccount":
        ns = subject.get("namespace") or binding_ns
        return user.name == f"system:serviceaccount:{ns}:{name}"
    return False


class Authorizer:
    """RBAC over the Roles, ClusterRoles and bindings in ``store`` (read on every decision).

    ``system:masters`` may do anything; everyone may read the health and version paths;
    authenticated users may read discovery and OpenAPI and create self reviews.
    """

    def __init__(self, store: Any) -> None:
        self._store = store

    def _cluster_role(self, name: str) -> list[dict[str, Any]]:
        """The rules of a ClusterRole, with aggregated rules (aggregationRule selectors, and the
        ``aggregate-to-<admin|edit|view>`` labels for the built-in defaults) included."""
        role = self._store.get(RBAC, "clusterroles", "", name)
        if role is not None:
            rules = list(role.get("rules") or [])
            selectors = (role.get("aggregationRule") or {}).get("clusterRoleSelectors") or []
        else:
            rules = list(DEFAULT_CLUSTER_ROLES.get(name, []))
            selectors = [
                {"matchLabels": {f"{RBAC}/aggregate-to-{n}": "true"}} for n in AGGREGATES.get(name, ())
            ]
        if selectors:
            for other in self._store.list_objects(RBAC, "clusterroles"):
                labels = (other.get("metadata") or {}).get("labels") or {}
                if other["metadata"].get("name") != name and any(
                    labels_match(sel, labels) for sel in selectors
                ):
                    rules.extend(other.get("rules") or [])
        return rules

    def _role(self, namespace: str, name: str) -> list[dict[str, Any]]:
        role = self._store.get(RBAC, "roles", namespace, name)
        return list(role.get("rules") or []) if role is not None else []

    def authorize(self, user: UserInfo, attrs: RequestAttributes) -> tuple[bool, str]:
        """(allowed, reason): reason names the grant when allowed (none for ``system:masters``)
        and is empty when denied."""
        if MASTERS in user.groups:
            return True, ""  # upstream's privileged-group authorizer gives no reason
        # the default policy's bindings (system:discovery, system:public-info-viewer,
        # system:basic-user) grant health, version and discovery paths and self reviews, and are
        # named as kube-apiserver names them; without them the same grants apply unnamed
        for binding in self._store.list_objects(RBAC, "clusterrolebindings"):
            if not any(_subject_matches(s, user, "") for s in binding.get("subjects") or []):
                continue
            ref = binding.get("roleRef") or {}
            if ref.get("kind") == "ClusterRole" and any(
                _rule_allows(r, attrs) for r in self._cluster_role(ref.get("name", ""))
            ):
                return True, (
                    f'RBAC: allowed by ClusterRoleBinding "{binding["metadata"]["name"]}" of ClusterRole '
                    f'"{ref.get("name")}" to {_who(binding.get("subjects"), user, "")}'
                )
        if attrs.resource_request and attrs.namespace:
            for binding in self._store.list_objects(RBAC, "rolebindings", attrs.namespace):
                if not any(_subject_matches(s, user, attrs.namespace) for s in binding.get("subjects") or []):
                    continue
                ref = binding.get("roleRef") or {}
                name = ref.get("name", "")
                rules = (
                    self._cluster_role(name)
                    if ref.get("kind") == "ClusterRole"
                    else self._role(attrs.namespace, name)
                )
                if any(_rule_allows(r, attrs) for r in rules):
                    who = _who(binding.get("subjects"), user, attrs.namespace)
                    return True, (
                        f'RBAC: allowed by RoleBinding "{binding["metadata"]["name"]}/{attrs.namespace}" of '
                        f'{ref.get("kind")} "{name}" to {who}'
                    )
        return _default_grant(user, attrs), ""

    def rules_for(self, user: UserInfo, namespace: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """(resource rules, non-resource rules) granted to ``user`` in ``namespace`` (cluster-wide
        bindings included), as a SelfSubjectRulesReview lists them."""
        if MASTERS in user.groups:
            return (
                [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}],
                [{"verbs": ["*"], "nonResourceURLs": ["*"]}],
            )
        rules: list[dict[str, Any]] = []
        if AUTHENTICATED in user.groups:
            rules.append(
                {
                    "verbs": ["create"],
                    "apiGroups": ["authorization.k8s.io"],
                    "resources": ["selfsubjectaccessreviews", "selfsubjectrulesreviews"],
                }
            )
            rules.append(
                {
                    "verbs": ["create"],
                    "apiGroups": ["authentication.k8s.io"],
                    "resources": ["selfsubjectreviews"],
                }
            )
        non_resource: list[dict[str, Any]] = [{"verbs": ["get"], "nonResourceURLs": list(_PUBLIC_PATHS)}]
        if AUTHENTICATED in user.groups:
            non_resource.append(
                {
                    "verbs": ["get"],
                    "nonResourceURLs": [p + "/*" for p in _DISCOVERY_PREFIXES] + list(_DISCOVERY_PREFIXES),
                }
            )
        granted: list[dict[str, Any]] = []
        for binding in self._store.list_objects(RBAC, "clusterrolebindings"):
            ref = binding.get("roleRef") or {}
            if ref.get("kind") == "ClusterRole" and any(
                _subject_matches(s, user, "") for s in binding.get("subjects") or []
            ):
                granted.extend(self._cluster_role(ref.get("name", "")))
        if namespace:
            for binding in self._store.list_objects(RBAC, "rolebindings", namespace):
                if any(_subject_matches(s, user, namespace) for s in binding.get("subjects") or []):
                    ref = binding.get("roleRef") or {}
                    name = ref.get("name", "")
                    granted.extend(
                        self._cluster_role(name)
                        if ref.get("kind") == "ClusterRole"
                        else self._role(namespace, name)
                    )
        for rule in granted:
            if isinstance(rule.get("nonResourceURLs"), list):
                non_resource.append(
                    {"verbs": list(rule.get("verbs") or []), "nonResourceURLs": rule["nonResourceURLs"]}
                )
            else:
                out = {
                    k: list(rule[k])
                    for k in ("verbs", "apiGroups", "resources", "resourceNames")
                    if rule.get(k)
                }
                rules.append(out)
        return rules, non_resource


def _who(subjects: Any, user: UserInfo, binding_ns: str) -> str:
    """The binding's subject that matched ``user``, as upstream names it in a reason."""
    subject = next(s for s in subjects if _subject_matches(s, user, binding_ns))
    if subject.get("kind") == "ServiceAccount":
        return f'ServiceAccount "{subject.get("namespace") or binding_ns}/{subject.get("name")}"'
    return f'{subject.get("kind")} "{subject.get("name")}"'


def forbidden_message(user: UserInfo, attrs: RequestAttributes, resource_description: str) -> str:
    """Upstream's 403 message (F30) for a denied request.

    ``resource_description`` is ``plural[.group]`` as upstream names resources (``deployments.apps``).
    """
    if not attrs.resource_request:
        return f'forbidden: User "{user.name}" cannot {attrs.verb} path "{attrs.path}"'
    res = attrs.resource + (f"/{attrs.subresource}" if attrs.subresource else "")
    what = f'{resource_description} "{attrs.name}"' if attrs.name else resource_description
    scope = f'in the namespace "{attrs.namespace}"' if attrs.namespace else "at the cluster scope"
    return (
        f'{what} is forbidden: User "{user.name}" cannot {attrs.verb} resource "{res}" in API group '
        f'"{attrs.group}" {scope}'
    )


def _default_grant(user: UserInfo, attrs: RequestAttributes) -> bool:
    """What the default policy grants every user (health and version paths) and every
    authenticated user (discovery paths, self reviews)."""
    authenticated = AUTHENTICATED in user.groups
    if not attrs.resource_request:
        return attrs.verb in ("get", "head") and (
            attrs.path in _PUBLIC_PATHS or (authenticated and attrs.path.startswith(_DISCOVERY_PREFIXES))
        )
    return authenticated and attrs.verb == "create" and (attrs.group, attrs.resource) in _SELF_REVIEWS
