"""User impersonation (``Impersonate-User``, ``-Group``, ``-Uid``, ``-Extra-<key>`` headers).

As kube-apiserver does, the authenticated user must be allowed the verb ``impersonate`` on each
thing it asks to act as: ``users`` (by name), ``groups`` and ``serviceaccounts`` (by namespace
and name) in the core API group, ``uids`` and ``userextras/<key>`` (by value) in
``authentication.k8s.io``. The request then runs as the impersonated user: RBAC, self reviews
(``kubectl auth can-i --as``) and the request log see that user. Anything not allowed is a 403
naming the first thing that may not be impersonated; groups, uid or extras without a user are
a 400.
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Mapping

from . import errors
from .auth import AUTHENTICATED, Authorizer, RequestAttributes, UserInfo

__all__ = ["HEADER_PREFIX", "impersonate"]

HEADER_PREFIX = "impersonate-"
USER = "Impersonate-User"
GROUP = "Impersonate-Group"
UID = "Impersonate-Uid"
EXTRA = "impersonate-extra-"
SA_PREFIX = "system:serviceaccount:"
AUTHN = "authentication.k8s.io"


class _Headers:
    """The impersonation part of a request's headers."""

    def __init__(self, headers: Mapping[str, str]) -> None:
        getall = getattr(headers, "getall", None)
        self.user = headers.get(USER, "")
        self.groups: list[str] = (
            list(getall(GROUP, [])) if getall else ([headers[GROUP]] if GROUP in headers else [])
        )
        self.uid = headers.get(UID, "")
        extra: dict[str, list[str]] = {}
        for key, value in headers.items():
            if key.lower().startswith(EXTRA):
                name = urllib.parse.unquote(key[len(EXTRA) :]).lower()
                extra.setdefault(name, []).append(value)
        self.extra = extra
        self.any = bool(self.user or self.groups or self.uid or self.extra) or USER in headers


def _check(authorizer: Authorizer, actor: UserInfo, attrs: RequestAttributes) -> None:
    allowed, _ = authorizer.authorize(actor, attrs)
    if allowed:
        return
    res = attrs.resource + (f"/{attrs.subresource}" if attrs.subresource else "")
    what = f"{attrs.resource}.{attrs.group}" if attrs.group else attrs.resource
    scope = f'in the namespace "{attrs.namespace}"' if attrs.namespace else "at the cluster scope"
    details = {"name": attrs.name, "kind": attrs.resource, **({"group": attrs.group} if attrs.group else {})}
    raise errors.StatusError(
        403,
        "Forbidden",
        f'{what} "{attrs.name}" is forbidden: User "{actor.name}" cannot impersonate resource "{res}" '
        f'in API group "{attrs.group}" {scope}',
        details=details,
    )


def _attrs(group: str, resource: str, name: str, *, namespace: str = "", sub: str = "") -> RequestAttributes:
    return RequestAttributes(
        verb="impersonate",
        group=group,
        resource=resource,
        subresource=sub,
        namespace=namespace,
        name=name,
        path="",
        resource_request=True,
    )


def _go_quote(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _go_user(h: _Headers) -> str:
    """The requested user as kube-apiserver prints it (Go's ``%#v`` of its user info)."""
    groups = "[]string{" + ", ".join(_go_quote(g) for g in h.groups) + "}" if h.groups else "[]string(nil)"
    extra = "map[string][]string(nil)"
    if h.extra:
        items = ", ".join(
            f"{_go_quote(k)}:[]string{{{', '.join(_go_quote(v) for v in vs)}}}"
            for k, vs in sorted(h.extra.items())
        )
        extra = "map[string][]string{" + items + "}"
    return f'&user.DefaultInfo{{Name:"", UID:{_go_quote(h.uid or "")}, Groups:{groups}, Extra:{extra}}}'


def impersonate(headers: Mapping[str, str], actor: UserInfo, authorizer: Authorizer) -> UserInfo:
    """The user a request runs as: ``actor`` itself without impersonation headers, else the
    impersonated user once every part of it is authorized (see the module docstring).

    Raises :class:`errors.StatusError` 400 for a malformed request and 403 when ``actor`` may not
    impersonate one of the requested attributes."""
    h = _Headers(headers)
    if not h.any:
        return actor
    if not h.user:
        raise errors.bad_request(f"requested {_go_user(h)} without impersonating a user name")
    groups = list(h.groups)
    if h.user.startswith(SA_PREFIX) and h.user.count(":") == 3:
        ns, name = h.user[len(SA_PREFIX) :].split(":", 1)
        _check(authorizer, actor, _attrs("", "serviceaccounts", name, namespace=ns))
        if not groups:
            groups = ["system:serviceaccounts", f"system:serviceaccounts:{ns}"]
    else:
        _check(authorizer, actor, _attrs("", "users", h.user))
    for g in h.groups:
        _check(authorizer, actor, _attrs("", "groups", g))
    if h.uid:
        _check(authorizer, actor, _attrs(AUTHN, "uids", h.uid))
    for key, values in h.extra.items():
        for value in values:
            _check(authorizer, actor, _attrs(AUTHN, "userextras", value, sub=key))
    if h.user != "system:anonymous" and AUTHENTICATED not in groups:
        groups.append(AUTHENTICATED)
    return UserInfo(h.user, tuple(groups), h.uid, tuple((k, tuple(v)) for k, v in sorted(h.extra.items())))
