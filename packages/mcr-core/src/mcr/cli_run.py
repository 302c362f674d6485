"""``mcr run APP``: import a program's controllers and run them in a Manager built from flags.

``APP`` is a file (``app.py``) or an importable module (``pkg.module``, found from the current
directory as ``python -m`` would). It defines ``setup(mgr)``, plain or ``async``, which adds its
controllers and runnables to the :class:`~mcr.manager.Manager`; the command then runs the manager
until SIGTERM or SIGINT and exits 0. Every flag can also be given as an environment variable
``MCR_<FLAG>`` (``--leader-elect`` → ``MCR_LEADER_ELECT=true``); a flag on the command line wins.
Repeatable flags take a whitespace-separated list from their variable (quoted as in a shell).

Exit status: 0 after a signalled stop; 1 when the app or the manager fails while running; 2 for bad
input (flags, providers and their options, kubeconfig, a missing module or ``setup``), reported
on one line naming what is wrong. See docs/run.md.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import importlib.util
import inspect
import logging
import os
import shlex
import sys
import traceback
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, TextIO

from mcr.cli_providers import (
    ProviderSpec,
    UsageError,
    accepts,
    build_options,
    missing_options,
    parse_specs,
    resolve,
)

__all__ = ["ProviderItem", "add_run_parser", "load_app", "run_command"]

log = logging.getLogger("mcr.run")

DEFAULT_DEV_CLUSTERS = 2


class ProviderItem(argparse.Action):
    """Keeps ``--provider`` and ``--provider-opt`` in one list (``provider_items``), in command-line
    order; ``mcr run`` and ``mcr manifests`` read it with the same rules."""

    def __call__(
        self, parser: argparse.ArgumentParser, ns: argparse.Namespace, value: Any, opt: str | None = None
    ) -> None:
        items = list(getattr(ns, "provider_items", None) or [])
        items.append(("provider" if self.dest == "provider" else "opt", str(value)))
        ns.provider_items = items


@dataclass(frozen=True)
class _Flag:
    name: str
    kind: str  # str | float | int | bool | list
    default: Any
    help: str
    choices: tuple[str, ...] = ()

    @property
    def dest(self) -> str:
        return self.name.replace("-", "_")

    @property
    def env(self) -> str:
        return "MCR_" + self.name.upper().replace("-", "_")


FLAGS = [
    _Flag(
        "kubeconfig",
        "str",
        None,
        "kubeconfig of the local cluster (default: $KUBECONFIG, ~/.kube/config, in-cluster)",
    ),
    _Flag("context", "str", None, "context of the kubeconfig (default: its current context)"),
    _Flag("namespace", "list", [], "cache only this namespace (repeatable; default: all)"),
    _Flag("leader-elect", "bool", False, "run the controllers only while holding the leader Lease"),
    _Flag("leader-election-id", "str", None, "name of the leader Lease (required with --leader-elect)"),
    _Flag(
        "leader-election-namespace",
        "str",
        None,
        "namespace of the leader Lease (default: the pod's, else default)",
    ),
    _Flag("shard", "bool", False, "spread the clusters over the replicas (the sharded coordinator)"),
    _Flag("shard-namespace", "str", "default", "namespace of the sharding Leases"),
    _Flag("shard-lease-duration", "float", 15.0, "seconds a cluster's fence Lease lasts"),
    _Flag(
        "shard-renew-deadline",
        "float",
        None,
        "seconds after the last renewal by which an owner stops (default 2/3 of the lease duration)",
    ),
    _Flag("shard-renew-period", "float", 5.0, "seconds between renewals of the fence Leases"),
    _Flag("shard-retry-period", "float", 2.0, "seconds between attempts to claim a cluster"),
    _Flag("shard-weight", "float", 1.0, "this replica's share of the clusters, relative to the others'"),
    _Flag("metrics-bind-address", "str", ":8080", 'address of /metrics ("0" disables it)'),
    _Flag(
        "metrics-secure",
        "bool",
        False,
        "serve /metrics over HTTPS to callers the local cluster authenticates and authorizes",
    ),
    _Flag("metrics-cert-path", "str", None, "directory of /metrics' serving certificate and key"),
    _Flag("metrics-cert-name", "str", "tls.crt", "certificate file in --metrics-cert-path"),
    _Flag("metrics-cert-key", "str", "tls.key", "key file in --metrics-cert-path"),
    _Flag("health-probe-bind-address", "str", ":8081", 'address of /healthz and /readyz ("0" disables them)'),
    _Flag("graceful-shutdown-timeout", "float", 30.0, "seconds the stop waits for in-flight work"),
    _Flag("log-level", "str", "info", "log level", ("debug", "info", "warning", "error")),
    _Flag("log-format", "str", "kv", "log format", ("kv", "json")),
    _Flag("loop", "str", "asyncio", "event loop", ("asyncio", "uvloop")),
    _Flag("dev", "bool", False, "run against a local mcr-envtest fleet started for the run"),
    _Flag("dev-clusters", "int", DEFAULT_DEV_CLUSTERS, "clusters of the --dev fleet"),
]


def add_run_parser(sub: Any) -> None:
    """Add the ``run`` subcommand to the subparsers ``sub`` of the ``mcr`` parser."""
    run = sub.add_parser(
        "run",
        help="run the controllers of a module in a manager configured by flags",
        description="Import APP (a file or module defining setup(mgr)) and run its controllers "
        "until SIGTERM. Every flag is also an environment variable MCR_<FLAG>.",
    )
    run.add_argument("app", metavar="APP", help="app.py or pkg.module; defines setup(mgr)")
    run.add_argument(
        "--provider",
        action=ProviderItem,
        metavar="[MEMBER=]NAME",
        help="an installed provider (repeatable; two or more are composed, clusters named MEMBER#cluster)"
        " [$MCR_PROVIDER]",
    )
    run.add_argument(
        "--provider-opt",
        action=ProviderItem,
        metavar="KEY=VALUE",
        help="a parameter of the provider named just before, or MEMBER.KEY=VALUE (repeatable)"
        " [$MCR_PROVIDER_OPT]",
    )
    for flag in FLAGS:
        shown = "" if flag.default in (None, [], False) else f"; default {flag.default}"
        kwargs: dict[str, Any] = {
            "dest": flag.dest,
            "default": None,
            "help": f"{flag.help} [${flag.env}{shown}]",
        }
        if flag.kind == "bool":
            kwargs["action"] = "store_const"
            kwargs["const"] = True
        elif flag.kind == "list":
            kwargs["action"] = "append"
        else:
            kwargs["type"] = {"float": float, "int": int}.get(flag.kind, str)
            if flag.choices:
                kwargs["choices"] = flag.choices
        run.add_argument(f"--{flag.name}", **kwargs)
    run.set_defaults(func=run_command)


def _from_env(flag: _Flag, raw: str) -> Any:
    where = f"${flag.env}={raw!r}"
    if flag.kind == "bool":
        low = raw.strip().lower()
        if low in ("1", "true", "yes", "on"):
            return True
        if low in ("", "0", "false", "no", "off"):
            return False
        raise UsageError(f"{where}: expected true or false")
    if flag.kind == "list":
        return shlex.split(raw)
    if flag.kind in ("float", "int"):
        try:
            return float(raw) if flag.kind == "float" else int(raw)
        except ValueError:
            raise UsageError(f"{where}: expected a number") from None
    if flag.choices and raw not in flag.choices:
        raise UsageError(f"{where}: expected one of {', '.join(flag.choices)}")
    return raw


def _settings(args: argparse.Namespace) -> tuple[dict[str, Any], list[ProviderSpec]]:
    """The flags' values (command line, else environment, else default) and the provider specs."""
    values: dict[str, Any] = {}
    for flag in FLAGS:
        value = getattr(args, flag.dest, None)
        if value is None and flag.env in os.environ:
            value = _from_env(flag, os.environ[flag.env])
        values[flag.dest] = flag.default if value is None else value
    items: list[tuple[str, str]] = list(getattr(args, "provider_items", None) or [])
    if not items:
        items = [("provider", p) for p in shlex.split(os.environ.get("MCR_PROVIDER", ""))]
        items += [("opt", o) for o in shlex.split(os.environ.get("MCR_PROVIDER_OPT", ""))]
    if values["loop"] == "uvloop" and importlib.util.find_spec("uvloop") is None:
        raise UsageError("--loop uvloop needs uvloop, which is not installed: pip install 'mcr-core[uvloop]'")
    if values["leader_elect"] and not values["leader_election_id"]:
        raise UsageError("--leader-elect needs --leader-election-id (the name of the Lease)")
    local = not values["dev"] or values["kubeconfig"] or values["context"]
    if not local and (values["leader_elect"] or values["shard"]):
        raise UsageError("--leader-elect and --shard need a local cluster: pass --kubeconfig with --dev")
    if values["metrics_cert_path"] and not values["metrics_secure"]:
        raise UsageError("--metrics-cert-path is set but --metrics-secure is not")
    if values["metrics_secure"] and not values["metrics_cert_path"]:
        raise UsageError("--metrics-secure needs --metrics-cert-path (a directory with tls.crt and tls.key)")
    if values["metrics_secure"] and not local:
        raise UsageError(
            "--metrics-secure authenticates scrapers through the local cluster: pass --kubeconfig with --dev"
        )
    if values["dev_clusters"] < 1:
        raise UsageError(f"--dev-clusters must be at least 1, not {values['dev_clusters']}")
    return values, parse_specs(items)


