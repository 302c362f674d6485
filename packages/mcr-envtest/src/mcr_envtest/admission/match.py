"""Which webhooks a request concerns: rules (operations, groups, versions, resources and
subresources, scope), namespaceSelector, objectSelector and matchConditions (CEL).

matchConditions are evaluated with mcr-envtest's CEL subset (:mod:`mcr_envtest.cel`): an
expression outside it counts as an evaluation error, which the webhook's failurePolicy decides.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from mcr_envtest.cel.evaluator import evaluate
from mcr_envtest.cel.parser import CelError, parse
from mcr_envtest.store import Store

__all__ = ["Attributes", "ConditionError", "conditions_match", "label_selector_matches", "matches"]


@dataclass
class Attributes:
    """One admission request: what is done to which object, by whom."""

    operation: str  # CREATE | UPDATE | DELETE | CONNECT
    group: str
    version: str
    resource: str
    kind: str
    subresource: str
    namespace: str
    name: str
    namespaced: bool
    obj: dict[str, Any] | None
    old: dict[str, Any] | None
    dry_run: bool
    options: dict[str, Any]
    user: dict[str, Any] = field(default_factory=dict)


# kube-apiserver never sends requests for its admission configurations to webhooks (so that a
# webhook cannot lock out its own removal)
EXEMPT = frozenset(
    {
        "validatingwebhookconfigurations",
        "mutatingwebhookconfigurations",
        "validatingadmissionpolicies",
        "validatingadmissionpolicybindings",
        "mutatingadmissionpolicies",
        "mutatingadmissionpolicybindings",
    }
)


class ConditionError(Exception):
    """A matchCondition could not be evaluated (its text names the condition)."""


def _requirement(labels: dict[str, str], expr: dict[str, Any]) -> bool:
    key, op = str(expr.get("key")), expr.get("operator")
    values = [str(v) for v in expr.get("values") or []]
    if op == "In":
        return key in labels and labels[key] in values
    if op == "NotIn":
        return key not in labels or labels[key] not in values
    if op == "Exists":
        return key in labels
    if op == "DoesNotExist":
        return key not in labels
    return False


def label_selector_matches(selector: dict[str, Any] | None, labels: dict[str, str]) -> bool:
    """A metav1.LabelSelector over a label map (an empty or missing selector matches all)."""
    if not selector:
        return True
    for k, v in (selector.get("matchLabels") or {}).items():
        if labels.get(k) != v:
            return False
    return all(_requirement(labels, e) for e in selector.get("matchExpressions") or [] if isinstance(e, dict))


def _labels(obj: dict[str, Any] | None) -> dict[str, str]:
    if not obj:
        return {}
    labels = (obj.get("metadata") or {}).get("labels")
    return labels if isinstance(labels, dict) else {}


def _listed(values: Any, value: str) -> bool:
    return isinstance(values, list) and ("*" in values or value in values)


def _resource_matches(entries: Any, resource: str, subresource: str) -> bool:
    if not isinstance(entries, list):
        return False
    for entry in entries:
        res, _, sub = str(entry).partition("/")
        if entry == "*/*":
            return True
        if res in ("*", resource) and (sub == subresource or (sub == "*" and subresource)):
            return True
    return False


def _rule_matches(rule: dict[str, Any], attrs: Attributes) -> bool:
    if not _listed(rule.get("operations"), attrs.operation):
        return False
    if not _listed(rule.get("apiGroups"), attrs.group) or not _listed(rule.get("apiVersions"), attrs.version):
        return False
    if not _resource_matches(rule.get("resources"), attrs.resource, attrs.subresource):
        return False
    scope = rule.get("scope") or "*"
    is_ns = attrs.group == "" and attrs.resource == "namespaces"
    if scope == "Namespaced":
        return not is_ns and bool(attrs.namespace)
    if scope == "Cluster":
        return is_ns or not attrs.namespace
    return True


def _namespace_labels(store: Store, attrs: Attributes) -> dict[str, str] | None:
    """The labels namespaceSelector is evaluated on; None for cluster-scoped objects (which
    every namespaceSelector matches)."""
    if attrs.group == "" and attrs.resource == "namespaces":
        if not attrs.subresource and attrs.operation in ("CREATE", "UPDATE"):
            return _labels(attrs.obj)
        return _labels(store.get("", "namespaces", "", attrs.name))
    if not attrs.namespace:
        return None
    return _labels(store.get("", "namespaces", "", attrs.namespace))


def matches(store: Store, webhook: dict[str, Any], attrs: Attributes) -> bool:
    """True when ``webhook``'s rules and selectors select the request."""
    if attrs.group == "admissionregistration.k8s.io" and attrs.resource in EXEMPT:
        return False
    rules = webhook.get("rules") or []
    if not any(isinstance(r, dict) and _rule_matches(r, attrs) for r in rules):
        return False
    ns_labels = _namespace_labels(store, attrs)
    if ns_labels is not None and not label_selector_matches(webhook.get("namespaceSelector"), ns_labels):
        return False
    selector = webhook.get("objectSelector")
    if not selector:
        return True
    return any(o is not None and label_selector_matches(selector, _labels(o)) for o in (attrs.obj, attrs.old))


def conditions_match(webhook: dict[str, Any], request: dict[str, Any]) -> bool:
    """Evaluate the webhook's matchConditions over ``request`` (the AdmissionReview request):
    False when one is false; :class:`ConditionError` when none is false and one fails."""
    failed: str | None = None
    env = {
        "object": request.get("object"),
        "oldObject": request.get("oldObject"),
        "request": request,
        "authorizer": None,
    }
    for cond in webhook.get("matchConditions") or []:
        if not isinstance(cond, dict):
            continue
        name, expression = cond.get("name", ""), str(cond.get("expression", ""))
        try:
            value = evaluate(parse(expression), env)
        except CelError as exc:
            failed = failed or f"matchCondition {name!r} ({expression}): {exc}"
            continue
        if value is False:
            return False
        if value is not True:
            failed = failed or f"matchCondition {name!r} ({expression}) did not evaluate to a bool"
    if failed is not None:
        raise ConditionError(failed)
    return True
