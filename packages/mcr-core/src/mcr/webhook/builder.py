"""The fluent webhook builder: ``webhook_managed_by(mgr).for_(Kind).with_validator(fn).complete()``.

Mirrors controller-runtime's webhook builder: one ``for_`` kind, a validator and/or a defaulter
(admission) and/or a converter (CRD conversion), registered on the manager's webhook server.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from mcr.rest.kinds import gvk_of, is_model_class
from mcr.webhook.admission import Handler
from mcr.webhook.conversion import Converter
from mcr.webhook.registration import AdmissionSpec, ConversionSpec
from mcr.webhook.server import WebhookServer

__all__ = ["WebhookBuilder", "webhook_managed_by"]

_FAILURE_POLICIES = ("Fail", "Ignore")
_SIDE_EFFECTS = ("None", "NoneOnDryRun")


class WebhookBuilder:
    """Collects one kind's webhooks; :meth:`complete` registers them on the server.

    Misuse raises ``ValueError``: ``for_`` twice, :meth:`complete` without ``for_`` or without
    any handler, a failure policy other than ``Fail``/``Ignore``, side effects other than
    ``None``/``NoneOnDryRun``, a timeout outside 1..30 seconds.
    """

    def __init__(self, server: WebhookServer) -> None:
        self._server = server
        self._kind: Any = None
        self._specs: list[tuple[str, Handler, dict[str, Any]]] = []
        self._converter: Converter | None = None

    def for_(self, kind: Any) -> WebhookBuilder:
        """The kind (model class, GVK or ``"group/version/Kind"``) the webhooks admit or convert."""
        if self._kind is not None:
            raise ValueError(f"for_() was already called with {self._kind!r}")
        gvk_of(kind)  # refuses what does not name a kind, here rather than at complete()
        self._kind = kind
        return self

    def with_validator(self, validator: Handler, **options: Any) -> WebhookBuilder:
        """Validate with ``validator`` (see :mod:`mcr.webhook.admission`); ``options`` as
        :meth:`with_defaulter` (``reinvocation_policy`` excepted)."""
        self._specs.append(("validate", validator, _checked(options, "with_validator")))
        return self

    def with_defaulter(
        self,
        defaulter: Handler,
        *,
        failure_policy: str = "Fail",
        side_effects: str = "None",
        timeout_seconds: int = 10,
        operations: Iterable[str] = ("CREATE", "UPDATE"),
        match_conditions: Iterable[Mapping[str, str]] = (),
        namespace_selector: Mapping[str, Any] | None = None,
        object_selector: Mapping[str, Any] | None = None,
        name: str | None = None,
        reinvocation_policy: str | None = None,
    ) -> WebhookBuilder:
        """Default (mutate) with ``defaulter``; the options become the webhook's entry in each
        cluster's configuration (``match_conditions``: ``{"name": ..., "expression": ...}``)."""
        options = dict(
            failure_policy=failure_policy,
            side_effects=side_effects,
            timeout_seconds=timeout_seconds,
            operations=operations,
            match_conditions=match_conditions,
            namespace_selector=namespace_selector,
            object_selector=object_selector,
            name=name,
            reinvocation_policy=reinvocation_policy,
        )
        self._specs.append(("mutate", defaulter, _checked(options, "with_defaulter")))
        return self

    def with_converter(self, converter: Converter) -> WebhookBuilder:
        """Convert the ``for_`` kind's CRD between its versions with ``converter`` (see
        :mod:`mcr.webhook.conversion`); each engaged cluster's CRD gets strategy ``Webhook``."""
        self._converter = converter
        return self

    def complete(self) -> None:
        """Register the webhooks on the server (clusters engaged already are updated too)."""
        if self._kind is None:
            raise ValueError("for_() must be called before complete()")
        if not self._specs and self._converter is None:
            raise ValueError(
                f"no webhook for {self._kind!r}: call with_validator(), with_defaulter() or with_converter()"
            )
        gvk = gvk_of(self._kind)
        model = self._kind if is_model_class(self._kind) else None
        for operation, handler, options in self._specs:
            self._server.add_admission(AdmissionSpec(operation, gvk, model, handler, **options))
        if self._converter is not None:
            self._server.add_conversion(ConversionSpec(gvk, self._converter))


def _checked(options: dict[str, Any], where: str) -> dict[str, Any]:
    known = {
        "failure_policy",
        "side_effects",
        "timeout_seconds",
        "operations",
        "match_conditions",
        "namespace_selector",
        "object_selector",
        "name",
        "reinvocation_policy",
    }
    unknown = set(options) - known
    if where == "with_validator":
        unknown |= {"reinvocation_policy"} & set(options)
    if unknown:
        raise TypeError(f"{where}() got unexpected options: {', '.join(sorted(unknown))}")
    out = {k: v for k, v in options.items() if v is not None}
    if out.get("failure_policy", "Fail") not in _FAILURE_POLICIES:
        raise ValueError(
            f"{where}(): failure_policy must be one of {_FAILURE_POLICIES}, not {out['failure_policy']!r}"
        )
    if out.get("side_effects", "None") not in _SIDE_EFFECTS:
        raise ValueError(
            f"{where}(): side_effects must be one of {_SIDE_EFFECTS}, not {out['side_effects']!r}"
        )
    timeout = out.get("timeout_seconds", 10)
    if not isinstance(timeout, int) or not 1 <= timeout <= 30:
        raise ValueError(f"{where}(): timeout_seconds must be an integer from 1 to 30, not {timeout!r}")
    if "operations" in out:
        out["operations"] = tuple(out["operations"])
    if "match_conditions" in out:
        out["match_conditions"] = tuple(dict(c) for c in out["match_conditions"])
    return out


def webhook_managed_by(target: Any) -> WebhookBuilder:
    """Start building webhooks served by ``target``: a :class:`WebhookServer`, or an object
    (a manager) whose ``webhook_server`` attribute is one (``ValueError`` otherwise)."""
    if isinstance(target, WebhookServer):
        return WebhookBuilder(target)
    server = getattr(target, "webhook_server", None)
    if not isinstance(server, WebhookServer):
        raise ValueError(f"{target!r} has no webhook server: pass the WebhookServer itself")
    return WebhookBuilder(server)
