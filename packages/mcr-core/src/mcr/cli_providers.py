"""Providers chosen by name on the ``mcr run`` command line, their options converted to parameters.

``--provider [MEMBER=]NAME`` names an installed provider (``mcr providers`` lists them);
``--provider-opt KEY=VALUE`` sets one constructor parameter of the provider named just before it.
A value is converted to the parameter's annotated type: ``str`` and paths as given; ``int`` and
``float`` parsed; ``bool`` from ``true/false/yes/no/on/off/1/0``; a collection (``list``,
``Iterable`` ...) of those gets one item per repetition of the key. Parameters of other types
(a ``Cluster``, a factory) cannot be set from the command line.

Every mistake is a :class:`UsageError` whose message names the option and the provider.
"""

from __future__ import annotations

import collections.abc
import difflib
import inspect
import os
import sys
import types
import typing
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mcr.providers.registry import ProviderRegistry

__all__ = [
    "ProviderSpec",
    "UsageError",
    "accepts",
    "build_options",
    "missing_options",
    "parse_specs",
    "resolve",
]


class UsageError(Exception):
    """Bad command-line input: the message names what is wrong (the command exits 2)."""


@dataclass
class ProviderSpec:
    """One ``--provider``: the member name in a composed fleet, the provider name, its options."""

    member: str
    name: str
    options: list[tuple[str, str]] = field(default_factory=list)


def parse_specs(items: Sequence[tuple[str, str]]) -> list[ProviderSpec]:
    """``("provider", "[MEMBER=]NAME")`` and ``("opt", "[MEMBER.]KEY=VALUE")`` items, in order.

    An unqualified option applies to the provider before it; ``MEMBER.KEY=VALUE`` to the member
    of that name wherever it stands (the form environment variables use).
    """
    specs: list[ProviderSpec] = []
    pending: list[tuple[str, str, str]] = []
    for kind, raw in items:
        if kind == "provider":
            member, _, name = raw.rpartition("=")
            name = name.strip()
            member = member.strip() or name
            if not name:
                raise UsageError(f"--provider {raw!r}: expected NAME or MEMBER=NAME")
            if "#" in member or "." in member:
                raise UsageError(f"--provider {raw!r}: a member name cannot contain '#' or '.'")
            if any(s.member == member for s in specs):
                raise UsageError(
                    f"--provider {raw!r}: a provider named {member!r} is already given; "
                    f"name this one, e.g. --provider {name}2={name}"
                )
            specs.append(ProviderSpec(member, name))
            continue
        key, eq, value = raw.partition("=")
        if not eq or not key.strip():
            raise UsageError(f"--provider-opt {raw!r}: expected KEY=VALUE")
        member, dot, key = key.strip().rpartition(".")
        if dot:
            pending.append((member, key, value))
        elif not specs:
            raise UsageError(f"--provider-opt {raw!r} comes before any --provider; put it after its provider")
        else:
            specs[-1].options.append((key, value))
    for member, key, value in pending:
        spec = next((s for s in specs if s.member == member), None)
        if spec is None:
            raise UsageError(f"--provider-opt {member}.{key}=...: no provider named {member!r} is given")
        spec.options.append((key, value))
    return specs


def resolve(reg: ProviderRegistry, name: str) -> Callable[..., Any]:
    """The factory of the installed provider ``name``; an unknown one suggests the closest name."""
    if name in reg:
        return reg.info(name).factory
    installed = reg.names()
    close = difflib.get_close_matches(name, installed, n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    broken = (
        f" ({len(reg.load_errors)} plugin(s) failed to load: see `mcr providers`)" if reg.load_errors else ""
    )
    listed = ", ".join(installed) or "none"
    raise UsageError(f"no provider named {name!r} is installed{hint} (installed: {listed}){broken}")


_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}
_COLLECTIONS = {
    list,
    tuple,
    set,
    frozenset,
    collections.abc.Iterable,
    collections.abc.Sequence,
    collections.abc.Collection,
    collections.abc.Set,
    collections.abc.MutableSequence,
}


def _annotations(factory: Callable[..., Any]) -> tuple[inspect.Signature, dict[str, Any]]:
    """The factory's signature and each parameter's annotation, evaluated where possible."""
    target = factory.__init__ if isinstance(factory, type) else factory  # type: ignore[misc]  # mypy refuses __init__ read off an instance of type
    sig = inspect.signature(factory)
    module = sys.modules.get(getattr(target, "__module__", "") or "")
    scope = {**vars(typing), **(vars(module) if module is not None else {})}
    hints: dict[str, Any] = {}
    for name, param in sig.parameters.items():
        ann = param.annotation
        if isinstance(ann, str):
            try:
                # The factory's own annotation, evaluated in its module as typing.get_type_hints would.
                ann = eval(ann, scope)
            except Exception:  # noqa: BLE001 -- a name only imported for type checking: not settable
                ann = None
        hints[name] = ann
    return sig, hints


