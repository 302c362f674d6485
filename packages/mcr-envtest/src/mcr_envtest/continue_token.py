"""Continue tokens of paginated lists, refused in kube-apiserver's words when malformed.

A token is the unpadded base64url of upstream's ``{"v": "meta.k8s.io/v1", "rv": N, "start":
KEY}``; :func:`decode_continue` reports a bad one as kube-apiserver 1.37 does (``invalid
continue token: continue key is not valid: illegal base64 data at input byte 0``, ``invalid
character 'x' looking for beginning of value``, an unknown encoded version, a missing start).
"""

from __future__ import annotations

import base64
import re

import orjson

from . import errors, go_json

__all__ = ["decode_continue", "encode_continue"]

VERSION = "meta.k8s.io/v1"
_ILLEGAL = re.compile(r"[^A-Za-z0-9_-]")


def encode_continue(rv: int, start: str) -> str:
    """An opaque continue token: base64url of upstream's ``{"v","rv","start"}`` shape."""
    raw = orjson.dumps({"v": VERSION, "rv": rv, "start": start})
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_continue(token: str) -> tuple[int, str]:
    """(rv, start key) from a continue token; raises StatusError 400 for a malformed token."""

    def bad(why: str) -> errors.StatusError:
        return errors.bad_request(f"invalid continue token: continue key is not valid: {why}")

    illegal = _ILLEGAL.search(token)
    if illegal is not None or len(token) % 4 == 1:
        at = illegal.start() if illegal is not None else len(token) - 1
        raise bad(f"illegal base64 data at input byte {at}")
    raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError:
        raise bad(go_json.syntax_error(raw) or "unexpected end of JSON input") from None
    if not isinstance(data, dict):
        raise bad("json: cannot unmarshal into Go value of type storage.continueToken")
    if data.get("v") != VERSION:
        raise bad(f"server does not recognize this encoded version {data.get('v') or ''}")
    rv, start = data.get("rv"), data.get("start")
    if not isinstance(rv, int) or isinstance(rv, bool) or rv == 0:
        raise bad(f"incorrect encoded start resourceVersion (version {VERSION})")
    if not isinstance(start, str) or not start:
        raise bad(f"encoded start key empty (version {VERSION})")
    return rv, start
