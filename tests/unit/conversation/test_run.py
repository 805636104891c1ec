"""The run stage: a scripted agent, no daemon.  Turns publish their progress, a subscriber
makes the model stream, ``stop`` cancels the running turn and nothing else."""

from __future__ import annotations

import asyncio

import pytest

from bot.agent.turn import TurnRequest, TurnResult
from bot.config import ChannelPolicy
from bot.conversation.events import TurnEvents
from bot.conversation.run import Run, keep_typing, live_output
from bot.delivery.previews import Preview, StreamEvent, StreamText
from channels.base import Capabilities, InboundMessage

MSG = InboundMessage(channel="fake", chat_id="c1", sender_id="u1", text="hi", message_id="m1")


class ScriptedAgent:
    """``run_turn`` replays ``events`` to ``on_event``, waits for ``gate`` when given, and
    returns ``text`` (or raises ``fail``)."""

    def __init__(self, *events, text="done", gate=None, fail=None, error=None):
        self.events = events
        self.text = text
        self.gate = gate
        self.fail = fail
        self.error = error
        self.on_event = "unset"
        self.entered = asyncio.Event()

    async def run_turn(self, req, *, on_event=None):
        self.on_event = on_event
        for ev in self.events:
            if on_event is not None:
                on_event(ev)
        self.entered.set()
        if self.gate is not None:
            await self.gate.wait()
        if self.fail is not None:
            raise self.fail
        return TurnResult(text=self.text, to_store=[], error=self.error, turn_id="t")


class FakeChannel:
    capabilities = Capabilities(typing=True, edit=True, max_text=4000)

    def __init__(self, stream=None):
        self.typed = 0
        self.reactions = []
        self.stream = stream

    async def typing(self, chat_id, thread_id=None):
        self.typed += 1

    async def react(self, chat_id, message_id, emoji):
        self.reactions.append((message_id, emoji))

    def live_stream(self, chat_id):
        return self.stream


def req(key="k1"):
    return TurnRequest(session_key=key, user_text="hi", agent="main")


def drain(sub):
    out = []
    while (ev := sub.get_nowait()) is not None:
        out.append(ev)
    return out


async def test_a_watched_turn_streams_and_publishes_in_order():
    agent = ScriptedAgent(
        StreamEvent("text", "Hel"),
        StreamEvent("usage", usage={"prompt_tokens": 1}),
        StreamEvent("tool_start", tool="exec", summary="ls"),
        StreamEvent("tool_end", tool="exec", duration=0.5, ok=False),
        StreamEvent("step"),
        StreamEvent("text", "lo"),
        text="Hello",
    )
    run = Run({"main": agent}, TurnEvents())
    with run.events.subscribe("k1") as sub:
        out = await run.run(req(), MSG, None, None, lambda: None)
        evs = drain(sub)
    assert not out.stopped and out.result.text == "Hello"
    kinds = [e.kind for e in evs]
    assert kinds == ["started", "text", "tool_start", "tool_end", "step", "text", "final"]
    assert evs[3].tool == "exec" and evs[3].duration == 0.5 and evs[3].ok is False
    assert evs[2].summary == "ls" and evs[-1].text == "Hello"
    assert len({e.turn for e in evs}) == 1


async def test_nobody_looking_means_no_streaming():
    agent = ScriptedAgent()
    run = Run({"main": agent}, TurnEvents())
    with run.events.subscribe("another session") as sub:
        await run.run(req(), MSG, None, None, lambda: None)
        assert drain(sub) == []
    assert agent.on_event is None


async def test_an_error_result_is_published_as_error():
    run = Run({"main": ScriptedAgent(text="the model failed", error="boom")}, TurnEvents())
    with run.events.subscribe() as sub:
        await run.run(req(), MSG, None, None, lambda: None)
        assert [(e.kind, e.text) for e in drain(sub)][-1] == ("error", "the model failed")


async def test_a_failing_turn_publishes_error_and_raises():
    run = Run({"main": ScriptedAgent(fail=RuntimeError("broken"))}, TurnEvents())
    with run.events.subscribe() as sub:
        with pytest.raises(RuntimeError):
            await run.run(req(), MSG, None, None, lambda: None)
        assert [(e.kind, e.text) for e in drain(sub)] == [("started", ""), ("error", "broken")]
    assert not run.running("k1")


