"""Checks for the shipped systemd units (SPEC §8).

The units are parsed with a small reader (systemd allows a key to repeat,
which configparser does not model), the required directives are asserted,
and when ``systemd-analyze`` is installed the units are run through
``systemd-analyze verify`` so that typos and directives that are invalid
for the unit type are caught.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SYSTEM_UNIT = ROOT / "systemd" / "chela.service"
USER_UNIT = ROOT / "systemd" / "chela.user.service"

Unit = dict[str, dict[str, list[str]]]


def parse_unit(text: str) -> Unit:
    """Parse unit-file text into {section: {key: [values in order]}}."""
    sections: Unit = {}
    current: dict[str, list[str]] | None = None
    pending = ""
    for raw in text.splitlines():
        line = pending + raw.strip() if pending else raw.strip()
        pending = ""
        if not line or line[0] in "#;":
            continue
        if line.endswith("\\"):
            pending = line[:-1].rstrip() + " "
            continue
        if line.startswith("[") and line.endswith("]"):
            current = sections.setdefault(line[1:-1], {})
            continue
        assert current is not None, f"directive outside a section: {line!r}"
        assert "=" in line, f"not a key=value line: {line!r}"
        key, value = line.split("=", 1)
        current.setdefault(key.strip(), []).append(value.strip())
    return sections


def one(unit: Unit, section: str, key: str) -> str:
    values = unit.get(section, {}).get(key)
    assert values, f"[{section}] {key}= is missing"
    return values[-1]


@pytest.fixture(scope="module")
def system_unit() -> Unit:
    return parse_unit(SYSTEM_UNIT.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def user_unit() -> Unit:
    return parse_unit(USER_UNIT.read_text(encoding="utf-8"))


def test_parser_handles_repeats_comments_and_continuations():
    unit = parse_unit(
        "# comment\n[Service]\n; other comment\nA=1\nA=2\nB=x \\\n  y\n[Install]\nWantedBy=z\n"
    )
    assert unit == {"Service": {"A": ["1", "2"], "B": ["x y"]}, "Install": {"WantedBy": ["z"]}}


COMMON = {
    "Restart": "on-failure",
    "RestartSec": "5",
    "KillSignal": "SIGTERM",
    "TimeoutStopSec": "20",
    "NoNewPrivileges": "yes",
    "ProtectSystem": "strict",
    "PrivateTmp": "yes",
    "ProtectKernelTunables": "yes",
    "ProtectControlGroups": "yes",
    "RestrictSUIDSGID": "yes",
    "LockPersonality": "yes",
}


@pytest.mark.parametrize("key,expected", sorted(COMMON.items()))
@pytest.mark.parametrize("which", ["system", "user"])
def test_common_service_directives(which, key, expected, system_unit, user_unit):
    unit = system_unit if which == "system" else user_unit
    assert one(unit, "Service", key) == expected


def test_system_unit_runs_chela_with_etc_config(system_unit):
    exec_start = one(system_unit, "Service", "ExecStart")
    assert "chela run" in exec_start
    assert exec_start.endswith("--config /etc/chela/config.toml")
    assert exec_start.startswith("/"), "systemd wants an absolute path"


def test_system_unit_identity_and_state(system_unit):
    svc = system_unit["Service"]
    assert one(system_unit, "Service", "User") == "chela"
    assert one(system_unit, "Service", "StateDirectory") == "chela"
    assert "/var/lib/chela" in " ".join(svc["ReadWritePaths"]).split()
    assert one(system_unit, "Service", "EnvironmentFile") == "-/etc/chela/chela.env"
    assert one(system_unit, "Service", "ProtectHome") in ("yes", "true", "tmpfs")
    assert one(system_unit, "Install", "WantedBy") == "multi-user.target"
    assert "network-online.target" in one(system_unit, "Unit", "After")


def test_user_unit_paths(user_unit):
    exec_start = one(user_unit, "Service", "ExecStart")
    assert "chela run" in exec_start
    assert exec_start.endswith("--config %h/.chela/config.toml")
    assert exec_start.startswith("%h/") or exec_start.startswith("/")
    assert one(user_unit, "Service", "EnvironmentFile") == "-%h/.chela/chela.env"
    assert "%h/.chela" in " ".join(user_unit["Service"]["ReadWritePaths"]).split()
    assert one(user_unit, "Service", "ProtectHome") == "read-only"
    assert one(user_unit, "Install", "WantedBy") == "default.target"


# Directives that make no sense (or fail) in a per-user manager.
SYSTEM_ONLY = ["User", "Group", "DynamicUser", "AmbientCapabilities", "CapabilityBoundingSet"]


@pytest.mark.parametrize("key", SYSTEM_ONLY)
def test_user_unit_avoids_system_only_directives(key, user_unit):
    assert key not in user_unit.get("Service", {})


def test_user_unit_does_not_order_after_system_targets(user_unit):
    # A user manager cannot see system targets such as network-online.target.
    assert "network-online.target" not in str(user_unit.get("Unit", {}))


def test_unit_texts_are_plain_ascii():
    for path in (SYSTEM_UNIT, USER_UNIT):
        path.read_bytes().decode("ascii")


# ---------------------------------------------------------------------------
# systemd-analyze verify
# ---------------------------------------------------------------------------

ANALYZE = shutil.which("systemd-analyze")
needs_analyze = pytest.mark.skipif(ANALYZE is None, reason="systemd-analyze is not installed")


def _run_verify(unit_path: Path, *, user: bool, env: dict[str, str] | None = None):
    cmd = [ANALYZE]
    if user:
        cmd.append("--user")
    cmd += ["verify", str(unit_path)]
    return subprocess.run(
        cmd, capture_output=True, text=True, timeout=60, env=env, cwd=unit_path.parent
    )


def _complaints(result: subprocess.CompletedProcess, unit_name: str) -> list[str]:
    # verify exits 0 even for unknown keys or unparsable values, so treat any
    # message that mentions our unit as a failure. Messages about unrelated
    # units on the host are ignored.
    out = (result.stdout + result.stderr).splitlines()
    return [line for line in out if unit_name in line]


def _make_executable(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\nexit 0\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)


@needs_analyze
def test_system_unit_passes_systemd_analyze_verify(tmp_path, system_unit):
    # verify insists that the ExecStart binary exists; chela is not installed
    # at /opt/chela here, so the copy points at a stand-in script. Everything
    # else is the shipped text, byte for byte.
    text = SYSTEM_UNIT.read_text(encoding="utf-8")
    binary = one(system_unit, "Service", "ExecStart").split()[0]
    stand_in = tmp_path / "bin" / "chela"
    _make_executable(stand_in)
    copy = tmp_path / "chela.service"
    copy.write_text(text.replace(binary, str(stand_in)), encoding="utf-8")

    result = _run_verify(copy, user=False)
    if "Failed to initialize manager" in result.stderr:
        pytest.skip(f"systemd-analyze cannot run here: {result.stderr.strip()}")
    assert result.returncode == 0, result.stdout + result.stderr
    assert _complaints(result, copy.name) == []


@needs_analyze
def test_verify_check_is_sensitive(tmp_path):
    """Guard for the test above: a broken unit must produce complaints."""
    stand_in = tmp_path / "bin" / "chela"
    _make_executable(stand_in)
    bad = tmp_path / "broken.service"
    bad.write_text(
        f"[Service]\nExecStart={stand_in} run\nRestart=sometimes\nProtectFoo=yes\n",
        encoding="utf-8",
    )
    result = _run_verify(bad, user=False)
    if "Failed to initialize manager" in result.stderr:
        pytest.skip(f"systemd-analyze cannot run here: {result.stderr.strip()}")
    assert len(_complaints(result, bad.name)) >= 2


@needs_analyze
def test_user_unit_passes_systemd_analyze_verify(tmp_path):
    # The user unit is verified unchanged: a fake home provides the venv
    # binary that %h/.chela/venv/bin/chela resolves to, and a private
    # runtime directory lets the user-mode manager start.
    home = tmp_path / "home"
    runtime = tmp_path / "run"
    runtime.mkdir(mode=0o700)
    _make_executable(home / ".chela" / "venv" / "bin" / "chela")
    unit_dir = tmp_path / "units"
    unit_dir.mkdir()
    copy = unit_dir / "chela.service"
    shutil.copyfile(USER_UNIT, copy)

    env = dict(os.environ, HOME=str(home), XDG_RUNTIME_DIR=str(runtime))
    result = _run_verify(copy, user=True, env=env)
    if result.returncode != 0 and (
        "Failed to initialize manager" in result.stderr or "RuntimeDirectory" in result.stderr
    ):
        pytest.skip(f"user-mode systemd-analyze cannot run here: {result.stderr.strip()}")
    assert result.returncode == 0, result.stdout + result.stderr
    assert _complaints(result, copy.name) == []
