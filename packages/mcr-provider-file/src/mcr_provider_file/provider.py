"""The file provider: every context of every kubeconfig file found is a cluster.

Clusters are named ``"<absolute file path><separator><context>"`` (separator ``+`` by default).
The provider watches the directories of its sources for changes (``watchfiles``: inotify on Linux)
and re-scans when one is noticed, with a safety re-scan every ``resync_interval`` seconds; where
notifications cannot be had (a source's directory does not exist, the system refuses a watch,
``watch=False``) it polls every ``poll_interval`` seconds instead. A scan re-reads a file only when its
modification time, size, inode or change time differ, and re-engages its clusters only when the
content hash and then a context's connection settings differ. File reads and parsing run in a
worker thread, never on the event loop.

A file that cannot be read or parsed, and a file or directory given by name that does not exist
(a typo, or one that appears later), is reported (logged once per new reason, and listed by
:meth:`FileProvider.problems`) and affects no other file; the clusters it had before keep running
until it is readable again or removed, so an editor's half-written save does not flap them. A
context that refers to an undefined cluster or user is reported the same way and is not engaged.
"""

from __future__ import annotations

import asyncio
import glob as globlib
import hashlib
import logging
import os
import stat
import warnings
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mcr.errors import ClusterNotFoundError, ConfigError
from mcr.providers import Clusters, cancel_and_wait
from mcr.rest.config import RestConfig
from mcr_provider_file._kubeconfig import ContextSpec, KubeconfigProblem, split_contexts
from mcr_provider_file._watch import Notifier, Root

if TYPE_CHECKING:
    from mcr.cluster import Cluster
    from mcr.multicluster import Aware, ClusterName

__all__ = ["DEFAULT_GLOBS", "FileProvider", "Problem"]

log = logging.getLogger("mcr.providers.file")

DEFAULT_POLL_INTERVAL = 2.0
"""Seconds between scans when the provider polls (``poll_interval``'s default)."""

DEFAULT_GLOBS: tuple[str, ...] = (
    "kubeconfig.yaml",
    "kubeconfig.yml",
    "*.kubeconfig",
    "*.kubeconfig.yaml",
    "*.kubeconfig.yml",
)
"""File name patterns matched inside each directory (upstream multicluster-runtime's defaults)."""

ClusterFactory = Callable[["RestConfig", str], "Cluster"]
"""``factory(config, cluster_name)`` → a cluster, not started (default: ``Cluster(config, name=...)``)."""


@dataclass(frozen=True)
class Problem:
    """Why a file (``context=None``) or one of its contexts yields no cluster right now."""

    path: str
    context: str | None
    reason: str

    def __str__(self) -> str:
        where = f"kubeconfig {self.path}" + (f", context {self.context!r}" if self.context else "")
        return f"{where}: {self.reason}"


@dataclass(frozen=True)
class _Context:
    spec: ContextSpec
    config: RestConfig


@dataclass
class _FileState:
    stat_key: tuple[int, int, int, int]
    digest: str | None = None
    specs: list[_Context] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)


def _stat_key(st: os.stat_result) -> tuple[int, int, int, int]:
    return (st.st_mtime_ns, st.st_ctime_ns, st.st_size, st.st_ino)


