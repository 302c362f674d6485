"""The `mcr` command line."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from mcr.cli import main
from mcr.plugins import DISABLE_AUTOLOAD_ENV, RegisterProvider, hookimpl
from mcr.providers import NopProvider

MCR = Path(sys.executable).with_name("mcr")


def test_providers_table_via_console_script() -> None:
    env = {**os.environ, DISABLE_AUTOLOAD_ENV: "0"}
    done = subprocess.run(
        [str(MCR), "providers"], capture_output=True, text=True, env=env, timeout=60, check=True
    )
    lines = done.stdout.splitlines()
    assert lines[0].split() == ["NAME", "DISTRIBUTION", "VERSION", "DESCRIPTION"]
    rows = {line.split()[0]: line.split() for line in lines[1:]}
    for name in ("clusters", "multi", "nop", "single"):
        assert rows[name][1:3] == ["mcr-core", "0.1.0"]
    assert "compose" in " ".join(rows["multi"][3:])


def test_providers_json() -> None:
    out = io.StringIO()
    assert main(["providers", "--json"], out=out) == 0
    entries = {e["name"]: e for e in json.loads(out.getvalue())}
    assert entries["single"] == {
        "name": "single",
        "distribution": "mcr-core",
        "version": "0.1.0",
        "description": "one named cluster",
    }


def test_autoload_switch_hides_entry_point_plugins(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(DISABLE_AUTOLOAD_ENV, "1")
    out = io.StringIO()
    assert main(["providers", "--json"], out=out) == 0
    assert sorted(e["name"] for e in json.loads(out.getvalue())) == ["clusters", "multi", "nop", "single"]


def test_usage_errors_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main([])
    assert info.value.code == 2
    assert "providers" in capsys.readouterr().err


def test_broken_plugin_is_named_and_exits_1(capsys: pytest.CaptureFixture[str]) -> None:
    class Broken:
        @hookimpl
        def mcr_register_providers(self, register: RegisterProvider) -> None:
            raise RuntimeError("cannot find my settings")

    assert main(["providers"], plugins=[Broken()]) == 1
    err = capsys.readouterr().err
    assert "RuntimeError: cannot find my settings" in err
    assert "test_cli.test_broken_plugin_is_named_and_exits_1.<locals>.Broken" in err


def test_extra_plugins_are_listed() -> None:
    class Extra:
        @hookimpl
        def mcr_register_providers(self, register: RegisterProvider) -> None:
            register("extra", NopProvider, description="an embedded provider")

    out = io.StringIO()
    assert main(["providers"], out=out, plugins=[Extra()]) == 0
    row = next(line for line in out.getvalue().splitlines() if line.startswith("extra "))
    assert row.split() == ["extra", "-", "-", "an", "embedded", "provider"]


def test_broken_distribution_is_reported_and_exits_1(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    module = tmp_path / "mcr_provider_broken.py"
    module.write_text("raise RuntimeError('half-installed')\n")
    info = tmp_path / "mcr_provider_broken-0.0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: mcr-provider-broken\nVersion: 0.0.1\n")
    (info / "entry_points.txt").write_text("[mcr]\nbroken = mcr_provider_broken\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delenv(DISABLE_AUTOLOAD_ENV, raising=False)
    out = io.StringIO()
    assert main(["providers"], out=out) == 1
    assert "mcr-provider-broken 0.0.1" in capsys.readouterr().err
    assert "nop " in out.getvalue()  # the providers that loaded are still listed