def _scalar(tp: Any, value: str) -> Any:
    """``value`` as ``tp``; ``ValueError`` with what was expected, ``TypeError`` when not settable."""
    if tp is Any or tp is inspect.Parameter.empty or tp is str:
        return value
    if tp is Path:
        return Path(value)
    if tp is os.PathLike or typing.get_origin(tp) is os.PathLike:
        return value
    if tp is bool:
        low = value.strip().lower()
        if low in _TRUE or low in _FALSE:
            return low in _TRUE
        raise ValueError("expected true or false")
    if tp is int:
        try:
            return int(value)
        except ValueError:
            raise ValueError("expected an integer") from None
    if tp is float:
        try:
            return float(value)
        except ValueError:
            raise ValueError("expected a number") from None
    if typing.get_origin(tp) is typing.Literal:
        choices = typing.get_args(tp)
        if value in choices:
            return value
        raise ValueError(f"expected one of {', '.join(map(str, choices))}")
    raise TypeError(tp)


def _arms(tp: Any) -> list[Any]:
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        return [a for a in typing.get_args(tp) if a is not type(None)]
    return [tp]


def _one(tp: Any, value: str) -> Any:
    """``value`` as one of the arms of ``tp``; a text arm takes it as it is (``str | Mapping``)."""
    arms = sorted(_arms(tp), key=lambda a: a is not str and a is not Any)
    problem: ValueError | None = None
    for arm in arms:
        try:
            return _scalar(arm, value)
        except ValueError as exc:
            problem = problem or exc
        except TypeError:
            continue
    if problem is not None:
        raise problem
    raise TypeError(tp)


def _convert(tp: Any, values: list[str]) -> Any:
    for arm in _arms(tp):  # a collection takes every repetition of the key
        origin = typing.get_origin(arm) or arm
        if origin in _COLLECTIONS:
            args = typing.get_args(arm)
            items = [_one(args[0] if args else str, v) for v in values]
            return origin(items) if origin in (list, tuple, set, frozenset) else items
    if len(values) > 1:
        raise ValueError("given more than once, but it takes one value")
    return _one(tp, values[0])


def _type_name(tp: Any) -> str:
    if tp is None:
        return "a type that cannot be imported here"
    return str(tp).replace("typing.", "") if not isinstance(tp, type) else tp.__name__


def build_options(spec: ProviderSpec, factory: Callable[..., Any]) -> dict[str, Any]:
    """``spec``'s options as keyword arguments of ``factory``; :class:`UsageError` names a bad one."""
    sig, hints = _annotations(factory)
    settable = {
        n: p
        for n, p in sig.parameters.items()
        if p.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    }
    free = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in sig.parameters.values())
    where = f"provider {spec.name!r}" + (f" (as {spec.member!r})" if spec.member != spec.name else "")
    grouped: dict[str, list[str]] = {}
    for key, value in spec.options:
        grouped.setdefault(key, []).append(value)
    kwargs: dict[str, Any] = {}
    for key, values in grouped.items():
        if key not in settable:
            if free:
                kwargs[key] = values[0] if len(values) == 1 else values
                continue
            close = difflib.get_close_matches(key, list(settable), n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise UsageError(
                f"{where} has no option {key!r}{hint} (its options: {', '.join(settable) or 'none'})"
            )
        tp = hints.get(key)
        try:
            kwargs[key] = _convert(tp, values)
        except ValueError as exc:
            raise UsageError(f"option {key}={values[-1]!r} of {where}: {exc}") from None
        except TypeError:
            raise UsageError(
                f"option {key!r} of {where} takes {_type_name(tp)}, which cannot be given on the command line"
            ) from None
    return kwargs


def missing_options(factory: Callable[..., Any], given: dict[str, Any]) -> list[str]:
    """The parameters of ``factory`` that have no default and are not in ``given``."""
    sig = inspect.signature(factory)
    return [
        n
        for n, p in sig.parameters.items()
        if p.default is inspect.Parameter.empty
        and p.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
        and n not in given
    ]


def accepts(factory: Callable[..., Any], name: str) -> bool:
    """Whether ``factory`` takes a keyword argument ``name``."""
    params = inspect.signature(factory).parameters
    p = params.get(name)
    return p is not None and p.kind is not inspect.Parameter.POSITIONAL_ONLY
