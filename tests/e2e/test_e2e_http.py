"""The OpenAI-compatible HTTP channel and the terminal channel, end to end."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import os
import sys
from pathlib import Path

import aiohttp
import pytest

from tests.e2e import config_file, make_config, running
from tests.fakes.llm import text

ROOT = Path(__file__).resolve().parents[2]


def http_cfg(tmp_path, llm, monkeypatch, token=""):
    section = {"enabled": True, "listen": "127.0.0.1:0"}
    if token:
        monkeypatch.setenv("TEST_HTTP_TOKEN", token)
        section["token_env"] = "TEST_HTTP_TOKEN"
    return make_config(tmp_path, llm, channels={"http": section})


async def test_chat_completions_plain_and_streaming(tmp_path, llm, monkeypatch):
    cfg = http_cfg(tmp_path, llm, monkeypatch, token="s3cret-token-value")
    async with running(cfg) as d:
        port = d.channels["http"].bound_port
        url = f"http://127.0.0.1:{port}/v1/chat/completions"
        auth = {"Authorization": "Bearer s3cret-token-value"}
        async with aiohttp.ClientSession() as s:
            async with s.get(f"http://127.0.0.1:{port}/healthz") as r:
                assert r.status == 200
            async with s.post(
                url,
                json={"messages": [{"role": "user", "content": "hi"}]},
                headers={"Authorization": "Bearer wrong"},
            ) as r:
                assert r.status == 401
            assert llm.requests == []
            llm.script(text("Hello from Chela"))
            body = {
                "model": "chela",
                "user": "alice",
                "messages": [{"role": "user", "content": "hi"}],
            }
            async with s.post(url, json=body, headers=auth) as r:
                assert r.status == 200
                data = await r.json()
            assert data["object"] == "chat.completion"
            assert data["choices"][0]["message"] == {
                "role": "assistant",
                "content": "Hello from Chela",
            }
            llm.script(text("streamed " * 100))
            async with s.post(url, json={**body, "stream": True}, headers=auth) as r:
                assert r.headers["Content-Type"].startswith("text/event-stream")
                raw = (await r.read()).decode()
            events = [line[6:] for line in raw.splitlines() if line.startswith("data: ")]
            assert events[-1] == "[DONE]"
            content = "".join(
                json.loads(e)["choices"][0]["delta"].get("content", "") for e in events[:-1]
            )
            assert content == ("streamed " * 100).strip()
            llm.script(text("Look at this\n[IMAGE:https://example.com/a.png]"))
            async with s.post(url, json=body, headers=auth) as r:
                data = await r.json()
            assert (
                data["choices"][0]["message"]["content"]
                == "Look at this\nImage: https://example.com/a.png"
            )
            llm.script(text("NO_REPLY"))
            async with s.post(url, json=body, headers=auth) as r:
                data = await r.json()
            assert data["choices"][0]["message"]["content"] == ""
            async with s.post(
                url, data=b"{not json", headers={**auth, "Content-Type": "application/json"}
            ) as r:
                assert r.status == 400
        # a request/response channel is never a heartbeat target
        assert d.store.get("route:last") is None and d.store.get("route:last:http") is None
    # the `user` field keeps its own conversation: the second request saw the first
    assert "hi" in json.dumps(llm.requests[1]["messages"][1:])
    # closed on stop: the connection refuses any further use
    with pytest.raises(sqlite3.ProgrammingError):
        d.store.db.execute("SELECT 1")


@pytest.mark.parametrize("host", ["0.0.0.0", "127.0.0.1"])
async def test_http_adapter_refuses_to_serve_without_token(host):
    from channels.base import ChannelError
    from channels.http import HttpChannel

    ch = HttpChannel(host=host, port=0, token="")  # loopback is no exception (SPEC §9.4)
    with pytest.raises(ChannelError, match="without a token"):
        await ch.start(lambda m: None)


async def test_terminal_chat_one_message(tmp_path, llm):
    cfg_path = config_file(
        tmp_path / "c.toml", llm, workspace=tmp_path / "ws", state_dir=tmp_path / "state"
    )
    llm.script(text("Hi from the **terminal**"))
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bot",
        "chat",
        "-m",
        "hello",
        "--config",
        str(cfg_path),
        "--log-level",
        "ERROR",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, err.decode()
    assert "Hi from the **terminal**" in out.decode()
    assert "hello" in llm.requests[0]["messages"][-1]["content"]
    # the workspace was created with starter files on first run
    assert (tmp_path / "ws" / "AGENTS.md").is_file()
