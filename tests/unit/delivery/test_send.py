"""One message out through the outbox (bot/delivery/send.py): what the message tool, exec
approvals and scheduled turns are told after the first attempt."""

from __future__ import annotations

import pytest

from bot.delivery.outbox import Outbox
from bot.delivery.send import deliver, deliver_stored, message_tool, notifier, to_route
from bot.store import Store
from tests.unit.delivery.memory import ScriptedChannel, refused


# a regression that leaves a message unsettled fails in seconds, not at the suite's 180 s
pytestmark = pytest.mark.timeout(10)


@pytest.fixture
async def env():
    store = Store(":memory:")
    ch = ScriptedChannel()
    box = Outbox(store, {"telegram": ch}, retry_initial=0.001, retry_max=0.002)
    box.start(recover=False)
    yield box, ch, store
    await box.stop(grace=0.1)
    store.close()


@pytest.mark.parametrize(
    ("route", "expected"),
    [
        ({"chat_id": "42"}, ("42", "default", None)),
        ({"chat_id": "42", "account": "", "thread_id": None}, ("42", "default", None)),
        ({"chat_id": "-1", "account": "work", "thread_id": "7"}, ("-1", "work", "7")),
    ],
)
def test_to_route(route, expected):
    out = to_route(route, "text")
    assert (out.chat_id, out.account, out.thread_id) == expected
    assert out.text == "text"


@pytest.mark.parametrize(
    ("script", "status"),
    [
        ([], "sent"),
        ([ConnectionResetError("reset")], "queued"),
        ([refused()], "failed"),
    ],
)
async def test_deliver_returns_the_first_attempt(env, script, status):
    box, ch, _store = env
    ch.script = list(script)
    assert await deliver(box, "telegram", to_route({"chat_id": "42"}, "x"), kind="cron") == status
    assert ch.sent[0].text == "x"


async def test_deliver_stored_hands_rows_over_and_waits_for_each(env):
    box, ch, store = env
    assert await deliver_stored(box, []) == []
    ids = store.add_outbox(
        "telegram", [{"chat_id": "42", "text": "a"}, {"chat_id": "9", "text": "b"}], kind="reply"
    )
    ch.script = [["1"], refused()]
    assert await deliver_stored(box, ids) == ["sent", "failed"]
    assert sorted(m.text for m in ch.sent) == ["a", "b"]


@pytest.mark.parametrize(
    ("script", "ok"), [([], True), ([ConnectionResetError()], True), ([refused()], False)]
)
async def test_notifier_is_false_only_when_refused_for_good(env, script, ok):
    box, ch, _store = env
    ch.script = list(script)
    notify = notifier(box, kind="approval")
    assert await notify({"channel": "telegram", "chat_id": "42", "thread_id": "3"}, "ok?") is ok
    assert (ch.sent[0].text, ch.sent[0].thread_id) == ("ok?", "3")


@pytest.mark.parametrize(
    ("channel", "script", "told"),
    [
        ("telegram", [], "sent"),
        ("telegram", [ConnectionResetError()], "queued: telegram did not accept it yet"),
        ("telegram", [refused()], "Error: the message could not be delivered"),
        ("slack", [], "Error: channel 'slack' is not running (running: telegram)"),
    ],
)
async def test_the_message_tool_tells_the_model_what_happened(env, channel, script, told):
    box, ch, _store = env
    ch.script = list(script)
    result = await message_tool(box)(channel, "42", "hello")
    assert result.startswith(told)
    assert len(ch.sent) == (0 if channel == "slack" else 1)


async def test_the_message_tool_with_no_channel_running_says_none():
    store = Store(":memory:")
    box = Outbox(store, {})
    assert await message_tool(box)("telegram", "42", "x") == (
        "Error: channel 'telegram' is not running (running: none)"
    )
    store.close()