def load_app(target: str) -> ModuleType:
    """Import ``target`` (a ``.py`` file or a module name); :class:`UsageError` if it is not there."""
    if target.endswith(".py") or os.sep in target:
        path = Path(target)
        if not path.is_file():
            raise UsageError(f"{target}: no such file")
        sys.path.insert(0, str(path.resolve().parent))
        spec = importlib.util.spec_from_file_location(path.stem, path)
        if spec is None or spec.loader is None:
            raise UsageError(f"{target}: not a Python module")
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
        return module
    sys.path.insert(0, os.getcwd())
    try:
        return importlib.import_module(target)
    except ModuleNotFoundError as exc:
        if exc.name and (target == exc.name or target.startswith(f"{exc.name}.")):
            raise UsageError(f"cannot import {target!r}: no module named {exc.name!r}") from None
        raise


def _setup_of(module: ModuleType, target: str) -> Any:
    setup = getattr(module, "setup", None)
    if not callable(setup):
        raise UsageError(f"{target} defines no setup(mgr) function (mcr run calls it with the Manager)")
    return setup


async def _run(
    values: dict[str, Any], planned: list[_Planned], setup: Any, plugins: Iterable[object]
) -> None:
    from mcr.rest.config import load_config_async

    coordinator = _coordinator(values)  # its timings are checked before anything starts
    fleet: Any = None
    try:
        if values["dev"]:
            fleet = await _start_dev_fleet(values["dev_clusters"])
            if not planned:
                dev = ProviderSpec("file", "file", [("directories", str(fleet.kubeconfig_dir))])
                planned = _plan(values, [dev], plugins)
        config = None
        if not values["dev"] or values["kubeconfig"] or values["context"]:
            try:
                config = await load_config_async(values["kubeconfig"], context=values["context"])
            except Exception as exc:  # noqa: BLE001 -- a bad kubeconfig or context: bad input
                raise UsageError(str(exc)) from None
        mgr = _manager(values, config, await _provider(planned), coordinator)
        result = setup(mgr)
        if inspect.isawaitable(result):
            await result
        loop = type(asyncio.get_running_loop())
        members = " ".join(f"{p.member}={p.name}" for p in planned) or "none"
        log.info("running", extra={"providers": members, "loop": f"{loop.__module__}.{loop.__qualname__}"})
        await mgr.start()
    finally:
        if fleet is not None:
            await asyncio.to_thread(fleet.close)


