"""The provider registry: provider names mapped to factories, filled by plugins."""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from mcr.errors import MCRError

__all__ = ["ProviderInfo", "ProviderRegistry", "UnknownProviderError"]

ProviderFactory = Callable[..., Any]


class UnknownProviderError(MCRError, LookupError):
    """No installed plugin registers a provider of that name.

    The message suggests the closest installed name and lists the ones that exist.
    """

    def __init__(self, name: str, available: list[str], load_errors: list[str] | None = None) -> None:
        self.name = name
        self.available = available
        self.load_errors = list(load_errors or [])
        listed = ", ".join(available) if available else "none"
        broken = "".join(f"; {e}" for e in self.load_errors)
        # The closest installed name, never an install command for the name as typed: a typo
        # would send the reader to a package anyone could have registered under that name.
        close = difflib.get_close_matches(name, available, n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        super().__init__(f"no provider named {name!r} is installed{hint} (available: {listed}){broken}")


@dataclass(frozen=True)
class ProviderInfo:
    """One registered provider: its name, factory, description and where it comes from."""

    name: str
    factory: ProviderFactory
    description: str
    plugin: str
    distribution: str
    version: str


class ProviderRegistry:
    """Provider factories by name.

    Registering a name twice raises ``ValueError`` naming both registrants. :meth:`create` calls the
    factory with the given options; unknown names raise :class:`UnknownProviderError`.
    """

    def __init__(self) -> None:
        self._infos: dict[str, ProviderInfo] = {}
        self.load_errors: list[str] = []
        """Plugins that failed to load, as messages naming the entry point and distribution."""

    def add(self, info: ProviderInfo) -> None:
        """Register ``info``; ``ValueError`` if its name is already registered."""
        old = self._infos.get(info.name)
        if old is not None:
            raise ValueError(
                f"provider {info.name!r} is registered twice: by {old.plugin} ({old.distribution}) "
                f"and by {info.plugin} ({info.distribution})"
            )
        self._infos[info.name] = info

    def names(self) -> list[str]:
        """The registered names, sorted."""
        return sorted(self._infos)

    def __iter__(self) -> Iterator[ProviderInfo]:
        return iter([self._infos[n] for n in self.names()])

    def __contains__(self, name: object) -> bool:
        return name in self._infos

    def __len__(self) -> int:
        return len(self._infos)

    def info(self, name: str) -> ProviderInfo:
        """The registration of ``name``; :class:`UnknownProviderError` if there is none."""
        try:
            return self._infos[name]
        except KeyError:
            raise UnknownProviderError(name, self.names(), self.load_errors) from None

    def create(self, name: str, /, **options: Any) -> Any:
        """A new provider of type ``name`` built from ``options`` (passed to its factory)."""
        return self.info(name).factory(**options)
