"""A turn is stoppable while it is prepared (its attachments fetched and read): ``Run.stop``
cancels the preparation and ``preparing`` raises ``Stopped``; a daemon stop still propagates;
a finished preparation hands its value on and frees the session.  And a stopped turn's reply:
nothing for a chat, an empty answer with finish_reason "stop" for an HTTP API caller."""

from __future__ import annotations

import asyncio

import pytest

from bot.agent.turn import TurnRequest
from bot.config import parse_config
from bot.conversation.events import TurnEvents
from bot.conversation.reply import speaker, stopped_reply
from bot.conversation.run import Run, Stopped
from bot.conversation.types import ApiTurn
from channels.base import InboundMessage

MSG = InboundMessage(channel="http", chat_id="req-1", sender_id="bob", text="hi", message_id="1")


async def _slow(entered: asyncio.Event) -> str:
    entered.set()
    await asyncio.sleep(30)
    return "never"


async def test_stop_during_preparation_raises_stopped_and_frees_the_session():
    run, entered = Run(agents={}, events=TurnEvents()), asyncio.Event()
    prepared = asyncio.ensure_future(run.preparing("k", "bob", _slow(entered)))
    await entered.wait()
    assert run.running("k") and run.started_by("k") == "bob"
    assert await run.stop("k") is True
    with pytest.raises(Stopped):
        await prepared
    assert not run.running("k") and run.started_by("k") is None
    assert await run.stop("k") is False


async def test_a_finished_preparation_hands_its_value_on():
    run = Run(agents={}, events=TurnEvents())

    async def quick() -> str:
        return "the user turn"

    assert await run.preparing("k", "bob", quick()) == "the user turn"
    assert not run.running("k")


async def test_a_daemon_stop_during_preparation_is_not_a_stop():
    run, entered = Run(agents={}, events=TurnEvents()), asyncio.Event()
    outer = asyncio.ensure_future(run.preparing("k", "bob", _slow(entered)))
    await entered.wait()
    outer.cancel()  # the lane's task is cancelled: the daemon stops
    with pytest.raises(asyncio.CancelledError):
        await outer
    assert not run.running("k")


def test_a_stopped_turns_reply():
    assert stopped_reply(MSG, None).outs == ()
    (out,) = stopped_reply(MSG, ApiTurn(stateful=True)).outs
    assert (out.chat_id, out.text, out.error) == ("req-1", "", "")
    assert out.api == {
        "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
        "tool_calls": [],
        "finish_reason": "stop",
    }


def test_speech_only_with_a_speech_model():
    req = TurnRequest(session_key="k", user_text="hi")
    assert speaker(parse_config({}), None, req, "t1") is None
    cfg = parse_config({"media": {"tts_model": "openai/tts-1"}})
    assert callable(speaker(cfg, None, req, "t1"))