async def _start_dev_fleet(n: int) -> Any:
    if importlib.util.find_spec("mcr_envtest") is None:
        raise UsageError("--dev needs mcr-envtest, which is not installed: pip install mcr-envtest")
    from mcr_envtest import FleetThread

    fleet = FleetThread(n)
    try:
        await asyncio.to_thread(fleet.start)
    except BaseException:
        await asyncio.to_thread(fleet.close)
        raise
    log.info("dev fleet up", extra={"clusters": n, "kubeconfig_dir": str(fleet.kubeconfig_dir)})
    return fleet


def _cache_options(values: dict[str, Any]) -> dict[str, Any]:
    if not values["namespace"]:
        return {}
    from mcr.cache import CacheOptions, NamespaceConfig

    return {
        "cache_options": CacheOptions(
            default_namespaces={ns: NamespaceConfig() for ns in values["namespace"]}
        )
    }


def _coordinator(values: dict[str, Any]) -> Any:
    if not values["shard"]:
        return None
    from mcr.sharding import ShardedCoordinator

    try:
        return ShardedCoordinator(
            namespace=values["shard_namespace"],
            weight=values["shard_weight"],
            lease_duration=values["shard_lease_duration"],
            renew_deadline=values["shard_renew_deadline"],
            renew_period=values["shard_renew_period"],
            retry_period=values["shard_retry_period"],
        )
    except ValueError as exc:
        message = str(exc)  # in the flags' names
        for option in ("lease_duration", "renew_deadline", "renew_period", "retry_period", "weight"):
            message = message.replace(option, f"--shard-{option.replace('_', '-')}")
        raise UsageError(message) from None


