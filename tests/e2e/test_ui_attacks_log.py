"""No UI secret in the daemon's log file (SPEC §16.3): `chela run` at DEBUG writes one access
line per UI request, with the path and no query, and never the login code, the cookie or
the CSRF token, not even for a careless link that puts a code in the query string."""

from __future__ import annotations

import socket
import subprocess
import sys

from bot.config import load_config
from tests.e2e import config_file, eventually
from tests.e2e.test_first_hour import env, stop
from tests.e2e.ui_client import UiClient, mint_code


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_login_code_cookie_and_csrf_never_reach_the_log_file(tmp_path, llm):
    port = _free_port()
    path = config_file(
        tmp_path / "c.toml",
        llm,
        workspace=tmp_path / "ws",
        state_dir=tmp_path / "state",
        channels={"http": {"enabled": True, "listen": f"127.0.0.1:{port}"}},
    )
    log = tmp_path / "state" / "logs" / "chela.log"
    proc = subprocess.Popen(
        [sys.executable, "-m", "bot", "run", "--log-level", "DEBUG", "--config", str(path)],
        env=env(),
        stdout=subprocess.DEVNULL,
        stderr=(tmp_path / "stderr.log").open("w"),
    )
    secrets: list[str] = []
    try:
        await eventually(lambda: log.exists() and "ready in" in log.read_text(), timeout=60)
        cfg = load_config(str(path))
        careless, code = mint_code(cfg), mint_code(cfg)
        async with UiClient(f"http://127.0.0.1:{port}") as c:
            assert (await c.get(f"/ui/?login={careless}")).status == 200
            assert (await c.login(code)).status == 200
            assert (await c.get(f"/ui/api/bootstrap?x={c.csrf}")).status == 200
            assert (await c.post("/ui/api/logout")).status == 204
            assert (await c.login(careless)).status == 200  # a refused one would log at INFO
            secrets = [careless, code, c.cookie, c.csrf]
            assert (await c.login("E" * 22)).status == 401
    finally:
        stop(proc)
    text = log.read_text()
    assert f"Control UI: http://127.0.0.1:{port}/ui/ (log in with `chela dashboard`)" in text
    assert "ui POST /ui/api/login -> 200" in text  # the access lines are there ...
    assert "ui GET /ui/ -> 200" in text and "ui GET /ui/api/bootstrap -> 200" in text
    assert "ui POST /ui/api/login -> 401" in text
    leaked = [s for s in secrets if s in text]  # ... and name no secret
    assert secrets and not leaked, leaked
    assert "?" not in "".join(line for line in text.splitlines() if " ui " in line)
