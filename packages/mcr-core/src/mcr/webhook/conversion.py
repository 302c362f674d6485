"""CRD conversion: answering a ConversionReview with a converter function.

A converter is a callable, sync or async: ``converter(obj, desired_api_version, cluster_name)``
returns the object (a dict, or a model instance) in ``desired_api_version``. Each object of a
review is converted in turn; the review fails as a whole (``result.status: Failure``, message
naming the object) when a converter raises or returns an object of another apiVersion.
Cancellation propagates.
"""

from __future__ import annotations

import copy
import inspect
import logging
from collections.abc import Callable
from typing import Any

import orjson

from mcr.rest.kinds import to_dict

__all__ = ["Converter", "conversion_failure", "convert_review"]

log = logging.getLogger("mcr.webhook")

Converter = Callable[[dict[str, Any], str, str], Any]


def _result(api_version: str, uid: str, converted: list[Any] | None, failure: str | None) -> bytes:
    response: dict[str, Any] = {"uid": uid}
    if failure is None:
        response["convertedObjects"] = converted or []
        response["result"] = {"status": "Success"}
    else:
        response["convertedObjects"] = []
        response["result"] = {"status": "Failure", "message": failure}
    return orjson.dumps({"apiVersion": api_version, "kind": "ConversionReview", "response": response})


def conversion_failure(api_version: str, uid: str, message: str) -> bytes:
    """A ConversionReview answering ``uid`` with a failure."""
    return _result(api_version, uid, None, message)


async def convert_review(
    converter: Converter, api_version: str, request: dict[str, Any], cluster_name: str
) -> bytes:
    """The ConversionReview answering ``request`` (already checked to carry a ``uid``)."""
    uid = request["uid"]
    desired = request.get("desiredAPIVersion")
    objects = request.get("objects")
    if not isinstance(desired, str) or not desired:
        return conversion_failure(api_version, uid, "the ConversionReview's request has no desiredAPIVersion")
    if not isinstance(objects, list):
        return conversion_failure(api_version, uid, "the ConversionReview's request has no objects list")
    converted: list[Any] = []
    for obj in objects:
        meta = obj.get("metadata", {}) if isinstance(obj, dict) else {}
        key = f"{meta.get('namespace', '')}/{meta.get('name', '')}".lstrip("/")
        if not isinstance(obj, dict):
            return conversion_failure(api_version, uid, f"object #{len(converted)} is not a JSON object")
        if obj.get("apiVersion") == desired:
            converted.append(obj)
            continue
        try:
            out = converter(copy.deepcopy(obj), desired, cluster_name)
            if inspect.isawaitable(out):
                out = await out
            result = to_dict(out)
        except Exception as exc:  # the review fails with the error, the server keeps serving
            log.exception("converting %s to %s failed", key, desired, extra={"cluster": cluster_name})
            return conversion_failure(
                api_version,
                uid,
                f"converting {obj.get('kind')} {key} to {desired}: {type(exc).__name__}: {exc}",
            )
        if result.get("apiVersion") != desired:
            return conversion_failure(
                api_version,
                uid,
                f"converting {obj.get('kind')} {key} to {desired}: the converter returned apiVersion "
                f"{result.get('apiVersion')!r}",
            )
        converted.append(result)
    return _result(api_version, uid, converted, None)
