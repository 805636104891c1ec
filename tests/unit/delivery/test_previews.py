"""Live output (bot/delivery/previews.py): what a preview may show of half-written text, a chat
preview driven by an injected clock and sleep, and the HTTP API's append-only text stream."""

from __future__ import annotations

import asyncio

import pytest

from bot.delivery.previews import Preview, StreamEvent, StreamText, visible_text
from channels.base import OutboundMessage
from tests.unit.delivery.memory import ScriptedChannel, refused, until


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        ("Hello <thi", "Hello"),  # a <think> being written
        ("a<think", "a"),
        ("Hello <b", "Hello <b"),  # no tag of ours
        ('Hi <tool_call>{"a":1}', "Hi"),
        ("Hi [[reply_to", "Hi"),  # a reply tag still open
        ("Hi\n[[tag", "Hi"),
        ("Hi [image", "Hi"),  # a media marker still open
        ("Hi [x] done", "Hi [x] done"),
        ("Hi [" + "a" * 400, "Hi [" + "a" * 400),  # too long to be a marker: text
        ('{"action": "no_', ""),
        ('{"x": "no_reply"}', ""),
        ("NO_RE", ""),
        ("**", ""),  # may open a wrapped token
        ("NO_REPLY", ""),
        ("HEARTBEAT_OK", ""),
        ("Well NO_", "Well"),  # the last word may still become a token
        ("Done. HEARTB", "Done."),
        ("Well NO_ ", "Well NO_"),  # ... not once a space follows it
        ("<think>plan</think>Answer", "Answer"),
        ("<think>still", ""),
        ("reasoning**NO_RE", "reasoning"),  # glued markup goes with a token
        ("**bold**NO", "**bold**"),  # markup that closes a span stays
        ("**bold**", "**bold**"),
        ("", ""),
    ],
)
def test_visible_text(raw, shown):
    assert visible_text(raw) == shown


class Clock:
    def __init__(self) -> None:
        self.now = 100.0
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def text(t: str) -> StreamEvent:
    return StreamEvent("text", text=t)


# a regression that leaves a message unsettled fails in seconds, not at the suite's 180 s
pytestmark = pytest.mark.timeout(10)


@pytest.fixture
def ch():
    return ScriptedChannel(edit=True)


@pytest.fixture
def clock():
    return Clock()


def preview(ch, clock, **kw) -> Preview:
    return Preview(ch, "42", interval=1.0, clock=clock, sleep=clock.sleep, **kw)


async def test_the_first_visible_text_is_sent_then_edited_one_interval_later(ch, clock):
    p = preview(ch, clock)
    p.push(text("NO_"))  # nothing visible yet
    p.push(StreamEvent("usage", usage={"prompt": 1}))
    p.push(StreamEvent("tool_start", tool="exec"))
    await asyncio.sleep(0)
    assert ch.calls == []
    p.push(text("RTH pole. Hello"))
    await until(lambda: len(ch.calls) == 1)
    clock.now += 0.25
    p.push(text(" world"))
    await until(lambda: len(ch.calls) == 2)
    assert ch.calls == [
        ("send", "42", None, "NO_RTH pole. Hello"),
        ("edit", "42", "p1", "NO_RTH pole. Hello world"),
    ]
    assert clock.slept == [0.75]
    assert [(t, op) for t, op, _ in p.calls] == [(100.0, "send"), (101.0, "edit")]
    assert await p.finish() == "p1"


async def test_unchanged_text_is_not_sent_again_and_a_step_starts_afresh(ch, clock):
    p = preview(ch, clock)
    p.push(text("One"))
    await until(lambda: len(ch.calls) == 1)
    p.push(text(" NO_"))  # visible text unchanged: "One"
    p.push(StreamEvent("step"))
    p.push(text("Two"))
    await until(lambda: len(ch.calls) == 2)
    assert [c[3] for c in ch.calls] == ["One", "Two"]
    await p.finish()


async def test_long_text_is_cut_with_an_ellipsis(ch, clock):
    p = preview(ch, clock, max_chars=5)  # at least 16
    p.push(text("abcdefghij " * 4))
    await until(lambda: len(ch.calls) == 1)
    shown = ch.calls[0][3]
    assert len(shown) == 16 and shown.endswith("…") and shown.startswith("abcdefghij")
    await p.finish()


async def test_a_refused_edit_stops_the_preview_and_settle_deletes_it(ch, clock):
    p = preview(ch, clock)
    p.push(text("Hello"))
    await until(lambda: len(ch.calls) == 1)
    ch.fail_preview = refused("message can't be edited")
    p.push(text(" there"))
    await until(lambda: p.failed)
    p.push(text(" more"))  # ignored
    out = OutboundMessage(chat_id="42", text="Hello there more")
    await p.settle([out])
    assert out.edit_id == ""
    assert [c[0] for c in ch.calls] == ["send", "edit", "delete"]


