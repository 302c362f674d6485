"""Test helpers for code built on mcr: bounded polling and the provider conformance suite."""

from __future__ import annotations

from mcr.testing._eventually import eventually

__all__ = ["eventually"]