async def test_stop_cancels_the_running_turn_only():
    gate = asyncio.Event()
    agent = ScriptedAgent(gate=gate)
    run = Run({"main": agent}, TurnEvents())
    assert await run.stop("k1") is False  # nothing runs
    with run.events.subscribe() as sub:
        task = asyncio.create_task(run.run(req(), MSG, None, None, lambda: None))
        await agent.entered.wait()
        assert run.running("k1") and not run.running("k2")
        assert await run.stop("k2") is False
        assert await run.stop("k1") is True
        out = await task
        assert [e.kind for e in drain(sub)] == ["started", "cancelled"]
    assert out.stopped and out.live is None and out.turn
    assert not run.running("k1") and await run.stop("k1") is False


async def test_cancelling_the_caller_is_not_a_stop():
    # a daemon stop cancels the lane's task: that cancellation goes on up
    gate = asyncio.Event()
    agent = ScriptedAgent(gate=gate)
    run = Run({"main": agent}, TurnEvents())
    with run.events.subscribe() as sub:
        task = asyncio.create_task(run.run(req(), MSG, None, None, lambda: None))
        await agent.entered.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert "cancelled" not in [e.kind for e in drain(sub)]


async def test_typing_and_the_ack_reaction():
    ch = FakeChannel()
    pol = ChannelPolicy(reactions="ack")
    gate = asyncio.Event()
    agent = ScriptedAgent(gate=gate)
    run = Run({"main": agent}, TurnEvents())
    task = asyncio.create_task(run.run(req(), MSG, ch, pol, lambda: None))
    await agent.entered.wait()
    await asyncio.sleep(0)
    gate.set()
    await task
    assert ch.typed >= 1 and ch.reactions == [("m1", "👀")]


async def test_keep_typing_survives_a_failing_platform_call():
    class Failing(FakeChannel):
        async def typing(self, chat_id, thread_id=None):
            self.typed += 1
            raise OSError("down")

    ch = Failing()
    task = asyncio.create_task(keep_typing(ch, MSG))
    await asyncio.sleep(0.01)
    task.cancel()
    await task  # ends quietly
    assert ch.typed == 1


def test_live_output_follows_the_channel_and_policy():
    timing = {"interval": 1.0, "clock": lambda: 0.0, "sleep": asyncio.sleep}
    assert live_output(None, None, MSG, **timing) is None
    assert live_output(FakeChannel(), None, MSG, **timing) is None
    off = ChannelPolicy(streaming="off")
    assert live_output(FakeChannel(), off, MSG, **timing) is None
    partial = ChannelPolicy(streaming="partial", reply_to_mode="first")
    prev = live_output(FakeChannel(), partial, MSG, **timing)
    assert isinstance(prev, Preview) and prev.reply_to_id == "m1"
    sink = []
    got = live_output(FakeChannel(stream=lambda k, v: sink.append((k, v))), None, MSG, **timing)
    assert isinstance(got, StreamText)


async def test_a_live_output_gets_the_events_too():
    sink = []
    live = StreamText(lambda k, v: sink.append((k, v)), every=0)
    run = Run({"main": ScriptedAgent(StreamEvent("text", "abc"), text="abc")}, TurnEvents())
    out = await run.run(req(), MSG, None, None, lambda: live)
    assert out.live is live and sink == [("text", "abc")]


async def test_a_turn_runs_on_the_agent_its_request_names():
    main, work = ScriptedAgent(text="main's"), ScriptedAgent(text="work's")
    run = Run({"main": main, "work": work}, TurnEvents())
    work_req = TurnRequest(session_key="agent:work:main", user_text="hi", agent="work")
    assert (await run.run(work_req, MSG, None, None, lambda: None)).result.text == "work's"
    assert (await run.run(req(), MSG, None, None, lambda: None)).result.text == "main's"


async def test_a_turn_naming_no_agent_of_the_daemon_is_refused_not_given_to_another():
    main = ScriptedAgent(text="main's")
    run = Run({"main": main}, TurnEvents())
    with pytest.raises(LookupError, match="'gone'"):
        await run.run(TurnRequest("k", "hi", agent="gone"), MSG, None, None, lambda: None)
    assert main.on_event == "unset" and not run.running("k")  # main never ran it
