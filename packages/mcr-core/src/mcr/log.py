"""Structured logging: every record logged inside a reconcile carries its controller and request.

mcr logs through the standard :mod:`logging` module under the ``mcr`` logger hierarchy. Context
fields (``controller``, ``cluster``, ``namespace``, ``name`` and any others) live in context
variables, so they follow the asyncio task that set them: a controller's worker sets
``controller`` once and the request being reconciled (:func:`mcr.reconcile.current_request`)
around each reconcile; ``cluster``, ``namespace`` and ``name`` are read from that request when a
record is logged. Every record logged during a reconcile — by mcr or by user code, through any
logger — gets the fields once :class:`ContextFilter` is on the handler. Fields set with
:func:`log_context` win over the request's.

:func:`setup_logging` installs a handler with the filter and a key=value or JSON formatter. Users
with their own handlers add ``ContextFilter()`` to them and read ``record.mcr`` (a dict) or the
individual attributes (``record.cluster`` …) in their format strings.

Extra fields passed per call (``log.info("msg", extra={"object": "ns/x"})``) are rendered too.
"""

from __future__ import annotations

import contextlib
import contextvars
import datetime
import logging
import sys
import types
from collections.abc import Iterator, Mapping
from typing import Any, Literal, TextIO

import orjson

from mcr._context import CURRENT_REQUEST as _current_request

__all__ = [
    "REQUEST_FIELDS",
    "ContextFilter",
    "JSONFormatter",
    "KeyValueFormatter",
    "current_fields",
    "fresh_context",
    "get_logger",
    "log_context",
    "set_task_fields",
    "setup_logging",
]

_EMPTY: Mapping[str, object] = types.MappingProxyType({})
_fields: contextvars.ContextVar[Mapping[str, object]] = contextvars.ContextVar(
    "mcr_log_fields", default=_EMPTY
)

# The attributes a LogRecord has on its own; anything else on a record came from ``extra``.
_RECORD_ATTRS = frozenset(logging.LogRecord("", 0, "", 0, "", (), None).__dict__) | {
    "message",
    "asctime",
    "mcr",
    "taskName",
}

# Context fields always present on a record (empty when unset), so format strings can use them.
_STANDARD_FIELDS = ("controller", "cluster", "namespace", "name")


def get_logger(name: str) -> logging.Logger:
    """The logger for an mcr component: ``mcr.<name>`` (``name`` may already start with ``mcr``)."""
    return logging.getLogger(name if name == "mcr" or name.startswith("mcr.") else f"mcr.{name}")


def current_fields() -> Mapping[str, object]:
    """The context fields of this task (read-only): the current request's, then :func:`log_context`'s."""
    if _current_request.get() is None:
        return _fields.get()
    return types.MappingProxyType(_context_fields())


def _context_fields() -> dict[str, object]:
    """A new dict of the context fields: ``controller``, the current request's, then the others."""
    fields = _fields.get()
    req = _current_request.get()
    if req is None:
        return dict(fields)
    merged: dict[str, object] = {}
    controller = fields.get("controller")
    if controller is not None:
        merged["controller"] = controller
    merged["cluster"] = req.cluster_name
    merged["namespace"] = req.namespace
    merged["name"] = req.name
    merged.update(fields)
    return merged


REQUEST_FIELDS = ("cluster", "namespace", "name")
"""The fields every record inside a reconcile takes from the current request."""


def set_task_fields(**fields: object) -> None:
    """Set ``fields`` for the rest of this task, with no block to leave.

    For a task that does one job for its whole life, such as a controller's worker: the fields it
    inherited stay, except :data:`REQUEST_FIELDS` (each record inside a reconcile takes those from
    the current request), and ``fields`` are added. Other tasks are not affected; tasks this one
    creates afterwards inherit the fields.
    """
    inherited = _fields.get()
    _fields.set({**{k: v for k, v in inherited.items() if k not in REQUEST_FIELDS}, **fields})


@contextlib.contextmanager
def log_context(**fields: object) -> Iterator[Mapping[str, object]]:
    """Add ``fields`` to every record logged inside the ``with`` block in this task.

    Nested blocks merge (inner values win) and the previous fields come back on exit, also on error
    or cancellation. Tasks created inside the block inherit a copy of the fields (contextvars are
    copied at task creation), so a field set in one reconcile never leaks into another.
    """
    merged = {**_fields.get(), **fields}
    token = _fields.set(merged)
    try:
        yield merged
    finally:
        _fields.reset(token)


