"""Rules of NetworkPolicies that kube-apiserver's validation enforces beyond their OpenAPI
schema (ports and port ranges, peers, IP blocks, policy types, label selectors), as Status
causes in kube-apiserver's order."""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable
from typing import Any

from .label_selector import key_problems, value_problems
from .object_rules import field_cause, go_json, go_quoted

__all__ = ["RULES", "label_selector_causes"]

Obj = dict[str, Any]
Cause = dict[str, Any]
Rule = Callable[[Obj, "Obj | None"], list[Cause]]

_PROTOCOLS = ("TCP", "UDP", "SCTP")
_POLICY_TYPES = ("Ingress", "Egress")
_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")
_MSG_PORT = "must be between 1 and 65535, inclusive"
_MSG_CIDR = "must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)"
_RE_PORT_NAME_CHARS = re.compile(r"[-a-z0-9]+")
_RE_LETTER = re.compile(r"[a-z]")


def _invalid(value: Any, message: str, field: str) -> Cause:
    shown = go_quoted(value) if isinstance(value, str) else str(value)
    return field_cause("FieldValueInvalid", f"Invalid value: {shown}: {message}", field)


def _unsupported(value: str, supported: tuple[str, ...], field: str) -> Cause:
    listed = ", ".join(go_quoted(s) for s in supported)
    return field_cause(
        "FieldValueNotSupported", f"Unsupported value: {go_quoted(value)}: supported values: {listed}", field
    )


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def label_selector_causes(selector: Any, path: str) -> list[Cause]:
    """A LabelSelector's keys, values and operators, as kube-apiserver validates them."""
    if not isinstance(selector, dict):
        return []
    out: list[Cause] = []
    labels = selector.get("matchLabels")
    for key, value in (labels if isinstance(labels, dict) else {}).items():
        out += [_invalid(key, m, f"{path}.matchLabels") for m in key_problems(key)]
        if isinstance(value, str):
            out += [_invalid(value, m, f"{path}.matchLabels") for m in value_problems(value)]
    exprs = selector.get("matchExpressions")
    for i, expr in enumerate(exprs if isinstance(exprs, list) else []):
        if not isinstance(expr, dict):
            continue
        at = f"{path}.matchExpressions[{i}]"
        op, values = expr.get("operator", ""), expr.get("values") or []
        if op in ("In", "NotIn") and not values:
            out.append(
                field_cause(
                    "FieldValueRequired",
                    "Required value: must be specified when `operator` is 'In' or 'NotIn'",
                    f"{at}.values",
                )
            )
        elif op in ("Exists", "DoesNotExist") and values:
            out.append(
                field_cause(
                    "FieldValueForbidden",
                    "Forbidden: may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
                    f"{at}.values",
                )
            )
        elif op not in _OPERATORS:
            out.append(_invalid(str(op), "not a valid selector operator", f"{at}.operator"))
        key = expr.get("key", "")
        out += [_invalid(key, m, f"{at}.key") for m in key_problems(str(key))]
        for j, value in enumerate(values if isinstance(values, list) else []):
            if isinstance(value, str):
                out += [_invalid(value, m, f"{at}.values[{j}]") for m in value_problems(value)]
    return out


def _port_name_problems(name: str) -> list[str]:
    bad = ["must be no more than 15 characters"] if len(name) > 15 else []
    if not _RE_PORT_NAME_CHARS.fullmatch(name):
        bad.append("must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)")
    if not _RE_LETTER.search(name):
        bad.append("must contain at least one letter (a-z)")
    if "--" in name:
        bad.append("must not contain consecutive hyphens")
    if name and (name[0] == "-" or name[-1] == "-"):
        bad.append("must not begin or end with a hyphen")
    return bad


