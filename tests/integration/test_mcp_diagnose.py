"""MCP as people meet it (issue 27): a server that fails to start says why (its stderr), an
HTTP server that refuses the credentials says which keys to check, and enabled/disabled_tools
take the names the model sees; a name that matches nothing is a warning."""

from __future__ import annotations

import asyncio
import json
import logging
import sys
from pathlib import Path

import pytest

from bot.config.tools import McpServerConfig
from bot.mcp.client import McpManager, disabled_tools_warnings
from tests.e2e import make_config

SERVER = str(Path(__file__).resolve().parents[1] / "mcp_server.py")
SECRET = "sk-verysecretvalue-123456"

# a server that fails as mcp-server-git does outside a repository: 12 lines, then exit 1
FAILING = """
import os, sys
for i in range(11):
    print(f"starting step {i}", file=sys.stderr)
print("token in use: " + os.environ["GIT_TOKEN"], file=sys.stderr)
print("fatal: /tmp/x is not a valid Git repository", file=sys.stderr)
sys.exit(1)
"""


@pytest.fixture(autouse=True)
def fast_retries(monkeypatch):
    monkeypatch.setattr("bot.mcp.client.PING_INTERVAL", 0.2)
    monkeypatch.setattr("bot.mcp.client.RETRY_MIN", 0.2)


def failing_server(tmp_path: Path) -> dict:
    script = tmp_path / "failing_server.py"
    script.write_text(FAILING)
    return {
        "name": "git",
        "command": sys.executable,
        "args": [str(script)],
        "env": {"GIT_TOKEN": "${CHELA_TEST_GIT_TOKEN}"},
        "connect_timeout_seconds": 10,
    }


def cli_config(tmp_path: Path, servers: list[dict]) -> Path:
    path = tmp_path / "config.toml"
    lines = [f'[agent]\nstate_dir = "{tmp_path / "state"}"\nworkspace = "{tmp_path / "ws"}"\n']
    for s in servers:
        lines.append("[[mcp.servers]]")
        for k, v in s.items():
            if isinstance(v, dict):
                table = ", ".join(f"{a} = {json.dumps(b)}" for a, b in v.items())
                lines.append(f"{k} = {{ {table} }}")
            else:
                lines.append(f"{k} = {json.dumps(v)}")
    path.write_text("\n".join(lines) + "\n")
    return path


def assert_stderr_shown(text: str) -> None:
    assert "fatal: /tmp/x is not a valid Git repository" in text
    assert "starting step 10" in text and "starting step 1\n" not in text  # the last 10 only
    assert "starting step 0" not in text
    assert SECRET not in text and "token in use: sk-v" in text  # scrubbed


# ------------------------------------------------------------------ a server that fails
def test_mcp_test_shows_what_a_failing_server_wrote(tmp_path, capsys, monkeypatch):
    from bot.cli import main

    monkeypatch.setenv("CHELA_TEST_GIT_TOKEN", SECRET)
    path = cli_config(tmp_path, [failing_server(tmp_path)])
    assert main(["mcp", "test", "git", "--config", str(path), "--timeout", "10"]) == 1
    out = capsys.readouterr().out
    assert "git [stdio]" in out and "Connection closed" in out
    assert_stderr_shown(out)
    shown = [line for line in out.splitlines() if line.startswith("    | ")]
    assert len(shown) == 10, out


async def test_doctor_and_log_show_the_reason(tmp_path, llm, caplog, monkeypatch):
    from bot.cli.doctor import doctor

    monkeypatch.setenv("CHELA_TEST_GIT_TOKEN", SECRET)
    cfg = make_config(tmp_path, llm, mcp={"servers": [failing_server(tmp_path)]})
    caplog.set_level(logging.ERROR, logger="chela.mcp")
    lines = [f.line() for f in await doctor(cfg)]
    git = next(line for line in lines if "mcp git" in line)
    assert git.startswith("FAIL")
    assert_stderr_shown(git.replace(" | ", "\n"))
    logged = "\n".join(r.getMessage() for r in caplog.records)
    assert "mcp server git" in logged
    assert_stderr_shown(logged.replace(" | ", "\n"))


async def test_twin_a_working_server_shows_no_stderr(tmp_path):
    cfg = McpServerConfig(name="srv", command=sys.executable, args=[SERVER])
    mgr = McpManager([cfg], log_dir=tmp_path / "logs")
    mgr.start()
    try:
        await mgr.settled()
        st = mgr.statuses()[0]
        assert st.state == "connected" and st.error == "" and st.stderr_tail == []
    finally:
        await mgr.stop()


