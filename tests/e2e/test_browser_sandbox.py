"""Chromium's sandbox with the flags the browser tool builds (``launch.chromium_args``), on the
real Chromium: a non-root daemon's Chromium starts with its sandbox (its renderers in a user
namespace of their own); as root Chromium refuses to start with it, which is why -- and only
where -- ``--no-sandbox`` is passed.  The Python here lives under root's private home, so the
non-root run starts Chromium itself (``setpriv``) rather than the whole tool."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from bot.agent.tools.browser.launch import chromium_args

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
NOBODY = 65534

pytestmark = pytest.mark.timeout(90)


def _need(root: bool = True) -> None:
    if not os.access(CHROMIUM, os.X_OK):
        pytest.skip("no chromium")
    if root and os.geteuid() != 0:
        pytest.skip("switching to another user needs root")
    if root and shutil.which("setpriv") is None:
        pytest.skip("no setpriv")


def _processes(session: int) -> dict[int, str]:
    """pid -> Chromium process type ('' for the browser) of every Chromium in ``session``."""
    out = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            if os.getsid(int(entry.name)) != session:
                continue
            argv = Path(f"/proc/{entry.name}/cmdline").read_bytes().replace(b"\0", b" ").split()
            if "chrom" in os.path.basename(os.readlink(f"/proc/{entry.name}/exe")):
                kind = next((a[7:].decode() for a in argv if a.startswith(b"--type=")), "")
                out[int(entry.name)] = kind
    return out


def _user_ns(pid: int) -> str:
    return os.readlink(f"/proc/{pid}/ns/user")


def test_a_non_root_chromium_runs_in_its_sandbox():
    _need()
    home = tempfile.mkdtemp(prefix="chela-sandbox-")
    os.chown(home, NOBODY, NOBODY)
    profile = f"{home}/profile"
    args = chromium_args(9, 256, as_root=False)
    cmd = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"]
    cmd += ["env", f"HOME={home}", CHROMIUM, "--headless", *args, f"--user-data-dir={profile}"]
    proc = subprocess.Popen(
        [*cmd, "about:blank"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        found: dict[int, str] = {}
        for _ in range(200):
            found = _processes(proc.pid)
            if "renderer" in found.values() and "" in found.values():
                break
            if proc.poll() is not None:
                break
            time.sleep(0.1)
        assert "renderer" in found.values(), proc.stderr.read() if proc.poll() is not None else ""
        browser = next(p for p, kind in found.items() if kind == "")
        renderers = [p for p, kind in found.items() if kind == "renderer"]
        assert all(os.stat(f"/proc/{p}").st_uid == NOBODY for p in found)
        # the sandbox: every renderer in a user namespace of its own, not the browser's
        assert all(_user_ns(p) != _user_ns(browser) for p in renderers)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
        shutil.rmtree(home, ignore_errors=True)


def _dump_blank(args: list[str], profile: str) -> subprocess.CompletedProcess:
    cmd = [CHROMIUM, "--headless", *args, f"--user-data-dir={profile}", "--dump-dom"]
    return subprocess.run(
        [*cmd, "about:blank"], capture_output=True, text=True, timeout=60, check=False
    )


def test_as_root_chromium_needs_the_flag_the_tool_passes_only_there(tmp_path):
    _need()
    without = _dump_blank(chromium_args(9, 256, as_root=False), str(tmp_path / "a"))
    assert "<body>" not in without.stdout
    assert "without --no-sandbox is not supported" in without.stderr
    with_flag = _dump_blank(chromium_args(9, 256, as_root=True), str(tmp_path / "b"))
    assert "<body></body>" in with_flag.stdout, with_flag.stderr[-500:]