def _port_causes(port: Obj, path: str) -> list[Cause]:
    out: list[Cause] = []
    protocol = port.get("protocol")
    if isinstance(protocol, str) and protocol not in _PROTOCOLS:
        out.append(_unsupported(protocol, _PROTOCOLS, f"{path}.protocol"))
    number, end = port.get("port"), port.get("endPort")
    if number is None:
        if end is not None:
            out.append(_invalid(end, "may not be specified when `port` is not specified", f"{path}.endPort"))
    elif _is_int(number):
        if not 1 <= number <= 65535:
            out.append(_invalid(number, _MSG_PORT, f"{path}.port"))
        if isinstance(end, int) and not isinstance(end, bool):
            if end < number:
                out.append(_invalid(end, "must be greater than or equal to `port`", f"{path}.endPort"))
            if not 1 <= end <= 65535:
                out.append(_invalid(end, _MSG_PORT, f"{path}.endPort"))
    elif isinstance(number, str):
        if end is not None:
            out.append(_invalid(end, "may not be specified when `port` is non-numeric", f"{path}.endPort"))
        out += [_invalid(number, m, f"{path}.port") for m in _port_name_problems(number)]
    return out


def _network(cidr: str) -> ipaddress.IPv4Network | ipaddress.IPv6Network | None:
    try:
        return ipaddress.ip_network(cidr, strict=False) if "/" in cidr else None
    except ValueError:
        return None


def _ip_block_causes(block: Obj, path: str) -> list[Cause]:
    cidr = block.get("cidr") or ""
    if not isinstance(cidr, str) or not cidr:
        return [field_cause("FieldValueRequired", "Required value", f"{path}.cidr")]
    net = _network(cidr)
    if net is None:
        return [_invalid(cidr, _MSG_CIDR, f"{path}.cidr")]
    out: list[Cause] = []
    excepts = block.get("except")
    for i, text in enumerate(excepts if isinstance(excepts, list) else []):
        at = f"{path}.except[{i}]"
        inner = _network(text) if isinstance(text, str) else None
        if inner is None:
            out.append(_invalid(text, _MSG_CIDR, at))
        elif inner.version != net.version or not (
            inner.network_address in net and net.prefixlen < inner.prefixlen
        ):
            out.append(_invalid(text, "must be a strict subset of `cidr`", at))
    return out


def _peer_causes(peer: Obj, path: str) -> list[Cause]:
    out: list[Cause] = []
    peers = 0
    for key in ("podSelector", "namespaceSelector"):
        if isinstance(peer.get(key), dict):
            peers += 1
            out += label_selector_causes(peer[key], f"{path}.{key}")
    block = peer.get("ipBlock")
    if isinstance(block, dict):
        peers += 1
        out += _ip_block_causes(block, f"{path}.ipBlock")
    if peers == 0:
        out.append(field_cause("FieldValueRequired", "Required value: must specify a peer", path))
    elif peers > 1 and isinstance(block, dict):
        out.append(
            field_cause(
                "FieldValueForbidden", "Forbidden: may not specify both ipBlock and another peer", path
            )
        )
    return out


def _network_policy(obj: Obj, old: Obj | None) -> list[Cause]:
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return []
    out = label_selector_causes(spec.get("podSelector"), "spec.podSelector")
    for direction, peers_key in (("ingress", "from"), ("egress", "to")):
        rules = spec.get(direction)
        for i, rule in enumerate(rules if isinstance(rules, list) else []):
            if not isinstance(rule, dict):
                continue
            at = f"spec.{direction}[{i}]"
            for j, port in enumerate(rule.get("ports") or []):
                if isinstance(port, dict):
                    out += _port_causes(port, f"{at}.ports[{j}]")
            for j, peer in enumerate(rule.get(peers_key) or []):
                if isinstance(peer, dict):
                    out += _peer_causes(peer, f"{at}.{peers_key}[{j}]")
    types = spec.get("policyTypes")
    if isinstance(types, list):
        if len(types) > len(_POLICY_TYPES):
            message = f"Invalid value: {go_json(types)}: may not specify more than two policyTypes"
            out.append(field_cause("FieldValueInvalid", message, "spec.policyTypes"))
            return out
        for i, kind in enumerate(types):
            if isinstance(kind, str) and kind not in _POLICY_TYPES:
                out.append(_unsupported(kind, _POLICY_TYPES, f"spec.policyTypes[{i}]"))
    return out


RULES: dict[tuple[str, str], Rule] = {
    ("networking.k8s.io", "networkpolicies"): _network_policy,
}
