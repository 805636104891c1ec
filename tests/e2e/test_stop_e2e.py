"""Turns are cancellable and observable (issue 24 item 4), through the real daemon, real
python-telegram-bot against the fake Bot API, and the fake LLM.

``Conversation.stop(key)`` cancels the session's running turn: the user message is kept,
no partial answer is stored or sent, the live preview goes, and the next message is
answered as usual.  Turn progress is published on ``conversation.events``."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from tests.e2e import eventually, make_config, running, telegram_section
from tests.e2e.harness import settled, tg_taken
from tests.fakes.llm import streamed, text, tool_calls


def tg_config(tmp_path, llm, tg, **kw):
    return make_config(tmp_path, llm, channels=telegram_section(tg, **kw))


def history(d, key):
    return d.store.history(key, limit=100, max_chars=1_000_000)


async def _started(sub):
    ev = await asyncio.wait_for(sub.get(), 15)
    assert ev.kind == "started"
    return ev.session_key


async def test_stop_mid_turn_keeps_the_user_message_and_sends_nothing(tmp_path, llm, tg):
    gate = asyncio.Event()  # the model writes a first chunk, then stalls until stopped
    llm.script(streamed("Here is a long ", "essay that never ends", gate=gate))
    async with running(tg_config(tmp_path, llm, tg, streaming="partial")) as d:
        conv = d.conversation
        with conv.events.subscribe() as sub:
            tg.inject_message(42, "write me an essay", from_id=42, username="alice")
            key = await _started(sub)
            # the first chunk reached the chat as a live preview
            await tg.wait_for_sent(1, timeout=15)
            assert await conv.stop(key) is True
            kinds = [ev.kind async for ev in _until(sub, "cancelled")]
        assert kinds[-1] == "cancelled" and "final" not in kinds
        await eventually(lambda: d.store.inbound_with_status("done"))
        msgs = history(d, key)
        assert [m["role"] for m in msgs] == ["user"]
        assert "write me an essay" in msgs[0]["content"]
        # the preview was deleted, and nothing else was sent
        await tg.wait_for_call("deleteMessage", 1, timeout=5)
        await settled(d, tg_taken(tg))
        assert len(tg.sent) == 1 and not tg.calls_of("editMessageText")[1:]
        assert await conv.stop(key) is False  # nothing runs now
        gate.set()


async def test_after_a_stop_the_next_message_is_answered(tmp_path, llm, tg):
    # the twin: the session's lane is free again and the stopped turn's user message is in
    # the next turn's history, without an answer
    gate = asyncio.Event()
    llm.script(streamed("never ", "finished", gate=gate), text("Here you are"))
    async with running(tg_config(tmp_path, llm, tg)) as d:
        with d.conversation.events.subscribe() as sub:
            tg.inject_message(42, "first question", from_id=42, username="alice")
            key = await _started(sub)
            await llm.wait_for_requests(1, timeout=15)
            assert await d.conversation.stop(key) is True
        gate.set()
        tg.inject_message(42, "second question", from_id=42, username="alice")
        sent = await tg.wait_for_sent(1, timeout=15)
        assert sent[0].visible_text == "Here you are"
        roles = [m["role"] for m in history(d, key)]
        assert roles == ["user", "user", "assistant"]
    second = llm.requests[1]["messages"]
    contents = [m.get("content") or "" for m in second]
    assert any("first question" in c for c in contents)
    assert not any("never finished" in c for c in contents)


async def test_events_of_a_dm_arrive_in_order(tmp_path, llm, tg):
    llm.script(text("Hello Alice"))
    async with running(tg_config(tmp_path, llm, tg)) as d:
        with d.conversation.events.subscribe() as sub:
            tg.inject_message(42, "hi", from_id=42, username="alice")
            await tg.wait_for_sent(1, timeout=15)
            evs = [ev async for ev in _until(sub, "final")]
    kinds = [ev.kind for ev in evs]
    assert kinds[0] == "started" and kinds[-1] == "final"
    assert "text" in kinds  # a subscriber makes the model stream: deltas arrive
    assert "".join(ev.text for ev in evs if ev.kind == "text") == "Hello Alice"
    assert evs[-1].text == "Hello Alice"
    assert len({ev.turn for ev in evs}) == 1 and len({ev.session_key for ev in evs}) == 1


async def _until(sub, kind):
    while True:
        ev = await asyncio.wait_for(sub.get(), 15)
        yield ev
        if ev.kind == kind:
            return


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
    except OSError:
        return False
    return state != "Z"


async def test_stop_kills_the_command_the_turn_is_running(tmp_path, llm, tg):
    # the owner's command runs on the host (sandbox off): its pid is a real one
    llm.script(
        tool_calls([("exec", {"command": "echo $$ > pid.txt; exec sleep 60"})]), text("never")
    )
    tools = {"enabled": ["exec"], "exec": {"security": "full", "sandbox": "off"}}
    cfg = make_config(tmp_path, llm, channels=telegram_section(tg), tools=tools)
    pid_file = Path(cfg.agent.workspace) / "pid.txt"
    async with running(cfg) as d:
        with d.conversation.events.subscribe() as sub:
            tg.inject_message(42, "run the long job", from_id=42, username="alice")
            key = await _started(sub)
            await eventually(lambda: pid_file.exists() and pid_file.read_text().strip())
            pid = int(pid_file.read_text())
            assert alive(pid)
            assert await d.conversation.stop(key) is True
        await eventually(lambda: not alive(pid), timeout=5)
        await settled(d, tg_taken(tg))
        assert tg.sent == [] and len(llm.requests) == 1
    assert os.path.exists(pid_file)
