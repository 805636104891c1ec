"""The pipeline end to end in memory: Store(":memory:"), a channel that records what it is
sent, a scripted agent.  No daemon, no network: each route through ``Conversation`` once."""

from __future__ import annotations

import asyncio

import pytest

from bot.agent.turn import TurnResult
from bot.config import parse_config
from bot.conversation.pipeline import Conversation
from bot.delivery.outbox import Outbox
from bot.conversation.lanes import SessionLanes
from bot.store import Store
from channels.base import Capabilities, Channel, InboundMessage

CFG = parse_config(
    {
        "agent": {"name": "Chela"},
        "channels": {"telegram": {"allow_from": ["42"], "groups": ["-100"]}},
    }
)


class MemoryChannel(Channel):
    name = "telegram"
    capabilities = Capabilities(proactive=True, max_text=4000, group_history=50)

    def __init__(self) -> None:
        self.sent: list = []
        self.done: list[str] = []

    async def start(self, sink) -> None:
        pass

    async def stop(self) -> None:
        pass

    async def send(self, msg):
        self.sent.append(msg)
        return [str(len(self.sent))]

    async def turn_done(self, chat_id, message_id):
        self.done.append(message_id)


class ScriptedAgent:
    def __init__(self) -> None:
        self.replies: list = []
        self.requests: list = []
        self.gate: asyncio.Event | None = None

    def tool_names(self, trust):
        return set()

    async def run_turn(self, req, *, on_event=None):
        self.requests.append(req)
        if self.gate is not None:
            await self.gate.wait()
        reply = self.replies.pop(0) if self.replies else "ok"
        if isinstance(reply, Exception):
            raise reply
        user = {"role": "user", "content": req.user_text}
        return TurnResult(
            text=reply,
            to_store=[user, {"role": "assistant", "content": reply}],
            turn_id=f"t{len(self.requests)}",
        )


@pytest.fixture
async def conv():
    store = Store(":memory:")
    ch = MemoryChannel()
    outbox = Outbox(store, {"telegram": ch})
    c = Conversation(
        CFG, store, {"main": ScriptedAgent()}, SessionLanes(), {"telegram": ch}, outbox
    )
    outbox.start(recover=True)
    await c.recover()
    yield c
    c.accepting = False
    await outbox.stop(grace=0.1)
    store.close()


def dm(text, n="1", sender="42"):
    return InboundMessage(
        channel="telegram", chat_id=sender, sender_id=sender, text=text, message_id=n
    )


def group(text, n="1"):
    return InboundMessage(
        channel="telegram",
        chat_id="-100",
        sender_id="42",
        text=text,
        message_id=n,
        chat_type="group",
        sender_name="Alice",
    )


async def settle(c, n=1):
    for _ in range(200):
        if len(c.channels["telegram"].done) >= n:
            return
        await asyncio.sleep(0.01)
    raise AssertionError("the message was not finished")


def statuses(c):
    rows = c.store.db.execute("SELECT status FROM inbound ORDER BY id").fetchall()
    return [r[0] for r in rows]


async def test_a_dm_is_answered_stored_and_finished(conv):
    conv.agent.replies.append("Hello Alice")
    await conv.on_inbound(dm("hi"))
    await settle(conv)
    ch = conv.channels["telegram"]
    assert [m.text for m in ch.sent] == ["Hello Alice"]
    assert statuses(conv) == ["done"]
    key = conv.agent.requests[0].session_key
    roles = [m["role"] for m in conv.store.history(key, limit=10, max_chars=10_000)]
    assert roles == ["user", "assistant"]
    await conv.on_inbound(dm("hi"))  # the same message again: a duplicate, ignored
    await asyncio.sleep(0.05)
    assert len(conv.agent.requests) == 1


async def test_a_group_message_not_addressed_joins_the_history(conv):
    await conv.on_inbound(group("lunch at noon?"))
    await settle(conv)
    assert statuses(conv) == ["history"] and conv.agent.requests == []
    conv.agent.replies.append("Noon works")
    await conv.on_inbound(group("Chela, what do you think?", n="2"))
    await settle(conv, 2)
    assert "lunch at noon?" in conv.agent.requests[0].user_text
    assert conv.channels["telegram"].sent[-1].text == "Noon works"


async def test_a_command_is_answered_without_the_model(conv):
    await conv.on_inbound(dm("/help"))
    await settle(conv)
    assert conv.agent.requests == [] and "/new" in conv.channels["telegram"].sent[0].text
    assert statuses(conv) == ["done"]


async def test_a_failing_turn_apologises(conv):
    conv.agent.replies.append(RuntimeError("broken"))
    await conv.on_inbound(dm("hi"))
    await settle(conv)
    assert conv.channels["telegram"].sent[0].text.startswith("Sorry, something went wrong")
    assert statuses(conv) == ["failed"]


async def test_a_stranger_gets_a_pairing_code(conv):
    await conv.on_inbound(dm("let me in", sender="77"))
    for _ in range(100):
        if conv.channels["telegram"].sent:
            break
        await asyncio.sleep(0.01)
    assert "Pairing code" in conv.channels["telegram"].sent[0].text
    assert statuses(conv) == ["pairing"] and conv.agent.requests == []


async def test_stop_keeps_the_user_message_and_sends_nothing(conv):
    conv.agent.gate = asyncio.Event()
    with conv.events.subscribe() as sub:
        await conv.on_inbound(dm("a long essay please"))
        started = await asyncio.wait_for(sub.get(), 5)
        for _ in range(100):
            if conv.runner.running(started.session_key):
                break
            await asyncio.sleep(0.01)
        assert await conv.stop(started.session_key) is True
        await settle(conv)
        assert (await sub.get()).kind == "cancelled"
    assert conv.channels["telegram"].sent == [] and statuses(conv) == ["done"]
    msgs = conv.store.history(started.session_key, limit=10, max_chars=10_000)
    assert [m["role"] for m in msgs] == ["user"]


async def test_an_api_call_is_planned_committed_with_its_record_or_refused(conv):
    conv.agent.replies.append("hello")
    msg = dm("hi")
    msg.api = {"messages": [{"role": "user", "content": "hi"}]}
    await conv.on_inbound(msg)
    await settle(conv)
    out = conv.channels["telegram"].sent[0]
    assert out.text == "hello" and out.api["finish_reason"] == "stop"
    key = conv.agent.requests[0].session_key
    assert conv.store.get(f"api:{key}")["seen"]
    bad = dm("?", n="2")
    bad.api = {"messages": [{"role": "assistant", "content": "x"}]}
    await conv.on_inbound(bad)
    await settle(conv, 2)
    refused = conv.channels["telegram"].sent[1]
    assert refused.error == "invalid_request" and len(conv.agent.requests) == 1


async def test_messages_stored_before_recovery_are_answered_by_it():
    store = Store(":memory:")
    ch = MemoryChannel()
    outbox = Outbox(store, {"telegram": ch})
    c = Conversation(
        CFG, store, {"main": ScriptedAgent()}, SessionLanes(), {"telegram": ch}, outbox
    )
    try:
        await c.on_inbound(dm("while starting"))
        assert statuses(c) == ["pending"] and ch.sent == []
        outbox.start(recover=True)
        assert await c.recover() == 1
        await settle(c)
        assert [m.text for m in ch.sent] == ["ok"] and statuses(c) == ["done"]
    finally:
        c.accepting = False
        await outbox.stop(grace=0.1)
        store.close()