def _metrics_serving(values: dict[str, Any]) -> dict[str, Any]:
    """The Manager's secure-metrics arguments from ``--metrics-secure`` and its certificate flags
    (checked against each other by :func:`_settings`)."""
    from mcr.manager import with_authentication_and_authorization

    if not values["metrics_secure"]:
        return {}
    return {
        "metrics_secure_serving": True,
        "metrics_cert_dir": values["metrics_cert_path"],
        "metrics_cert_name": values["metrics_cert_name"],
        "metrics_key_name": values["metrics_cert_key"],
        "metrics_filter_provider": with_authentication_and_authorization(),
    }


def _manager(values: dict[str, Any], config: Any, provider: Any, coordinator: Any) -> Any:
    from mcr.manager import Manager

    serving = _metrics_serving(values)
    try:
        return Manager(
            config,
            provider=provider,
            leader_election=values["leader_elect"],
            leader_election_id=values["leader_election_id"],
            leader_election_namespace=values["leader_election_namespace"],
            metrics_bind_address=values["metrics_bind_address"],
            **serving,
            health_probe_bind_address=values["health_probe_bind_address"],
            graceful_shutdown_timeout=values["graceful_shutdown_timeout"],
            coordinator=coordinator,
            cluster_options=_cache_options(values),
        )
    except ValueError as exc:
        raise UsageError(str(exc)) from None


@dataclass
class _Planned:
    """A provider checked against its factory's parameters, built once the loop runs."""

    member: str
    name: str
    factory: Any
    kwargs: dict[str, Any]


def _plan(values: dict[str, Any], specs: list[ProviderSpec], plugins: Iterable[object]) -> list[_Planned]:
    """Resolve every provider and convert its options, before anything starts."""
    if not specs:
        return []
    from mcr.plugins import load_registry, plugin_manager

    reg = load_registry(plugin_manager(plugins=plugins))
    planned = []
    for spec in specs:
        factory = resolve(reg, spec.name)
        kwargs = build_options(spec, factory)
        missing = missing_options(factory, kwargs)
        if missing:
            needs = " ".join(f"--provider-opt {m}=..." for m in missing)
            raise UsageError(f"provider {spec.name!r} needs {needs}")
        if values["namespace"] and accepts(factory, "cluster_options") and "cluster_options" not in kwargs:
            kwargs["cluster_options"] = _cache_options(values)
        planned.append(_Planned(spec.member, spec.name, factory, kwargs))
    return planned


async def _provider(planned: list[_Planned]) -> Any:
    built: list[tuple[str, Any]] = []
    for p in planned:
        try:
            built.append((p.member, p.factory(**p.kwargs)))
        except (TypeError, ValueError) as exc:
            raise UsageError(f"provider {p.name!r}: {exc}") from None
    if not built:
        return None
    if len(built) == 1:
        return built[0][1]
    from mcr.providers import MultiProvider

    multi = MultiProvider()
    for member, provider in built:
        await multi.add_provider(member, provider)
    return multi


def run_command(args: argparse.Namespace, out: TextIO, plugins: Iterable[object]) -> int:
    """Run ``mcr run`` for the parsed ``args``; returns the exit status.

    ``plugins`` are provider plugins registered in addition to the installed ones; ``out`` is
    not written to (the run logs on stderr).
    """
    from mcr.errors import MCRError
    from mcr.log import setup_logging
    from mcr.runner import run

    try:
        values, specs = _settings(args)
        setup_logging(values["log_level"].upper(), fmt=values["log_format"])
        try:
            module = load_app(args.app)
        except UsageError:
            raise
        except Exception:  # noqa: BLE001 -- the app's own import failed: show where, exit 1
            traceback.print_exc()
            print(f"mcr run: importing {args.app} failed", file=sys.stderr)
            return 1
        setup = _setup_of(module, args.app)
        planned = _plan(values, specs, plugins)
        if values["dev"] and not planned and importlib.util.find_spec("mcr_provider_file") is None:
            raise UsageError("--dev without --provider uses the file provider: pip install mcr-provider-file")
        run(_run(values, planned, setup, plugins), loop=values["loop"])
    except UsageError as exc:
        print(f"mcr run: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 0
    except Exception as exc:  # noqa: BLE001 -- a runnable or the app failed: report it, exit 1
        if not isinstance(exc, MCRError):  # a bug, most likely in the app: show where
            traceback.print_exc()
        print(f"mcr run: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    return 0
