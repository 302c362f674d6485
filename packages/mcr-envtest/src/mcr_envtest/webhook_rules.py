"""Validation of admission webhook configurations in kube-apiserver's order and words.

For each webhook of a ValidatingWebhookConfiguration or MutatingWebhookConfiguration,
:func:`causes` reports a name that is not a fully qualified domain name (three or more
segments), a missing or unsupported ``sideEffects``, a ``clientConfig`` with neither or both of
``url`` and ``service`` or a URL that is not plain ``https://host[/path]``, and missing,
duplicate or unrecognised ``admissionReviewVersions``. :func:`replaces` names the generic schema
causes these take the place of.
"""

from __future__ import annotations

import json
import re
from typing import Any
from urllib.parse import urlsplit

__all__ = ["KINDS", "causes", "replaces"]

KINDS = frozenset(
    {
        ("admissionregistration.k8s.io", "validatingwebhookconfigurations"),
        ("admissionregistration.k8s.io", "mutatingwebhookconfigurations"),
    }
)
Cause = dict[str, Any]
_LABEL = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_SUBDOMAIN = re.compile(rf"{_LABEL}(\.{_LABEL})*")
_DNS1035 = re.compile("[a-z]([-a-z0-9]*[a-z0-9])?")
_SIDE_EFFECTS = ("None", "NoneOnDryRun")
_REVIEW_VERSIONS = ("v1", "v1beta1")
_REPLACED = re.compile(r"webhooks\[\d+\]\.(name|sideEffects|admissionReviewVersions|clientConfig)")


def _cause(kind: str, message: str, field: str) -> Cause:
    return {"type": kind, "reason": kind, "message": message, "field": field}


def _q(value: Any) -> str:
    return '"' + str(value).replace("\\", "\\\\").replace('"', '\\"') + '"'


def replaces(cause: Cause) -> bool:
    """True for a generic schema cause that :func:`causes` reports in upstream's words."""
    return cause.get("type") == "FieldValueRequired" and bool(
        _REPLACED.fullmatch(str(cause.get("field", "")))
    )


def _name(name: Any, field: str) -> list[Cause]:
    if not name:
        return [_cause("FieldValueRequired", "Required value", field)]
    out: list[Cause] = []
    text = str(name)
    if len(text) > 253 or not _SUBDOMAIN.fullmatch(text.lower()):
        out.append(
            _cause(
                "FieldValueInvalid",
                f"Invalid value: {_q(text)}: a lowercase RFC 1123 subdomain must consist of lower case "
                "alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character "
                f"(e.g. 'example.com', regex used for validation is '{_LABEL}(\\.{_LABEL})*')",
                field,
            )
        )
    if len(text.split(".")) < 3:
        message = (
            f"Invalid value: {_q(text)}: should be a domain with at least three segments separated by dots"
        )
        out.append(_cause("FieldValueInvalid", message, field))
    return out


def _client_config(config: Any, field: str) -> list[Cause]:
    config = config if isinstance(config, dict) else {}
    url, service = config.get("url"), config.get("service")
    if (url is None) == (service is None):
        return [
            _cause("FieldValueRequired", "Required value: exactly one of url or service is required", field)
        ]
    if url is None:
        return []
    where, parts = f"{field}.url", urlsplit(str(url))
    if parts.scheme != "https":
        why = "'https' is the only allowed URL scheme; desired format: https://host[/path]"
        return [_cause("FieldValueInvalid", f"Invalid value: {_q(parts.scheme)}: {why}", where)]
    out: list[Cause] = []
    if not parts.hostname:
        out.append(
            _cause("FieldValueInvalid", f"Invalid value: {_q(parts.netloc)}: host must be specified", where)
        )
    for present, what in (
        (parts.username or parts.password, "user information is not permitted in the URL"),
        (parts.fragment, "fragments are not permitted in the URL"),
        (parts.query, "query parameters are not permitted in the URL"),
    ):
        if present:
            out.append(_cause("FieldValueInvalid", f"Invalid value: {_q(url)}: {what}", where))
    return out


def _review_versions(versions: Any, field: str) -> list[Cause]:
    if not isinstance(versions, list) or not versions:
        message = f"Required value: must specify one of {', '.join(_REVIEW_VERSIONS)}"
        return [_cause("FieldValueRequired", message, field)]
    out: list[Cause] = []
    for i, version in enumerate(versions):
        if version in versions[:i]:
            out.append(
                _cause(
                    "FieldValueInvalid", f"Invalid value: {_q(version)}: duplicate version", f"{field}[{i}]"
                )
            )
    if not any(v in _REVIEW_VERSIONS for v in versions):
        listed = json.dumps(versions, separators=(",", ":"))
        message = f"Invalid value: {listed}: must include at least one of {', '.join(_REVIEW_VERSIONS)}"
        out.append(_cause("FieldValueInvalid", message, field))
    return out


def causes(obj: dict[str, Any]) -> list[Cause]:
    """The causes of each webhook of a webhook configuration, in kube-apiserver's order."""
    out: list[Cause] = []
    webhooks = obj.get("webhooks")
    for i, hook in enumerate(webhooks if isinstance(webhooks, list) else []):
        if not isinstance(hook, dict):
            continue
        field = f"webhooks[{i}]"
        out.extend(_name(hook.get("name"), f"{field}.name"))
        effects = hook.get("sideEffects")
        if effects is None:
            message = f"Required value: must specify one of {', '.join(_SIDE_EFFECTS)}"
            out.append(_cause("FieldValueRequired", message, f"{field}.sideEffects"))
        elif effects not in _SIDE_EFFECTS:
            allowed = ", ".join(_q(s) for s in _SIDE_EFFECTS)
            message = f"Unsupported value: {_q(effects)}: supported values: {allowed}"
            out.append(_cause("FieldValueNotSupported", message, f"{field}.sideEffects"))
        out.extend(_client_config(hook.get("clientConfig"), f"{field}.clientConfig"))
        out.extend(_review_versions(hook.get("admissionReviewVersions"), f"{field}.admissionReviewVersions"))
    return out
