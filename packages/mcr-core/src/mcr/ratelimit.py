"""Deprecated alias of :mod:`mcr.workqueue.ratelimit`: re-exports its names; removed in a later release."""

from __future__ import annotations

import warnings

from mcr.workqueue.ratelimit import (
    BucketRateLimiter,
    ItemExponentialFailureRateLimiter,
    ItemFastSlowRateLimiter,
    MaxOfRateLimiter,
    RateLimiter,
    bucket_controller_rate_limiter,
    cluster_of,
    default_controller_rate_limiter,
)

__all__ = [
    "BucketRateLimiter",
    "ItemExponentialFailureRateLimiter",
    "ItemFastSlowRateLimiter",
    "MaxOfRateLimiter",
    "RateLimiter",
    "bucket_controller_rate_limiter",
    "cluster_of",
    "default_controller_rate_limiter",
]

warnings.warn(
    "mcr.ratelimit is deprecated; import from mcr.workqueue.ratelimit instead",
    DeprecationWarning,
    stacklevel=2,
)
