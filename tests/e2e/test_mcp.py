"""MCP servers (SPEC §14) end to end: a server written with the official SDK, over stdio and
streamable HTTP, called by the fake LLM through the daemon."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("mcp", reason="the MCP SDK is an optional extra: pip install 'chela[mcp]'")

from bot.mcp.schema import normalize_schema, tool_name
from tests.e2e import eventually, make_config, running, system_prompt, telegram_section
from tests.fakes.llm import text, tool_calls

SERVER = str(Path(__file__).resolve().parents[1] / "mcp_server.py")


@pytest.fixture(autouse=True)
def fast_pings(monkeypatch):
    monkeypatch.setattr("bot.mcp.client.PING_INTERVAL", 0.2)
    monkeypatch.setattr("bot.mcp.client.RETRY_MIN", 0.2)


def stdio_server(name="srv", **kw) -> dict:
    return {
        "name": name,
        "command": sys.executable,
        "args": [SERVER, *kw.pop("extra_args", [])],
        **kw,
    }


def cfg_with(tmp_path, llm, tg, servers, **tools):
    return make_config(
        tmp_path,
        llm,
        channels=telegram_section(tg, dm_policy="open"),
        mcp={"servers": servers},
        tools=tools,
    )


def tool_results(request: dict) -> list[str]:
    return [m["content"] for m in request["messages"] if m.get("role") == "tool"]


def offered(request: dict) -> list[str]:
    return [t["function"]["name"] for t in request.get("tools", [])]


async def connected(d, name="srv", timeout=20.0):
    return await eventually(lambda: d.mcp.servers[name].session is not None, timeout=timeout)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_http_server(port: int) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, SERVER, "--http", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


async def wait_port(port: int, timeout=20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            _, w = await asyncio.open_connection("127.0.0.1", port)
            w.close()
            return
        except OSError:
            await asyncio.sleep(0.1)
    raise AssertionError("the MCP HTTP server did not start")


# ------------------------------------------------------------------------------ stdio
async def test_stdio_tools_are_listed_and_called_end_to_end(tmp_path, llm, tg, monkeypatch):
    monkeypatch.setenv("CHELA_SECRET_PROBE", "x")
    monkeypatch.setenv("LABEL_SOURCE", "from-env")
    srv = stdio_server(env={"MCP_TEST_LABEL": "${LABEL_SOURCE}"})
    cfg = cfg_with(tmp_path, llm, tg, [srv], enabled=["session_status"])
    llm.script(tool_calls([("srv__add", {"a": 2, "b": 3}), ("srv__whoami", {})]), text("It is 5."))
    async with running(cfg) as d:
        await connected(d)
        tg.inject_message(42, "add 2 and 3", from_id=42)
        sent = await tg.wait_for_sent(1, timeout=20)
    assert sent[0].visible_text == "It is 5."
    req = llm.requests[0]
    assert {"srv__add", "srv__echo", "srv__slow", "srv__whoami", "srv__fail"} <= set(offered(req))
    add = next(t for t in req["tools"] if t["function"]["name"] == "srv__add")["function"]
    assert (
        add["parameters"]["required"] == ["a", "b"]
        and add["parameters"]["properties"]["a"]["type"] == "integer"
    )
    assert "- srv__add: Add two integers." in system_prompt(req)
    results = tool_results(llm.requests[1])
    assert "\n5\n" in results[0] and "Untrusted data" in results[0]
    # the server got its configured env but not the daemon's environment; a value taken
    # from the environment with ${VAR} is a secret, so the model sees it redacted (SPEC §9.5)
    assert "from*[REDACTED] secret-visible=False" in results[1]


async def test_guests_get_mcp_tools_only_when_listed(tmp_path, llm, tg):
    cfg = cfg_with(
        tmp_path,
        llm,
        tg,
        [stdio_server()],
        enabled=["session_status"],
        guest=["session_status", "srv__echo"],
    )
    llm.script(
        tool_calls([("srv__add", {"a": 1, "b": 1})]),
        text("no"),
        tool_calls([("srv__echo", {"text": "hi guest"})]),
        text("echoed"),
    )
    async with running(cfg) as d:
        await connected(d)
        tg.inject_message(77, "add", from_id=77)
        await tg.wait_for_sent(1, timeout=20)
        assert offered(llm.requests[0]) == ["session_status", "srv__echo"]
        assert tool_results(llm.requests[1])[0].startswith("Error: unknown tool 'srv__add'")
        tg.inject_message(77, "echo", from_id=77)  # twin: the listed tool works for the guest
        await tg.wait_for_sent(2, timeout=20)
        assert "hi guest" in tool_results(llm.requests[3])[-1]


async def test_a_killed_server_gives_a_clear_error_and_reconnects(tmp_path, llm, tg):
    pidfile = tmp_path / "mcp.pid"
    cfg = cfg_with(
        tmp_path,
        llm,
        tg,
        [stdio_server(extra_args=["--pidfile", str(pidfile)])],
        enabled=["session_status"],
    )
    async with running(cfg) as d:
        await connected(d)
        first = int(pidfile.read_text())
        os.kill(first, signal.SIGKILL)
        await eventually(lambda: d.mcp.servers["srv"].session is None, timeout=10)
        reg = d.agent.registry
        out = await reg.execute("srv__add", {"a": 1, "b": 2}, d.agent.tool_context(_owner_req()))
        assert out.startswith("Error: MCP server 'srv'") and "reconnect" in out
        await connected(d)  # a new process, the same tools
        assert int(pidfile.read_text()) != first
        llm.script(tool_calls([("srv__add", {"a": 20, "b": 22})]), text("42"))
        tg.inject_message(42, "add", from_id=42)
        await tg.wait_for_sent(1, timeout=20)
        assert "\n42\n" in tool_results(llm.requests[1])[0]


def _owner_req():
    from bot.agent.turn import TurnRequest

    return TurnRequest(session_key="agent:main:main", user_text="x")


async def test_a_server_that_never_starts_does_not_delay_readiness(tmp_path, llm, tg):
    # a "server" that hangs forever without speaking MCP, and one that does not exist
    hang = {
        "name": "hang",
        "command": sys.executable,
        "args": ["-c", "import time; time.sleep(600)"],
        "connect_timeout_seconds": 30,
    }
    missing = {"name": "missing", "command": str(tmp_path / "no-such-binary")}
    cfg = cfg_with(tmp_path, llm, tg, [hang, missing, stdio_server()], enabled=["session_status"])
    t0 = time.monotonic()
    async with running(cfg) as d:
        assert time.monotonic() - t0 < 5
        await connected(d)
        await eventually(lambda: d.mcp.servers["missing"].status.state == "failed", timeout=10)
        assert (
            "not found" in d.mcp.servers["missing"].status.error
            or "No such file" in d.mcp.servers["missing"].status.error
        )
        assert d.mcp.servers["hang"].status.state == "starting"
        names = d.agent.registry.names()
        assert "srv__add" in names and not any(n.startswith(("hang__", "missing__")) for n in names)
        llm.script(text("still here"))
        tg.inject_message(42, "hi", from_id=42)
        assert (await tg.wait_for_sent(1, timeout=20))[0].visible_text == "still here"


async def test_a_slow_call_times_out_cleanly(tmp_path, llm, tg):
    cfg = cfg_with(
        tmp_path, llm, tg, [stdio_server(timeout_seconds=0.5)], enabled=["session_status"]
    )
    llm.script(
        tool_calls([("srv__slow", {"seconds": 5})]),
        text("too slow"),
        tool_calls([("srv__slow", {"seconds": 0.01})]),
        text("fast enough"),
    )
    async with running(cfg) as d:
        await connected(d)
        t0 = time.monotonic()
        tg.inject_message(42, "slow", from_id=42)
        await tg.wait_for_sent(1, timeout=20)
        assert time.monotonic() - t0 < 4
        assert tool_results(llm.requests[1])[0].startswith("Error: timeout: MCP tool srv__slow")
        tg.inject_message(42, "quick", from_id=42)  # twin: the session survived; a quick call works
        await tg.wait_for_sent(2, timeout=20)
        assert "slept 0.01" in tool_results(llm.requests[3])[-1]


async def test_prompt_changes_only_when_the_tool_set_changes(tmp_path, llm, tg):
    cfg = cfg_with(
        tmp_path, llm, tg, [stdio_server(enabled_tools=["add"])], enabled=["session_status"]
    )
    async with running(cfg) as d:
        await connected(d)
        llm.script(text("a"), text("b"))
        tg.inject_message(42, "one", from_id=42)
        await tg.wait_for_sent(1, timeout=20)
        builds = d.agent.cache.builds
        tg.inject_message(42, "two", from_id=42)
        await tg.wait_for_sent(2, timeout=20)
        assert d.agent.cache.builds == builds
        assert system_prompt(llm.requests[0]) == system_prompt(llm.requests[1])
        assert offered(llm.requests[0]) == ["session_status", "srv__add"]


# ------------------------------------------------------------------------------- HTTP
async def test_streamable_http_server_end_to_end_and_reconnect(tmp_path, llm, tg, monkeypatch):
    port = free_port()
    proc = start_http_server(port)
    try:
        await wait_port(port)
        monkeypatch.setenv("MCP_TEST_TOKEN", "Bearer test-token-1234")
        srv = {
            "name": "web_srv",
            "url": f"http://127.0.0.1:{port}/mcp",
            "headers_env": {"Authorization": "MCP_TEST_TOKEN"},
        }
        cfg = cfg_with(tmp_path, llm, tg, [srv], enabled=["session_status"])
        llm.script(tool_calls([("web_srv__add", {"a": 40, "b": 2})]), text("42 it is"))
        async with running(cfg) as d:
            await connected(d, "web_srv")
            tg.inject_message(42, "add", from_id=42)
            assert (await tg.wait_for_sent(1, timeout=20))[0].visible_text == "42 it is"
            assert "\n42\n" in tool_results(llm.requests[1])[0]
            # kill the server mid-session: a clear error, then a reconnect once it is back
            proc.kill()
            proc.wait()
            out = await d.agent.registry.execute(
                "web_srv__add", {"a": 1, "b": 1}, d.agent.tool_context(_owner_req())
            )
            assert out.startswith("Error: MCP server 'web_srv'")
            await eventually(lambda: d.mcp.servers["web_srv"].session is None, timeout=10)
            proc = start_http_server(port)
            await connected(d, "web_srv", timeout=30)
            out = await d.agent.registry.execute(
                "web_srv__add", {"a": 1, "b": 1}, d.agent.tool_context(_owner_req())
            )
            assert "\n2\n" in out
    finally:
        proc.kill()
        proc.wait()


# ------------------------------------------------------------------------------ units
def test_tool_names_fit_providers():
    assert tool_name("srv", "add") == "srv__add"
    assert tool_name("srv", "read file.v2") == "srv__read_file_v2"
    long = tool_name("server", "x" * 100)
    assert len(long) == 64 and long != tool_name("server", "x" * 99 + "y")


def test_schemas_are_normalised():
    raw = {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "title": "Args",
        "type": "object",
        "$defs": {
            "Point": {
                "type": "object",
                "properties": {"x": {"type": "number"}},
                "required": ["x", "z"],
            }
        },
        "properties": {
            "p": {"$ref": "#/$defs/Point"},
            "tags": {"type": "array"},
            "note": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": None},
            "kind": {"type": ["string", "null"]},
        },
        "required": ["p", "ghost"],
    }
    out = normalize_schema(raw)
    assert out == {
        "type": "object",
        "required": ["p"],
        "properties": {
            "p": {"type": "object", "properties": {"x": {"type": "number"}}, "required": ["x"]},
            "tags": {"type": "array", "items": {}},
            "note": {"type": "string"},
            "kind": {"type": "string"},
        },
    }
    assert normalize_schema(None) == {"type": "object", "properties": {}}


# -------------------------------------------------------------------------------- CLI
def _cli_config(tmp_path, servers: list[dict]) -> Path:
    path = tmp_path / "config.toml"
    lines = [f'[agent]\nstate_dir = "{tmp_path / "state"}"\nworkspace = "{tmp_path / "ws"}"\n']
    for s in servers:
        lines.append("[[mcp.servers]]")
        for k, v in s.items():
            lines.append(f"{k} = {json.dumps(v)}")
    path.write_text("\n".join(lines) + "\n")
    return path


def test_chela_mcp_list_and_test(tmp_path, capsys):
    from bot.cli import main

    path = _cli_config(
        tmp_path, [stdio_server(), {"name": "gone", "command": str(tmp_path / "nope")}]
    )
    assert main(["mcp", "list", "--config", str(path), "--timeout", "15"]) == 0
    out = capsys.readouterr().out
    assert "srv [stdio]" in out and ": connected" in out and "  srv__add: Add two integers." in out
    assert "gone [stdio]" in out and "failed" in out
    assert main(["mcp", "test", "srv", "--config", str(path), "--timeout", "15"]) == 0
    out = capsys.readouterr().out
    assert '"required": ["a", "b"]' in out
    assert main(["mcp", "test", "gone", "--config", str(path), "--timeout", "5"]) == 1
    assert main(["mcp", "test", "other", "--config", str(path)]) == 1


# ------------------------------------------------------------------- one-shot entry points
async def test_chat_message_waits_for_mcp_tools_before_its_only_turn(tmp_path, llm):
    """`chela chat -m` runs one turn right after start-up: the MCP tools must already be offered
    (peers' users report tools missing on some entry points)."""
    from tests.e2e import config_file
    from tests.e2e.test_first_hour import chela

    cfg_path = config_file(
        tmp_path / "config.toml", llm, workspace=tmp_path / "ws", state_dir=tmp_path / "state"
    )
    with cfg_path.open("a") as f:
        f.write(
            "[[mcp.servers]]\n"
            'name = "srv"\n'
            f"command = {json.dumps(sys.executable)}\n"
            f"args = [{json.dumps(SERVER)}]\n"
        )
    llm.script(tool_calls([("srv__add", {"a": 20, "b": 22})]), text("It is 42."))
    r = await chela("chat", "--config", str(cfg_path), "-m", "add 20 and 22")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "It is 42."
    assert "srv__add" in offered(llm.requests[0])
    assert "\n42\n" in tool_results(llm.requests[1])[0]


async def test_twin_chat_message_without_mcp_servers_answers_at_once(tmp_path, llm):
    from tests.e2e import config_file
    from tests.e2e.test_first_hour import chela

    cfg_path = config_file(
        tmp_path / "config.toml", llm, workspace=tmp_path / "ws", state_dir=tmp_path / "state"
    )
    llm.script(text("plain"))
    r = await chela("chat", "--config", str(cfg_path), "-m", "hi")
    assert r.returncode == 0 and r.stdout.strip() == "plain"
    assert not any(n.startswith("srv__") for n in offered(llm.requests[0]))


async def test_doctor_reports_each_mcp_server_and_the_search_provider(tmp_path, llm, monkeypatch):
    from bot.cli.doctor import doctor

    monkeypatch.delenv("BRAVE_API_KEY", raising=False)
    broken = {"name": "gone", "command": str(tmp_path / "no-such-server")}
    cfg = make_config(
        tmp_path,
        llm,
        mcp={"servers": [stdio_server(), broken]},
        tools={"enabled": ["web_search"], "web": {"search_provider": "brave"}},
    )
    lines = [f.line() for f in await doctor(cfg)]
    assert any(line.startswith("OK    mcp srv: connected, 5 tool(s)") for line in lines), lines
    gone = next(line for line in lines if "mcp gone" in line)
    assert gone.startswith("FAIL") and "no-such-server" in gone and "chela mcp test gone" in gone
    search = next(line for line in lines if "web search" in line)
    assert search.startswith("WARN") and "not offered" in search

    # twin: with the key set, the provider is reported as working
    monkeypatch.setenv("BRAVE_API_KEY", "k")
    lines = [f.line() for f in await doctor(cfg, live=False)]
    assert "OK    web search: provider brave" in lines