class FileProvider:
    """Clusters from kubeconfig files, directories and globs.

    ``kubeconfigs``: files (entries with ``*``, ``?`` or ``[`` are expanded as path globs);
    ``directories``: directories whose files matching ``globs`` are read (not recursively). When
    neither is given: the paths in ``$KUBECONFIG`` (split on ``os.pathsep``), else ``~/.kube/config``
    if it exists, else the current directory. A named file or directory that does not exist is
    reported in :meth:`problems` (and logged once) and used as soon as it appears.
    ``cluster_options`` are passed to :class:`mcr.cluster.Cluster` with each context's
    :class:`~mcr.rest.config.RestConfig`; ``cluster_factory`` replaces that call altogether.

    ``watch`` (default true): follow changes through file-system notifications, re-scanning every
    ``resync_interval`` seconds (60) as a safety net; ``poll_interval`` (2 s) is the polling period
    used when notifications are off or unavailable, and while a source's directory does not exist.
    ``interval`` is the former name of ``poll_interval`` (the kind provider's name for the same
    period): accepted with a :class:`DeprecationWarning` for one release; giving both is a
    :class:`TypeError`.

    The provider starts each cluster before engaging it and stops it after the disengagement.
    Constructed directly or through ``mcr.providers.create("file", ...)``.
    """

    def __init__(
        self,
        kubeconfigs: Iterable[str | os.PathLike[str]] = (),
        directories: Iterable[str | os.PathLike[str]] = (),
        globs: Iterable[str] = DEFAULT_GLOBS,
        *,
        separator: str = "+",
        poll_interval: float | None = None,
        cluster_options: Mapping[str, Any] | None = None,
        cluster_factory: ClusterFactory | None = None,
        watch: bool = True,
        resync_interval: float = 60.0,
        interval: float | None = None,
    ) -> None:
        if interval is not None:
            if poll_interval is not None:
                raise TypeError("FileProvider: give poll_interval, not both it and interval")
            warnings.warn(
                "FileProvider(interval=...) is deprecated; use poll_interval=...",
                DeprecationWarning,
                stacklevel=2,
            )
            poll_interval = interval
        if poll_interval is None:
            poll_interval = DEFAULT_POLL_INTERVAL
        if poll_interval <= 0:
            raise ValueError(f"poll_interval must be positive, got {poll_interval!r}")
        if resync_interval <= 0:
            raise ValueError(f"resync_interval must be positive, got {resync_interval!r}")
        if not separator:
            raise ValueError("separator must not be empty")
        files = [os.fspath(p) for p in kubeconfigs]
        dirs = [os.fspath(p) for p in directories]
        if not files and not dirs:
            files, dirs = _defaults()
        self.kubeconfigs = [os.path.abspath(os.path.expanduser(p)) for p in files]
        self.directories = [os.path.abspath(os.path.expanduser(p)) for p in dirs]
        self.globs = list(globs)
        self.separator = separator
        self.poll_interval = poll_interval
        self.watch = watch
        self.resync_interval = resync_interval
        self._cluster_options = dict(cluster_options or {})
        self._factory = cluster_factory or self._new_cluster
        self._clusters = Clusters()
        self._files: dict[str, _FileState] = {}
        self._missing: list[Problem] = []  # named files and directories that do not exist
        self._roots: list[Root] = []  # directories whose changes matter
        self._unwatched = False  # some source's directory does not exist: changes there need polling
        self._notifier: Notifier | None = None
        self._fingerprints: dict[str, str] = {}  # cluster name -> fingerprint of what it was built from
        # cluster name -> (fingerprint, why no cluster could be built from those settings)
        self._build_problems: dict[str, tuple[str, Problem]] = {}
        self._reported: set[Problem] = set()
        self._refresh_lock = asyncio.Lock()

    @property
    def interval(self) -> float:
        """Deprecated name of :attr:`poll_interval` (kept for one release)."""
        return self.poll_interval

    # -- Provider ---------------------------------------------------------------------------------

    async def get(self, name: ClusterName) -> Cluster:
        """The cluster ``name`` (``"<path>+<context>"``); :class:`~mcr.ClusterNotFoundError` otherwise."""
        try:
            return await self._clusters.get(name)
        except ClusterNotFoundError:
            raise ClusterNotFoundError(
                name, f"cluster {name!r} not found among the file provider's kubeconfig contexts"
            ) from None

    async def index_field(self, kind: Any, field: str, extract: Callable[[Any], list[str]]) -> None:
        """Index ``field`` on every current and future cluster."""
        await self._clusters.index_field(kind, field, extract)

    async def start(self, aware: Aware) -> None:
        """Load the files, engage their clusters with ``aware`` and follow changes until cancelled.

        Cancelling stops watching (and polling) and disengages (and stops) every cluster. An error
        in one scan is logged and the next scan runs as usual.
        """
        await self.refresh()
        follower = asyncio.create_task(self._follow(), name="mcr-file-provider-follow")
        try:
            await self._clusters.run(aware)
        finally:
            await cancel_and_wait([follower])

    @property
    def watching(self) -> bool:
        """Whether changes are currently noticed through file-system notifications (else polled)."""
        return self._notifier is not None and self._notifier.active

    # -- inspection -------------------------------------------------------------------------------

    def names(self) -> list[str]:
        """The names of the current clusters, sorted."""
        return self._clusters.names()

    def problems(self) -> list[Problem]:
        """Why some files or contexts yield no cluster at the last scan (empty when all are fine)."""
        found = [p for state in self._files.values() for p in state.problems]
        found.extend(self._missing)
        found.extend(problem for _, problem in self._build_problems.values())
        return sorted(set(found), key=lambda p: (p.path, p.context or "", p.reason))

    def cluster_name(self, path: str | os.PathLike[str], context: str) -> str:
        """The name this provider gives ``context`` of the kubeconfig at ``path``."""
        return f"{os.path.abspath(os.fspath(path))}{self.separator}{context}"

    # -- scanning ---------------------------------------------------------------------------------

    async def refresh(self) -> None:
        """Scan the sources now and engage, re-engage or disengage clusters to match them.

        Concurrent calls run one after the other. Polling calls this every ``poll_interval`` seconds.
        """
        async with self._refresh_lock:
            previous = self._files
            self._files, self._missing, self._roots, self._unwatched = await asyncio.to_thread(
                self._scan_all, previous
            )
            await self._apply()
            self._report()

    async def _follow(self) -> None:
        """Re-scan when a watched directory changes, on the resync period, or by polling."""
        notifier = self._notifier = Notifier(enabled=self.watch)
        watched: frozenset[Root] | None = None
        try:
            while True:
                roots = frozenset(self._roots)
                active = await notifier.watch(roots)
                # A change made while new directories are being taken into the watch (between the
                # scan that found them and the watcher holding them) raises no notification: look
                # again one polling period later. A source whose directory does not exist cannot
                # be watched: poll until it appears.
                rearmed, watched = roots != watched, roots
                poll = not active or self._unwatched or rearmed
                delay = self.poll_interval if poll else self.resync_interval
                try:
                    async with asyncio.timeout(delay):
                        await notifier.changed.wait()
                except TimeoutError:
                    pass
                notifier.changed.clear()
                try:
                    await self.refresh()
                except Exception:
                    log.exception(
                        "file provider: scanning kubeconfig sources failed; retrying in %ss",
                        self.poll_interval,
                    )
                    await asyncio.sleep(self.poll_interval)
        finally:
            self._notifier = None
            await notifier.close()

    def _scan_all(
        self, previous: dict[str, _FileState]
    ) -> tuple[dict[str, _FileState], list[Problem], list[Root], bool]:
        """The files' states, the named sources that are missing, the directories to watch, and
        whether some source's directory is missing (so only polling notices it appearing).

        Runs in a worker thread.
        """
        missing: list[Problem] = []
        roots: dict[str, bool] = {}
        unwatched = False

        def watch(directory: str, recursive: bool) -> bool:
            if not os.path.isdir(directory):
                return False
            roots[directory] = roots.get(directory, False) or recursive
            return True

        for entry in self.kubeconfigs:
            if globlib.has_magic(entry):
                base, recursive = _glob_base(entry)
                if not watch(base, recursive):
                    unwatched = True
                    missing.append(Problem(base, None, f"directory does not exist (from the glob {entry})"))
            elif not watch(os.path.dirname(entry), False):
                unwatched = True
                missing.append(Problem(entry, None, "file does not exist, nor does its directory"))
            elif not os.path.lexists(entry):
                missing.append(Problem(entry, None, "file does not exist (yet)"))
        for directory in self.directories:
            if not watch(directory, False):
                unwatched = True
                missing.append(Problem(directory, None, "directory does not exist (yet)"))
        return self._scan(previous), missing, sorted(roots.items()), unwatched

    def _candidates(self) -> list[str]:
        """The kubeconfig paths to read, de-duplicated, in a stable order. Runs in a worker thread."""
        paths: list[str] = []
        for entry in self.kubeconfigs:
            if globlib.has_magic(entry):
                paths.extend(sorted(p for p in globlib.glob(entry) if os.path.isfile(p)))
            elif os.path.exists(entry):
                paths.append(entry)  # named explicitly: reported if it is not a readable file
        for directory in self.directories:
            if not os.path.isdir(directory):
                continue
            matched: set[str] = set()
            for pattern in self.globs:
                matched.update(p for p in globlib.glob(os.path.join(globlib.escape(directory), pattern)))
            paths.extend(sorted(p for p in matched if os.path.isfile(p)))
        return list(dict.fromkeys(os.path.abspath(p) for p in paths))

    def _scan(self, previous: dict[str, _FileState]) -> dict[str, _FileState]:
        """Read what changed since ``previous``. Runs in a worker thread; never raises for one file."""
        states: dict[str, _FileState] = {}
        for path in self._candidates():
            try:
                st = os.stat(path)
            except OSError:
                continue  # vanished between listing and stat: gone, like a removed file
            key = _stat_key(st)
            old = previous.get(path)
            if old is not None and old.stat_key == key:
                states[path] = old
                continue
            if not stat.S_ISREG(st.st_mode):
                # Never open it: reading a FIFO would block forever.
                states[path] = self._failed(path, key, old, "is not a regular file")
                continue
            states[path] = self._read(path, key, old)
        return states

    def _read(self, path: str, key: tuple[int, int, int, int], old: _FileState | None) -> _FileState:
        try:
            data = Path(path).read_bytes()
        except OSError as exc:
            reason = f"cannot be read: {exc.strerror or type(exc).__name__}"
            return self._failed(path, key, old, reason)
        digest = hashlib.sha256(data).hexdigest()
        if old is not None and old.digest == digest:
            return _FileState(key, digest, old.specs, old.problems)
        try:
            specs, context_problems = split_contexts(data, path)
        except KubeconfigProblem as exc:
            return self._failed(path, key, old, exc.reason, digest)
        problems = [Problem(path, p.context, p.reason) for p in context_problems]
        contexts: list[_Context] = []
        for spec in specs:
            # Loading may read certificate files and parses PEM: done here, off the event loop.
            try:
                config = RestConfig.from_kubeconfig(spec.kubeconfig, context=spec.context)
            except ConfigError as exc:
                where = f"field {exc.field!r}: " if exc.field else ""
                problems.append(Problem(path, spec.context, f"{where}{exc.detail}"))
                continue
            contexts.append(_Context(spec, config.copy(source=path)))
        return _FileState(key, digest, contexts, problems)

    @staticmethod
    def _failed(
        path: str,
        key: tuple[int, int, int, int],
        old: _FileState | None,
        reason: str,
        digest: str | None = None,
    ) -> _FileState:
        # Keep the last good contexts: a half-written or briefly unreadable file must not flap them.
        kept = old.specs if old is not None else []
        return _FileState(key, digest, kept, [Problem(path, None, reason)])

    # -- reconciling clusters with the files ----------------------------------------------------

    async def _apply(self) -> None:
        desired: dict[str, tuple[str, _Context]] = {}
        for path, state in self._files.items():
            for ctx in state.specs:
                desired[self.cluster_name(path, ctx.spec.context)] = (path, ctx)
        for name in [n for n in self._clusters.names() if n not in desired]:
            log.info("file provider: cluster %r is gone; disengaging it", name)
            self._fingerprints.pop(name, None)
            await self._clusters.remove(name)
        for name in [n for n in self._build_problems if n not in desired]:
            del self._build_problems[name]
        for name, (path, ctx) in desired.items():
            spec = ctx.spec
            if self._fingerprints.get(name) == spec.fingerprint and name in self._clusters:
                continue
            failed = self._build_problems.get(name)
            if failed is not None and failed[0] == spec.fingerprint:
                continue  # already failed to build from exactly these settings
            try:
                cluster = self._factory(ctx.config, name)
            except Exception as exc:  # noqa: BLE001 -- reported as a problem of this context only
                self._build_problems[name] = (spec.fingerprint, Problem(path, spec.context, str(exc)))
                if name in self._clusters:
                    # The new settings are unusable: the old cluster no longer matches the file.
                    self._fingerprints.pop(name, None)
                    await self._clusters.remove(name)
                continue
            self._build_problems.pop(name, None)
            replaced = name in self._clusters
            await self._clusters.add_or_replace(name, cluster)
            self._fingerprints[name] = spec.fingerprint
            log.info("file provider: %s cluster %r", "re-engaging" if replaced else "engaging", name)

    def _report(self) -> None:
        current = set(self.problems())
        for problem in sorted(current - self._reported, key=str):
            log.warning("file provider: %s", problem)
        for problem in sorted(self._reported - current, key=str):
            log.info("file provider: resolved: %s", problem)
        self._reported = current

    def _new_cluster(self, config: RestConfig, name: str) -> Cluster:
        from mcr.cluster import Cluster

        return Cluster(config, name=name, **self._cluster_options)


def _glob_base(pattern: str) -> tuple[str, bool]:
    """The directory a path glob starts in, and whether its magic reaches into subdirectories."""
    parts = pattern.split(os.sep)
    first = next(i for i, part in enumerate(parts) if globlib.has_magic(part))
    base = os.sep.join(parts[:first]) or os.sep
    return base, first < len(parts) - 1


def _defaults() -> tuple[list[str], list[str]]:
    """Upstream's defaults: ``$KUBECONFIG``, else ``~/.kube/config`` if present, else the cwd."""
    env = os.environ.get("KUBECONFIG", "")
    files = [p for p in env.split(os.pathsep) if p]
    if files:
        return files, []
    home = os.path.expanduser("~/.kube/config")
    if os.path.isfile(home):
        return [home], []
    return [], [os.getcwd()]
