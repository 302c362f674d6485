"""A griffe extension for the API reference: docstrings written with Sphinx roles render as links.

mcr's docstrings name other objects with roles (``:class:`~mcr.cluster.Cluster```,
``:meth:`start```). mkdocstrings renders docstrings as Markdown, where a role would show as raw
text; this extension rewrites each role, once the package is loaded, into an optional cross-reference:
a link when the page set documents the target, plain code otherwise. Relative names resolve in the
scope of the object whose docstring holds them.
"""

from __future__ import annotations

import html
import re
from typing import Any

import griffe

ROLE = re.compile(
    r":(?:py:)?(?:class|meth|func|attr|data|mod|exc|obj|const|type):`(~?)([^`<>]+?)(?:\s*<([^`>]+)>)?`"
)


def _target(obj: griffe.Object, name: str) -> str:
    name = name.strip().removesuffix("()")
    if name.startswith("."):
        name = name.lstrip(".")
    try:
        return obj.resolve(name) if "." not in name else _resolve_dotted(obj, name)
    except (griffe.NameResolutionError, KeyError, AttributeError):
        return name


def _resolve_dotted(obj: griffe.Object, name: str) -> str:
    head, _, rest = name.partition(".")
    try:
        base = obj.resolve(head)
    except griffe.NameResolutionError:
        return name
    return f"{base}.{rest}"


def rewrite(text: str, obj: griffe.Object | None = None) -> str:
    """``text`` with every Sphinx role replaced by an optional autorefs cross-reference."""

    def replace(match: re.Match[str]) -> str:
        tilde, shown, explicit = match.group(1), match.group(2).strip(), match.group(3)
        identifier = explicit.strip() if explicit else shown
        title = identifier.rsplit(".", 1)[-1] if tilde and not explicit else shown
        full = _target(obj, identifier) if obj is not None else identifier.lstrip(".")
        return (
            f'<autoref identifier="{html.escape(full)}" optional><code>{html.escape(title)}</code></autoref>'
        )

    return ROLE.sub(replace, text)


class SphinxRoles(griffe.Extension):
    """Rewrites the roles of every docstring of a loaded package (see the module docstring)."""

    def on_package(self, *, pkg: griffe.Module, **kwargs: Any) -> None:
        seen: set[int] = set()
        stack: list[griffe.Object] = [pkg]
        while stack:
            obj = stack.pop()
            if id(obj) in seen:
                continue
            seen.add(id(obj))
            if obj.docstring is not None and ":" in obj.docstring.value:
                obj.docstring.value = rewrite(obj.docstring.value, obj)
            stack.extend(m for m in obj.members.values() if not m.is_alias)