# ------------------------------------------------------------ HTTP refusing credentials
async def _http_stub(status: int):
    async def handle(reader, writer):
        await reader.read(65536)
        body = b'{"error": "nope"}'
        head = (
            f"HTTP/1.1 {status} X\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
        )
        writer.write(head.encode() + body)
        await writer.drain()
        writer.close()

    return await asyncio.start_server(handle, "127.0.0.1", 0)


async def _http_error(status: int, monkeypatch, **kw) -> str:
    monkeypatch.setenv("CHELA_TEST_MCP_TOKEN", "Bearer abcdefgh12345678")
    stub = await _http_stub(status)
    port = stub.sockets[0].getsockname()[1]
    cfg = McpServerConfig(
        name="remote", url=f"http://127.0.0.1:{port}/mcp", connect_timeout_seconds=10, **kw
    )
    mgr = McpManager([cfg])
    mgr.start()
    try:
        await mgr.settled()
        return mgr.statuses()[0].error
    finally:
        await mgr.stop()
        stub.close()


@pytest.mark.parametrize("status", [401, 403])
async def test_http_server_refusing_credentials_names_the_keys(status, monkeypatch):
    error = await _http_error(
        status, monkeypatch, headers_env={"Authorization": "CHELA_TEST_MCP_TOKEN"}
    )
    assert f"refused the credentials (HTTP {status})" in error, error
    assert "headers_env.Authorization" in error and "CHELA_TEST_MCP_TOKEN" in error
    assert "abcdefgh" not in error


async def test_http_refusal_without_credentials_says_how_to_send_them(monkeypatch):
    error = await _http_error(401, monkeypatch)
    assert "sends no credentials" in error and "headers_env" in error


async def test_twin_http_server_error_is_not_called_a_credentials_problem(monkeypatch):
    error = await _http_error(500, monkeypatch)
    assert "credentials" not in error and error


# ---------------------------------------------------------------- enabled/disabled_tools
async def test_disabled_tools_take_the_model_names_and_warn_on_unknown(tmp_path, caplog):
    caplog.set_level(logging.WARNING, logger="chela.mcp")
    cfg = McpServerConfig(
        name="srv",
        command=sys.executable,
        args=[SERVER],
        disabled_tools=["srv__echo", "add", "srv__nope"],
    )
    mgr = McpManager([cfg])
    mgr.start()
    try:
        await mgr.settled()
        st = mgr.statuses()[0]
        names = [t.name for t in st.tools]
        assert "srv__echo" not in names and "srv__add" not in names
        assert "srv__slow" in names  # the twin: a tool not listed stays offered
        assert st.warnings == [
            "mcp.servers 'srv': disabled_tools entry 'srv__nope' matches no tool of the "
            "server (see `chela mcp list`); it has no effect"
        ]
        assert any("srv__nope" in r.getMessage() for r in caplog.records)
        assert (
            disabled_tools_warnings(McpConfigHolder([cfg]), {"srv": st.remote_tools}) == st.warnings
        )
    finally:
        await mgr.stop()


async def test_enabled_tools_take_the_model_names_too(tmp_path):
    cfg = McpServerConfig(
        name="srv", command=sys.executable, args=[SERVER], enabled_tools=["srv__add", "echo"]
    )
    mgr = McpManager([cfg])
    mgr.start()
    try:
        await mgr.settled()
        st = mgr.statuses()[0]
        assert sorted(t.name for t in st.tools) == ["srv__add", "srv__echo"]
        assert st.warnings == []
    finally:
        await mgr.stop()


class McpConfigHolder:
    """``cfg.mcp.servers`` for :func:`disabled_tools_warnings` (a Config has the same shape)."""

    def __init__(self, servers):
        self.mcp = type("Mcp", (), {"servers": servers})()


def test_check_warns_on_names_it_can_tell_are_wrong(tmp_path, llm):
    cfg = make_config(
        tmp_path,
        llm,
        mcp={
            "servers": [
                {"name": "fs", "command": "x", "disabled_tools": ["git__log", "fs__write_file"]},
                {
                    "name": "git",
                    "command": "y",
                    "disabled_tools": ["log"],
                    "enabled_tools": ["log"],
                },
            ]
        },
    )
    warnings = disabled_tools_warnings(cfg)
    assert any("'git__log' names a tool of server 'git'" in w for w in warnings), warnings
    assert any("log is in both enabled_tools and disabled_tools" in w for w in warnings)
    assert len(warnings) == 2  # fs__write_file is a good name


def test_twin_check_is_quiet_on_good_names(tmp_path, llm):
    cfg = make_config(
        tmp_path,
        llm,
        mcp={
            "servers": [
                {"name": "fs", "command": "x", "disabled_tools": ["fs__write_file", "read"]}
            ]
        },
    )
    assert disabled_tools_warnings(cfg) == []
