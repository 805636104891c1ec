"""The interactive flows on a real pseudo-terminal (pexpect): onboarding, chat line editing,
Ctrl-C at the prompt and mid-turn.  The fakes answer in this process, so every blocking
pexpect call runs in a thread."""

from __future__ import annotations

import asyncio
import os
import shlex
import sys
import time
import tomllib
from pathlib import Path

import pexpect
import pytest

from tests.e2e import TG_TOKEN, config_file
from tests.fakes.llm import delay, text

ROOT = Path(__file__).resolve().parents[2]
LEFT = "\x1b[D"


def spawn(argv: list[str], tmp_path: Path, stderr_file: Path | None = None) -> pexpect.spawn:
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "TEST_TG_TOKEN": TG_TOKEN,
        "TERM": "xterm",
        "PROMPT_TOOLKIT_NO_CPR": "1",
    }
    cmd = " ".join(shlex.quote(a) for a in [sys.executable, "-m", "bot", *argv])
    if stderr_file is not None:
        cmd = f"exec {cmd} 2>{shlex.quote(str(stderr_file))}"
    else:
        cmd = f"exec {cmd}"
    return pexpect.spawn(
        "/bin/sh",
        ["-c", cmd],
        env=env,
        cwd=str(tmp_path),
        encoding="utf-8",
        timeout=30,
        dimensions=(40, 200),
    )


async def expect(child: pexpect.spawn, pattern, timeout: float = 30):
    return await asyncio.to_thread(child.expect, pattern, timeout=timeout)


def chat_config(tmp_path, llm) -> Path:
    return config_file(
        tmp_path / "config.toml", llm, workspace=tmp_path / "ws", state_dir=tmp_path / "state"
    )


def user_texts(llm) -> list[str]:
    out = []
    for req in llm.requests:
        for m in req["messages"]:
            if m["role"] == "user":
                out.append(m["content"] if isinstance(m["content"], str) else str(m["content"]))
    return out


async def test_chat_line_editing_reaches_the_model_clean_and_prompt_is_on_the_terminal(
    tmp_path, llm
):
    cfg = chat_config(tmp_path, llm)
    err = tmp_path / "stderr.txt"
    llm.script(text("pong one"), text("pong two"))
    child = spawn(["chat", "--config", str(cfg)], tmp_path, stderr_file=err)
    try:
        await expect(child, "you>")
        child.send("say wrld")
        child.send(LEFT * 3)  # back over "rld"
        child.send("o")  # -> "say world"
        child.send("\r")
        await expect(child, "pong one")
        await expect(child, "you>")
        # history: Up brings the last line back, editable
        child.send("\x1b[A")
        child.send(" again\r")
        await expect(child, "pong two")
        await expect(child, "you>")
        child.sendeof()
        await asyncio.to_thread(child.expect, pexpect.EOF, timeout=10)
    finally:
        child.close(force=True)
    texts = user_texts(llm)
    assert any("say world" in t for t in texts), texts
    assert not any("\x1b" in t or "[D" in t for t in texts)
    assert any("say world again" in t for t in texts)
    assert (
        "you>" not in err.read_text() and " INFO " not in err.read_text()
    )  # prompt and logs are not on stderr
    assert "turn done" in (tmp_path / "state" / "chat.log").read_text()  # the logs went to the file


async def test_ctrl_c_at_the_prompt_exits_within_a_second(tmp_path, llm):
    child = spawn(["chat", "--config", str(chat_config(tmp_path, llm))], tmp_path)
    try:
        await expect(child, "you>")
        t0 = time.monotonic()
        child.sendintr()
        await asyncio.to_thread(child.expect, pexpect.EOF, timeout=10)
        elapsed = time.monotonic() - t0
    finally:
        child.close(force=True)
    assert elapsed < 1.0, elapsed


async def test_ctrl_c_mid_turn_cancels_it_and_the_chat_goes_on(tmp_path, llm):
    llm.script(delay(20, text("too late")), text("fresh answer"))
    child = spawn(["chat", "--config", str(chat_config(tmp_path, llm))], tmp_path)
    try:
        await expect(child, "you>")
        child.send("a slow question\r")
        await expect(child, "thinking")
        await llm.wait_for_requests(1, timeout=15)
        t0 = time.monotonic()
        child.sendintr()
        await expect(child, r"\(cancelled\)", timeout=5)
        assert time.monotonic() - t0 < 2
        await expect(child, "you>")
        child.send("next one\r")  # twin: the next turn is answered normally
        await expect(child, "fresh answer")
        await expect(child, "you>")
        child.sendeof()
        await asyncio.to_thread(child.expect, pexpect.EOF, timeout=10)
        assert "too late" not in child.before
    finally:
        child.close(force=True)
    # the cancelled message is not answered on the next start either
    from bot.store import Store

    st = Store(tmp_path / "state" / "chela.sqlite3")
    try:
        assert st.unfinished_inbound() == []
    finally:
        st.close()


async def test_interactive_onboarding(tmp_path, llm, tg):
    cfg_path = tmp_path / "config.toml"
    child = spawn(
        [
            "onboard",
            "--config",
            str(cfg_path),
            "--state-dir",
            str(tmp_path / "state"),
            "--telegram-api-base",
            tg.api_base,
        ],
        tmp_path,
    )
    clear = "\x15"  # Ctrl-U: drop the suggested answer
    try:
        await expect(child, "Model")
        child.send(clear + "openai/fake-model\r")
        await expect(child, "server URL")
        child.send(clear + llm.base_url + "\r")
        await expect(child, "API key")
        child.send("\r")
        await expect(child, "Channels to enable")
        child.send("telegram\r")
        await expect(child, "telegram: environment variable")
        child.send(clear + "TEST_TG_TOKEN\r")
        await expect(child, "telegram: your numeric Telegram user id")
        child.send("@me\r")  # refused: ids only
        await expect(child, "not a @username")
        child.send("\x01\x0b42\r")  # Ctrl-A Ctrl-K: clear the line, then the id
        await expect(child, "Workspace directory")
        child.send(clear + str(tmp_path / "ws") + "\r")
        await expect(child, "answered in")
        await expect(child, "chela chat --config")
        await asyncio.to_thread(child.expect, pexpect.EOF, timeout=10)
    finally:
        child.close(force=True)
    assert child.exitstatus == 0
    data = tomllib.loads(cfg_path.read_text())
    assert (
        data["agent"]["model"] == "openai/fake-model" and data["agent"]["api_base"] == llm.base_url
    )
    assert data["channels"]["telegram"] == {
        "enabled": True,
        "token_env": "TEST_TG_TOKEN",
        "api_base": tg.api_base,
        "allow_from": ["42"],
    }
    assert (tmp_path / "ws" / "SOUL.md").is_file()
    from bot.cli import main

    assert main(["check", "--config", str(cfg_path)]) == 0


@pytest.fixture(autouse=True)
def _tg_token(monkeypatch):
    monkeypatch.setenv("TEST_TG_TOKEN", TG_TOKEN)
