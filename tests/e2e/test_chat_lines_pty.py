"""The terminal chat on a real pseudo-terminal, its own core in the process (no daemon):
command answers read one item per line, as on Telegram and the Control UI (Markdown would
join them into one paragraph), and ``/stop`` typed while a reply streams stops it, as
Ctrl-C does."""

from __future__ import annotations

import asyncio

from tests.e2e.test_first_hour_pty import chat_config, expect, spawn
from tests.fakes.llm import streamed, text


async def test_help_and_status_answers_are_one_item_per_line(tmp_path, llm):
    child = spawn(["chat", "--config", str(chat_config(tmp_path, llm))], tmp_path)
    try:
        await expect(child, "you>")
        child.send("/help\r")
        # each command on a line of its own (trailing padding aside), never "… /status: …"
        await expect(child, r"/new or /reset: start a fresh conversation *\r\n/status: model")
        await expect(child, "you>")
        child.send("/status\r")
        await expect(child, r"Session: [^\r\n]*\r\n")
        await expect(child, "you>")
        child.sendeof()
        await asyncio.to_thread(child.expect, "\\Z|$", timeout=15)
    finally:
        child.close(force=True)
    assert llm.requests == []


async def test_stop_typed_during_a_streamed_reply_stops_it(tmp_path, llm):
    gate = asyncio.Event()
    llm.script(streamed("Once upon a time", " the end came late.", gate=gate))
    child = spawn(["chat", "--config", str(chat_config(tmp_path, llm))], tmp_path)
    try:
        await expect(child, "you>")
        child.send("tell me a story\r")
        await expect(child, "Once upon a time")
        child.send("/stop\r")
        await expect(child, "Stopped.")
        await expect(child, "you>")
        gate.set()
        llm.script(text("Still here."))
        child.send("hello?\r")  # twin: the next message is answered as usual
        await expect(child, "Still here.")
        await expect(child, "you>")
        assert "the end came late" not in child.before
        child.sendeof()
        await asyncio.to_thread(child.expect, "\\Z|$", timeout=15)
    finally:
        child.close(force=True)
    assert len(llm.requests) == 2  # /stop itself was no model call