@contextlib.contextmanager
def fresh_context(**fields: object) -> Iterator[Mapping[str, object]]:
    """Inside the ``with`` block, this task's records carry ``fields`` only: neither the fields it
    inherited nor the current request's.

    For work that outlives the task that asked for it, such as a cluster engaged by a provider's
    reconcile: the engagement's records and the tasks created inside the block (they inherit a
    copy) must not carry the provider's controller and request. The previous fields and request
    come back on exit, also on error or cancellation.
    """
    request = _current_request.set(None)
    token = _fields.set(types.MappingProxyType(dict(fields)))
    try:
        yield _fields.get()
    finally:
        _fields.reset(token)
        _current_request.reset(request)


class ContextFilter(logging.Filter):
    """Attach the current context fields to each record; never drops a record.

    Sets ``record.mcr`` (a dict of every context field) and one attribute per field; the standard
    fields ``controller``, ``cluster``, ``namespace`` and ``name`` are always set (``""`` when
    unset). Fields already on the record (from ``extra``) are kept, not overwritten. Put it on a
    *handler*: filters on a logger do not see records propagated from child loggers.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        fields = _context_fields()
        for key in _STANDARD_FIELDS:
            fields.setdefault(key, "")
        for key, value in fields.items():
            if key in _RECORD_ATTRS:
                continue
            if key in record.__dict__:
                # Given with ``extra`` (e.g. the cluster a manager line is about): it wins, and
                # ``record.mcr`` must say so too, since formatters read the fields from it.
                fields[key] = record.__dict__[key]
            else:
                setattr(record, key, value)
        record.mcr = fields
        return True


def _record_fields(record: logging.LogRecord) -> dict[str, object]:
    """Context fields (via the filter, or read now) plus any ``extra`` fields on the record."""
    recorded = getattr(record, "mcr", None)
    fields: dict[str, object] = dict(recorded) if recorded else _context_fields()
    for key, value in record.__dict__.items():
        if key not in _RECORD_ATTRS and key not in fields:
            fields[key] = value
    return fields


def _timestamp(record: logging.LogRecord) -> str:
    return datetime.datetime.fromtimestamp(record.created, tz=datetime.UTC).isoformat(timespec="milliseconds")


def _kv_value(value: object) -> str:
    text = value if isinstance(value, str) else repr(value)
    if text == "" or any(c in text for c in ' "=\n\t'):
        return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'
    return text


class KeyValueFormatter(logging.Formatter):
    """``ts=… level=info logger=mcr.controller msg="…" controller=… cluster=… namespace=… name=…``.

    Empty context fields are left out; exceptions are appended as an ``error`` field and a
    traceback on the following lines.
    """

    def format(self, record: logging.LogRecord) -> str:
        parts = [
            f"ts={_timestamp(record)}",
            f"level={record.levelname.lower()}",
            f"logger={record.name}",
            f"msg={_kv_value(record.getMessage())}",
        ]
        for key, value in _record_fields(record).items():
            if value is None or value == "":
                continue
            parts.append(f"{key}={_kv_value(value)}")
        line = " ".join(parts)
        if record.exc_info and record.exc_info[1] is not None:
            line += f" error={_kv_value(str(record.exc_info[1]) or type(record.exc_info[1]).__name__)}"
            line += "\n" + self.formatException(record.exc_info)
        return line


class JSONFormatter(logging.Formatter):
    """One JSON object per line: ``ts``, ``level``, ``logger``, ``msg``, the fields, ``error``/``stacktrace``.

    Non-JSON values are rendered with ``str``.
    """

    def format(self, record: logging.LogRecord) -> str:
        doc: dict[str, Any] = {
            "ts": _timestamp(record),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        for key, value in _record_fields(record).items():
            doc.setdefault(key, value)
        if record.exc_info and record.exc_info[1] is not None:
            doc["error"] = str(record.exc_info[1]) or type(record.exc_info[1]).__name__
            doc["stacktrace"] = self.formatException(record.exc_info)
        return orjson.dumps(doc, default=str).decode()


def setup_logging(
    level: int | str = logging.INFO,
    *,
    fmt: Literal["kv", "json"] = "kv",
    stream: TextIO | None = None,
    logger: str = "",
) -> logging.Handler:
    """Install one stream handler with :class:`ContextFilter` and the chosen formatter on ``logger``.

    ``logger=""`` (the root) makes user loggers structured too; pass ``"mcr"`` to format only mcr's
    records. Repeat calls replace the handler a previous call installed rather than adding a second.
    Returns the handler (remove it with ``logging.getLogger(logger).removeHandler(h)``).
    """
    target = logging.getLogger(logger)
    for old in list(target.handlers):
        if getattr(old, "_mcr_handler", False):
            target.removeHandler(old)
    handler = logging.StreamHandler(stream if stream is not None else sys.stderr)
    handler.addFilter(ContextFilter())
    handler.setFormatter(JSONFormatter() if fmt == "json" else KeyValueFormatter())
    handler._mcr_handler = True  # type: ignore[attr-defined]  # marker for repeat calls
    target.addHandler(handler)
    target.setLevel(level)
    return handler
