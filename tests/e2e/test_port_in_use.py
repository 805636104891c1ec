"""The HTTP API's port already taken (issue 27 item 5): ``chela run`` fails at start with the
port and the process holding it, exit code 1, instead of logging "ready" and retrying forever."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from tests.e2e import config_file

ROOT = Path(__file__).resolve().parents[2]


def http_config(tmp_path: Path, llm, port: int) -> Path:
    return config_file(
        tmp_path / "config.toml",
        llm,
        workspace=tmp_path / "ws",
        state_dir=tmp_path / "state",
        channels={"http": {"enabled": True, "listen": f"127.0.0.1:{port}"}},
    )


def chela_run(cfg: Path) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "bot", "run", "--config", str(cfg)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        cwd=ROOT,
    )


def test_run_with_the_http_port_taken_fails_naming_the_port_and_its_holder(tmp_path, llm):
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        p = chela_run(http_config(tmp_path, llm, port))
        try:
            out, _ = p.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            p.kill()
            out, _ = p.communicate()
            raise AssertionError(
                f"chela run still running with port {port} taken:\n{out}"
            ) from None
    assert p.returncode == 1, out
    assert f"port {port} is held by pid {os.getpid()}" in out, out
    assert not re.search(r"ready in \d+ ms", out), out


def test_run_with_the_http_port_free_serves_and_stops_on_sigterm(tmp_path, llm):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    p = chela_run(http_config(tmp_path, llm, port))
    try:
        deadline = time.monotonic() + 60
        with socket.socket() as client:
            while client.connect_ex(("127.0.0.1", port)) != 0:
                assert p.poll() is None and time.monotonic() < deadline, p.stdout.read()  # type: ignore[union-attr]
                time.sleep(0.2)
        p.send_signal(signal.SIGTERM)
        out, _ = p.communicate(timeout=30)
    finally:
        if p.poll() is None:
            p.kill()
            p.communicate()
    assert p.returncode == 0, out
    assert "already in use" not in out
