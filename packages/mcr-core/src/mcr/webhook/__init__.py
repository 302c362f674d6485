"""Admission and conversion webhooks for a fleet: one HTTPS server, a path per cluster.

``WebhookServer`` serves the reviews and keeps each engaged cluster's webhook configurations
current; ``webhook_managed_by(mgr).for_(Kind)`` registers validators, defaulters and converters.
"""

from __future__ import annotations

from mcr.webhook.admission import AdmissionRequest, Response, allowed, denied
from mcr.webhook.builder import WebhookBuilder, webhook_managed_by
from mcr.webhook.patch import diff as json_patch
from mcr.webhook.routing import cluster_segment, path_for
from mcr.webhook.server import WebhookServer

__all__ = [
    "AdmissionRequest",
    "Response",
    "WebhookBuilder",
    "WebhookServer",
    "allowed",
    "cluster_segment",
    "denied",
    "json_patch",
    "path_for",
    "webhook_managed_by",
]
