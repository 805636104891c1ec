"""The pipeline's other routes in memory (Store(":memory:"), a recording channel, a scripted
agent): a dropped sender, an immediate command on arrival, what recovery skips, a pairing
approval answering the held message, a full disk retried without an apology."""

from __future__ import annotations

import asyncio
import sqlite3
import time

from bot.conversation.pipeline import Conversation
from bot.conversation.lanes import SessionLanes
from bot.delivery.outbox import Outbox
from bot.store import Store
from channels.base import InboundMessage
from tests.unit.conversation.test_pipeline import (
    CFG,
    MemoryChannel,
    ScriptedAgent,
    conv,  # noqa: F401 - the fixture
    dm,
    settle,
    statuses,
)


async def _sent(c: Conversation, n: int) -> list[str]:
    ch = c.channels["telegram"]
    for _ in range(300):
        if len(ch.sent) >= n:
            break
        await asyncio.sleep(0.01)
    return [m.text for m in ch.sent]


async def test_a_group_that_is_not_allowed_is_dropped_unstored(conv):  # noqa: F811
    stranger = InboundMessage(
        channel="telegram", chat_id="-999", sender_id="42", text="hi", chat_type="group"
    )
    await conv.on_inbound(stranger)
    assert statuses(conv) == [] and conv.agent.requests == []


async def test_an_immediate_command_is_answered_on_arrival(conv):  # noqa: F811
    await conv.on_inbound(dm("/stop"))
    await settle(conv)
    assert await _sent(conv, 1) == ["Nothing is running right now."]
    assert statuses(conv) == ["done"] and conv.agent.requests == []


async def test_a_pairing_approval_tells_the_sender_and_answers_the_held_message(conv):  # noqa: F811
    await conv.on_inbound(dm("let me in", sender="77"))
    assert "Pairing code" in (await _sent(conv, 1))[0]
    assert await conv.pairing_approved("telegram", "88") is False  # nothing held
    conv.store.approve("telegram", "77")
    conv.agent.replies.append("Welcome")
    assert await conv.pairing_approved("telegram", "77") is True
    for _ in range(300):
        if "Welcome" in await _sent(conv, 1):
            break
        await asyncio.sleep(0.01)
    sent = await _sent(conv, 1)
    assert sent[-1] == "Welcome" and any(t.startswith("The owner approved you") for t in sent)
    assert "let me in" in conv.agent.requests[0].user_text
    assert statuses(conv) == ["done"]


async def test_an_approval_for_a_sender_no_longer_served_answers_nothing(conv):  # noqa: F811
    await conv.on_inbound(dm("let me in", sender="77"))
    await _sent(conv, 1)
    assert await conv.pairing_approved("telegram", "77") is False  # not in the store
    assert conv.agent.requests == []


async def test_a_full_disk_retries_the_turn_without_an_apology(conv):  # noqa: F811
    conv.agent.replies += [sqlite3.OperationalError("database or disk is full"), "Answered"]
    await conv.on_inbound(dm("hi"))
    assert await _sent(conv, 1) == ["Answered"]  # after the retry, a second later
    assert len(conv.agent.requests) == 2 and statuses(conv) == ["done"]


async def test_recovery_skips_last_runs_api_calls_and_senders_no_longer_served():
    store = Store(":memory:")
    ch = MemoryChannel()
    old_api = dm("from an api client", n="1")
    old_api.api, old_api.timestamp = {"messages": []}, time.time() - 60
    store.add_inbound("telegram", "default", "42", "1", "agent:main:main", old_api.to_json())
    gone = dm("I was allowed once", n="2", sender="99")
    store.add_inbound("telegram", "default", "99", "2", "agent:main:x", gone.to_json())
    outbox = Outbox(store, {"telegram": ch})
    c = Conversation(
        CFG, store, {"main": ScriptedAgent()}, SessionLanes(), {"telegram": ch}, outbox
    )
    try:
        outbox.start(recover=True)
        assert await c.recover() == 1  # the API call is not queued
        for _ in range(100):
            if statuses(c) == ["skipped", "skipped"]:
                break
            await asyncio.sleep(0.01)
        assert statuses(c) == ["skipped", "skipped"]
        assert ch.sent == [] and c.agent.requests == []
    finally:
        c.stop_accepting()
        await outbox.stop(grace=0.1)
        store.close()