@pytest.mark.parametrize(
    ("out", "replaced"),
    [
        (OutboundMessage(chat_id="42", text="Final"), True),
        (OutboundMessage(chat_id="42", text="  "), False),  # media only
        (OutboundMessage(chat_id="7", text="Final"), False),
        (OutboundMessage(chat_id="42", text="Final", thread_id="t"), False),
        (OutboundMessage(chat_id="42", text="Final", reply_to_id="9"), False),
        (None, False),  # a silent reply
    ],
)
async def test_settle_replaces_the_preview_only_in_the_same_place(ch, clock, out, replaced):
    p = preview(ch, clock)
    p.push(text("Draft"))
    await until(lambda: len(ch.calls) == 1)
    await p.settle([out] if out else [])
    if out is not None:
        assert (out.edit_id == "p1") is replaced
    assert [c[0] for c in ch.calls] == (["send"] if replaced else ["send", "delete"])
    assert p.message_id == ("p1" if replaced else None)


async def test_nothing_shown_means_nothing_to_settle_or_delete(ch, clock):
    p = preview(ch, clock)
    await p.settle([OutboundMessage(chat_id="42", text="x")])
    await p.delete()
    assert ch.calls == [] and await p.finish() is None


async def test_a_failed_delete_is_logged_and_recorded(ch, clock, caplog):
    p = preview(ch, clock)
    p.push(text("Draft"))
    await until(lambda: len(ch.calls) == 1)
    ch.fail_delete = refused("gone")
    await p.delete()
    assert "could not delete the preview p1" in caplog.text
    assert [op for _, op, _ in p.calls] == ["send", "delete"]


async def test_finish_cancels_a_preview_waiting_out_its_interval(ch):
    hold = asyncio.Event()
    slept: list[float] = []

    async def sleep(s):
        slept.append(s)
        await hold.wait()  # never set: the interval never ends

    p = Preview(ch, "42", interval=1.0, clock=lambda: 0.0, sleep=sleep)
    p.push(text("One"))
    await until(lambda: len(ch.calls) == 1)
    p.push(text(" two"))
    await until(lambda: slept == [1.0])
    assert await p.finish() == "p1"
    p.push(text(" three"))  # closed: ignored
    assert [c[0] for c in ch.calls] == ["send"]


async def test_finish_waits_for_a_call_in_flight_without_cancelling_it(ch, clock):
    gate = asyncio.Event()
    real = ch.send_preview

    async def slow(*a, **kw):
        await gate.wait()
        return await real(*a, **kw)

    ch.send_preview = slow
    p = preview(ch, clock)
    p.push(text("Hello"))
    await until(lambda: p._in_call)
    finishing = asyncio.create_task(p.finish())
    await asyncio.sleep(0)
    assert not finishing.done()
    gate.set()
    assert await finishing == "p1"
    assert [c[0] for c in ch.calls] == ["send"]


async def test_a_preview_that_cannot_be_sent_stops_quietly(ch, clock):
    ch.fail_preview = refused("no previews here")
    p = preview(ch, clock)
    p.push(text("Hello"))
    await until(lambda: p.failed)
    assert await p.finish() is None


# ------------------------------------------------------------------------- HTTP stream
def test_the_stream_outside_a_loop_sends_each_decided_delta_at_once():
    got: list = []
    s = StreamText(lambda kind, v: got.append((kind, v)))
    s.push(StreamEvent("usage", usage={"prompt": 3}))
    s.push(text("Hel"))
    s.push(text("lo NO_"))  # "NO_" held back
    s.push(StreamEvent("tool_end", tool="exec"))
    s.push(text("PE"))  # "NO_PE" is no token: released
    s.push(StreamEvent("step"))
    s.push(StreamEvent("step"))  # nothing sent since the last step: no second marker
    s.push(text("Next"))
    s.close()
    assert got == [
        ("usage", {"prompt": 3}),
        ("text", "Hel"),
        ("text", "lo"),
        ("text", " NO_PE"),
        ("step", ""),
        ("text", "Next"),
    ]


async def test_the_stream_in_a_loop_gathers_deltas_until_the_timer():
    got: list = []
    s = StreamText(lambda kind, v: got.append((kind, v)), every=3600.0)
    s.push(text("A"))  # the first at once
    s.push(text("B"))
    s.push(text("C"))  # gathered behind the timer
    assert got == [("text", "A")]
    s.close()
    assert got == [("text", "A"), ("text", "BC")]


async def test_the_stream_timer_flushes_by_itself():
    got: list = []
    s = StreamText(lambda kind, v: got.append((kind, v)), every=0.001)
    s.push(text("A"))
    s.push(text("B"))
    await until(lambda: len(got) == 2)
    assert got == [("text", "A"), ("text", "B")]


def test_the_stream_never_takes_back_what_it_sent():
    got: list = []
    s = StreamText(lambda kind, v: got.append((kind, v)))
    s.push(text("Answer [x"))  # "[x" held back
    s.push(text("] <think"))  # visible "Answer [x]" continues what was sent
    s.push(text(">hidden"))
    s.close()
    assert "".join(v for k, v in got if k == "text") == "Answer [x]"
