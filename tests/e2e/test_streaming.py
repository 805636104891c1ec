"""Streaming (SPEC §12): litellm streams through the tool loop; the HTTP API's
``stream: true`` forwards tokens as they arrive; chat channels with
``streaming = "partial"`` show one live preview that the final reply replaces.

The chat tests run the daemon against the wire-level fakes (python-telegram-bot,
discord.py, slack-sdk against tests/fakes, litellm against tests/fakes/llm.py streaming
SSE) and check the peers' reported bugs: the preview left next to the final reply
(OpenClaw #33492, nanobot #1692/#2235), a late preview edit overwriting the final one
(OpenClaw #7123), and edits flooding the chat.  Time is an injected fake clock, so the
"at most one edit per second" check needs no sleeps."""

from __future__ import annotations

import asyncio
import itertools
import json
from typing import Any

import pytest

from bot.model import Completion, LLMClient, LLMError
from bot.delivery import StreamEvent, StreamText, visible_text
from tests.e2e import eventually, make_config, running, telegram_section
from tests.fakes.llm import error, streamed, text, tool_calls, usage
from tests.model_paths import model_path  # noqa: F401 - the fixture, used below

# every test here runs on both model paths (SPEC §12: one contract, two paths)
pytestmark = pytest.mark.usefixtures("model_path")

CHAT = 42


class FakeClock:
    """Monotonic time that moves only when the preview sleeps (the throttle's wait)."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.now += seconds
        await asyncio.sleep(0)


def spy_preview_calls(ch: Any, clock: FakeClock) -> list[tuple[float, str, str]]:
    """Record (fake time, call, text) of every preview call the adapter makes; the calls
    themselves go to the fake platform unchanged."""
    log: list[tuple[float, str, str]] = []
    for name in ("send_preview", "edit_preview", "delete_message"):
        orig = getattr(ch, name)

        async def wrapped(*a: Any, _orig: Any = orig, _name: str = name, **kw: Any) -> Any:
            shown = a[1] if _name == "send_preview" else a[2] if _name == "edit_preview" else ""
            log.append((clock.now, _name, shown))
            return await _orig(*a, **kw)

        setattr(ch, name, wrapped)
    return log


def assert_throttled(log: list[tuple[float, str, str]], interval: float = 1.0) -> None:
    times = [t for t, name, _ in log if name in ("send_preview", "edit_preview")]
    assert all(b - a >= interval - 1e-9 for a, b in itertools.pairwise(times)), times


def live_stream_hook(count_calls: Any):
    """A fake-LLM stream hook: before chunk i, wait until the platform has seen i preview
    calls (the preview kept up), so every chunk shows up as one edit."""

    async def hook(i: int, piece: str) -> None:
        if i:
            await eventually(lambda: count_calls() >= i, timeout=10)

    return hook


def started(d: Any, clock: FakeClock, channel: str) -> list[tuple[float, str, str]]:
    d.conversation.preview_clock = clock
    d.conversation.preview_sleep = clock.sleep
    return spy_preview_calls(d.channels[channel], clock)


CHUNKS = ["Hello", " there,", " this is", " **streamed**", " text."]
RAW = "".join(CHUNKS)


# ------------------------------------------------------------------------- the filter
@pytest.mark.parametrize(
    "raw",
    [
        "N",
        "NO_",
        "no_rep",
        "NO_REPL",
        "NO_REPLY",
        "**NO_RE",
        " NO_REPLY ",
        "HEART",
        "HEARTBEAT_OK",
        '{"action": "NO_',
        '{"action":"NO_REPLY"}',
        "<thi",
        "<think>the secret plan",
        "[[reply_to_cur",
        "<tool_call>{",
    ],
)
def test_visible_text_shows_nothing_that_may_still_be_silent_or_hidden(raw):
    assert visible_text(raw) == ""


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        ("Hello there", "Hello there"),  # the twin: ordinary text is shown as it comes
        ("No problem", "No problem"),
        ("Nothing", "Nothing"),
        ("Done. NO_", "Done."),
        ("Done.\n\nNO_REPLY", "Done."),
        ("All fine HEARTBEAT_", "All fine"),
        ("Hi [[reply_to_current]] there", "Hi there"),
        ("Hi [[reply_to_cur", "Hi"),
        ("See [IMAGE:/tmp/a.p", "See"),
        ("See [IMAGE:/tmp/a.png] and more", "See and more"),
        ("<think>plan</think>Answer", "Answer"),
        ("<think>plan</think>Ans<thi", "Ans"),
        ('Checking.<tool_call>{"name": "read"', "Checking."),
        ("Checking. <tool_c", "Checking."),
        ("a [link](http://x.test/) b", "a [link](http://x.test/) b"),
        ("list[0] is\nnext", "list[0] is\nnext"),
        ("x = a[0", "x = a"),  # held until the bracket closes (it may be a marker)
    ],
)
def test_visible_text_applies_the_final_reply_rules_to_the_decided_part(raw, shown):
    assert visible_text(raw) == shown


def test_stream_text_sends_only_continuations_and_marks_steps():
    got: list[tuple[str, Any]] = []
    st = StreamText(lambda kind, value: got.append((kind, value)))
    for piece in ["NO_", "pe, ", "it [[reply_to_cur", "rent]] works"]:
        st.push(StreamEvent("text", piece))
    st.push(StreamEvent("usage", usage={"prompt_tokens": 3}))
    st.push(StreamEvent("step"))
    st.push(StreamEvent("text", "next"))
    texts = [v for k, v in got if k == "text"]
    assert "".join(texts[:-1]) == "NO_pe, it works"
    assert texts[0] == "NO_pe,"  # "NO_" alone was never sent: it might have been NO_REPLY
    assert ("usage", {"prompt_tokens": 3}) in got
    assert got[-2:] == [("step", ""), ("text", "next")]


# -------------------------------------------------------------------------- the model
async def test_llm_stream_assembles_tool_call_deltas_and_usage(llm):
    """The streamed call returns the Completion the plain call returns: content deltas
    as they arrive, tool-call deltas assembled, usage from the final chunk."""
    calls = [("read", {"path": "a.txt"}), ("exec", {"command": "ls -la /tmp"})]
    llm.script(
        tool_calls(calls, content="Let me look at both.", usage=usage(21, 9)),
        tool_calls(calls, content="Let me look at both.", usage=usage(21, 9)),
        streamed("Hel", "lo ", "world", usage=usage(30, 3)),
    )
    client = LLMClient("openai/fake-model", api_base=llm.base_url, api_key="sk-test")
    msgs = [{"role": "user", "content": "hi"}]
    plain = await client.complete(msgs)
    deltas: list[str] = []
    live = await client.complete(msgs, on_delta=deltas.append)
    assert llm.requests[1]["stream"] is True
    assert llm.requests[1]["stream_options"] == {"include_usage": True}
    assert "stream" not in llm.requests[0]
    assert [(c.name, json.loads(c.arguments)) for c in live.tool_calls] == calls
    assert [(c.name, c.arguments) for c in live.tool_calls] == [
        (c.name, c.arguments) for c in plain.tool_calls
    ]
    assert live.text == plain.text == "Let me look at both." == "".join(deltas)
    assert (
        live.usage
        == plain.usage
        == {
            "prompt_tokens": 21,
            "completion_tokens": 9,
            "total_tokens": 30,
        }
    )
    assert live.raw_finish_reason == "tool_calls"
    got = [x async for x in client.stream(msgs)]
    assert got[:3] == ["Hel", "lo ", "world"]
    done = got[3]
    assert isinstance(done, Completion)
    assert done.text == "Hello world" and done.usage["completion_tokens"] == 3


async def test_llm_stream_falls_over_before_the_first_delta_but_not_after(llm):
    from tests.fakes.llm import FakeLLM

    def chain(backup: Any) -> LLMClient:
        return LLMClient(
            "openai/fake-model",
            api_base=llm.base_url,
            api_key="sk-test",
            max_retries=1,
            backoff_base=0.01,
            fallbacks=[_target(backup)],
        )

    async with FakeLLM() as backup:
        llm.script(error(503), error(503))
        backup.script(streamed("from ", "the fallback"))
        deltas: list[str] = []
        comp = await chain(backup).complete(
            [{"role": "user", "content": "a"}], on_delta=deltas.append
        )
        assert comp.text == "from the fallback" and deltas == ["from ", "the fallback"]
        assert comp.model == "openai/backup" and len(llm.requests) == 2  # retried, then fell over

        # the primary breaks off after its first chunk: the user saw part of that answer,
        # so neither a retry nor another model starts over
        llm.script(streamed("half an ", "answer", cut_after=1))
        backup.script(streamed("never asked"))
        deltas.clear()
        with pytest.raises(LLMError) as exc:
            await chain(backup).complete([{"role": "user", "content": "b"}], on_delta=deltas.append)
        assert deltas == ["half an "]
        assert "broke off" in exc.value.user_message
        assert len(llm.requests) == 3 and len(backup.requests) == 1


def _target(fake: Any) -> Any:
    from bot.model import ModelTarget

    return ModelTarget("openai/backup", fake.base_url, "sk-backup", "agent.fallbacks[0]")


# ----------------------------------------------------------------------- Telegram
def tg_cfg(tmp_path, llm, tg, *, agent: dict | None = None, **kw):
    extra: dict[str, Any] = {"channels": telegram_section(tg, streaming="partial", **kw)}
    if agent:
        extra["agent"] = agent
    return make_config(tmp_path, llm, **extra)


def tg_preview_calls(tg) -> int:
    return len(tg.calls_of("sendMessage")) + len(tg.calls_of("editMessageText"))


def tg_alive(tg, chat: int = CHAT) -> list[dict]:
    """The bot's messages that still exist in the chat."""
    return [m for (c, _), m in tg.messages.items() if c == chat and m["from"]["id"] == tg.bot_id]


async def test_telegram_preview_is_edited_in_place_then_becomes_the_final_reply(tmp_path, llm, tg):
    clock = FakeClock()
    llm.stream_hook = live_stream_hook(lambda: tg_preview_calls(tg))
    llm.script(streamed(*CHUNKS))
    async with running(tg_cfg(tmp_path, llm, tg)) as d:
        log = started(d, clock, "telegram")
        tg.inject_message(CHAT, "hi", from_id=CHAT)
        await tg.wait_for(lambda: any("<b>streamed</b>" in (e or "") for e in _tg_edits(tg)), 15)
        await asyncio.sleep(0.3)  # anything late would land now
    sends = tg.calls_of("sendMessage")
    assert len(sends) == 1, sends  # one message, never a second bubble
    assert sends[0]["text"] == "Hello" and "parse_mode" not in sends[0]  # plain preview
    edits = tg.calls_of("editMessageText")
    assert len(edits) >= 4  # a preview edit per chunk, then the final reply
    previews, final = edits[:-1], edits[-1]
    assert [e["text"] for e in previews[:3]] == [
        "Hello there,",
        "Hello there, this is",
        "Hello there, this is **streamed**",
    ]
    assert all(RAW.startswith(e["text"]) and "parse_mode" not in e for e in previews)
    # the final formatted reply replaced the preview, and nothing came after it
    assert final["parse_mode"] == "HTML"
    assert final["text"] == "Hello there, this is <b>streamed</b> text."
    assert final["message_id"] == tg.sent[0].message_id
    ops = [c for m, c in tg.calls if m in ("sendMessage", "editMessageText", "deleteMessage")]
    assert ops[-1] is final
    alive = tg_alive(tg)
    assert len(alive) == 1 and alive[0]["text"] == "Hello there, this is streamed text."
    assert_throttled(log)
    assert [name for _, name, _ in log].count("send_preview") == 1


async def test_heartbeats_never_stream_even_on_a_streaming_channel(tmp_path, llm, tg):
    """A chat turn on the channel streams (the twin); the heartbeat after it does not:
    no stream request, no preview, only its final alert."""
    cfg = make_config(
        tmp_path,
        llm,
        channels=telegram_section(tg, streaming="partial"),
        heartbeat={"every": "24h"},
    )
    cfg.agent.workspace.mkdir(parents=True, exist_ok=True)
    (cfg.agent.workspace / "HEARTBEAT.md").write_text("# Checks\n- the inbox\n")
    async with running(cfg) as d:
        llm.script(streamed("hel", "lo"))
        tg.inject_message(CHAT, "hi", from_id=CHAT)
        await tg.wait_for(lambda: "hello" in [m["text"] for m in tg_alive(tg)], 15)
        await eventually(lambda: not d.lanes.busy("agent:main:main"))
        n_calls = len(tg.calls)
        llm.script(streamed("The build", " is broken", " since 09:00."))
        out = await d.scheduled.heartbeat()
        assert out.status == "delivered"
        await tg.wait_for_sent(2, timeout=10)
        await asyncio.sleep(0.3)
    assert llm.requests[0].get("stream") is True
    assert "stream" not in llm.requests[1]
    after = [m for m, _ in tg.calls[n_calls:] if "essage" in m]
    assert after == ["sendMessage"]
    assert tg.sent[1].visible_text == "The build is broken since 09:00."


def _tg_edits(tg) -> list[str]:
    return [e.get("text") for e in tg.calls_of("editMessageText")]


async def test_telegram_a_late_preview_edit_never_lands_after_the_final_reply(tmp_path, llm, tg):
    """OpenClaw #7123: a preview edit still in flight when the turn ends must not
    overwrite the final reply.  The fake holds the preview's edit for a while; the final
    edit (not held) is only sent once it has landed."""
    clock = FakeClock()
    llm.stream_hook = live_stream_hook(lambda: tg_preview_calls(tg))
    # the last chunk comes while the preview's edit of the second is in flight
    llm.script(streamed("Hello", " there,", " this is **streamed** text."))
    tg.edit_delays = [0.5]  # the preview's edit is slow; the final edit is not
    async with running(tg_cfg(tmp_path, llm, tg)) as d:
        started(d, clock, "telegram")
        tg.inject_message(CHAT, "hi", from_id=CHAT)
        await tg.wait_for(lambda: len(tg.sent) == 1 and len(tg.sent[0].edits) == 2, 15)
        await asyncio.sleep(0.8)
    assert tg.sent[0].edits == ["Hello there,", "Hello there, this is <b>streamed</b> text."]
    assert [m["text"] for m in tg_alive(tg)] == ["Hello there, this is streamed text."]


async def test_telegram_without_streaming_sends_one_message_and_no_preview(tmp_path, llm, tg):
    """The twin: streaming off (the default) sends the final reply only."""
    llm.script(streamed(*CHUNKS))
    cfg = make_config(tmp_path, llm, channels=telegram_section(tg))
    async with running(cfg):
        tg.inject_message(CHAT, "hi", from_id=CHAT)
        await tg.wait_for_sent(1, timeout=15)
        await asyncio.sleep(0.3)
    assert "stream" not in llm.requests[0]
    assert len(tg.calls_of("sendMessage")) == 1 and tg.calls_of("editMessageText") == []
    assert tg.sent[0].visible_text == "Hello there, this is streamed text."


async def slow(i: int, piece: str) -> None:
    """A fake-LLM stream hook for chunks that may show nothing: a pause before each, so
    the preview gets every chance to (wrongly) show a held-back tail."""
    await asyncio.sleep(0.1)


async def test_telegram_streamed_no_reply_shows_nothing_at_all(tmp_path, llm, tg):
    clock = FakeClock()
    llm.stream_hook = slow
    llm.script(streamed("NO_", "REPL", "Y"))
    async with running(tg_cfg(tmp_path, llm, tg)) as d:
        log = started(d, clock, "telegram")
        tg.inject_message(CHAT, "hi", from_id=CHAT)
        await eventually(lambda: llm.streams_finished == 1, timeout=15)
        await asyncio.sleep(0.5)
        # the session goes on: the next, ordinary reply is shown
        llm.script(streamed("Sure", ", here", " it is."))
        tg.inject_message(CHAT, "and now?", from_id=CHAT)
        await tg.wait_for(lambda: tg.sent and tg.sent[0].edits, 15)
        await asyncio.sleep(0.3)
    assert len(tg.sent) == 1 and tg.sent[0].visible_text.startswith("Sure")  # 2nd turn
    assert tg.sent[0].edits[-1] == "Sure, here it is."
    assert all("NO_" not in (c.get("text") or "") for m, c in tg.calls if "Message" in m)
    assert all("NO_" not in shown for _, _, shown in log)
    assert len(tg_alive(tg)) == 1


async def test_telegram_preview_is_deleted_when_the_final_reply_is_silent(tmp_path, llm, tg):
    """A preview of an intermediate step, then the model decides to stay silent: no
    message is left behind."""
    (tmp_path / "ws").mkdir(parents=True, exist_ok=True)
    (tmp_path / "ws" / "a.txt").write_text("the file says hi")
    clock = FakeClock()
    llm.script(
        tool_calls([("read", {"path": "a.txt"})], content="Let me check the file."),
        streamed("NO_RE", "PLY"),
    )
    async with running(tg_cfg(tmp_path, llm, tg)) as d:
        started(d, clock, "telegram")
        tg.inject_message(CHAT, "hi", from_id=CHAT)
        await tg.wait_for(lambda: tg.calls_of("deleteMessage"), 15)
        await asyncio.sleep(0.3)
    assert [s.visible_text for s in tg.sent] == ["Let me check the file."]
    assert tg_alive(tg) == []
    assert "the file says hi" in json.dumps(llm.requests[1]["messages"])


async def test_telegram_tool_call_text_never_reaches_the_preview(tmp_path, llm, tg):
    """Text-mode tools: the model writes a <tool_call> block in the middle of a streamed
    turn; the preview shows the words before it, then the answer, never the block."""
    (tmp_path / "ws").mkdir(parents=True, exist_ok=True)
    (tmp_path / "ws" / "a.txt").write_text("the file says hi")
    clock = FakeClock()
    call = '{"name": "read", "arguments": {"path": "a.txt"}}'
    llm.stream_hook = slow
    llm.script(
        streamed(
            "Checking", " the file.", " <tool_", "call>" + call[:20], call[20:], "</tool_call>"
        ),
        streamed("It", " says", " hi."),
    )
    async with running(tg_cfg(tmp_path, llm, tg, agent={"native_tools": False})) as d:
        log = started(d, clock, "telegram")
        tg.inject_message(CHAT, "what is in a.txt?", from_id=CHAT)
        await tg.wait_for(lambda: "It says hi." in _tg_edits(tg), 15)
        await asyncio.sleep(0.3)
    assert "<tool_result" in json.dumps(llm.requests[1]["messages"])  # the tool ran
    shown = [c.get("text") or "" for m, c in tg.calls if m in ("sendMessage", "editMessageText")]
    assert shown[0].startswith("Checking")
    assert not any("tool" in s or "{" in s or "read" in s for s in shown), shown
    assert len(tg.calls_of("sendMessage")) == 1 and len(tg_alive(tg)) == 1
    assert tg_alive(tg)[0]["text"] == "It says hi."
    assert_throttled(log)


async def test_telegram_think_content_is_never_shown(tmp_path, llm, tg):
    clock = FakeClock()
    llm.stream_hook = slow
    llm.script(streamed("<thi", "nk>the secret", " plan</thi", "nk>Visible", " answer", " here."))
    async with running(tg_cfg(tmp_path, llm, tg, agent={"reasoning_tags": True})) as d:
        log = started(d, clock, "telegram")
        tg.inject_message(CHAT, "hi", from_id=CHAT)
        await tg.wait_for(
            lambda: (
                "Visible answer here." in [s.visible_text for s in tg.sent]
                or any(e == "Visible answer here." for e in _tg_edits(tg))
            ),
            15,
        )
        await asyncio.sleep(0.3)
    shown = [c.get("text") or "" for m, c in tg.calls if m in ("sendMessage", "editMessageText")]
    assert shown and not any("secret" in s or "<" in s or "think" in s for s in shown), shown
    assert all("secret" not in s for _, _, s in log)
    assert [m["text"] for m in tg_alive(tg)] == ["Visible answer here."]


async def test_telegram_failed_stream_replaces_the_preview_with_the_error(tmp_path, llm, tg):
    clock = FakeClock()
    llm.stream_hook = live_stream_hook(lambda: tg_preview_calls(tg))
    llm.script(streamed("Half an", " answer", " and more", cut_after=2))
    async with running(tg_cfg(tmp_path, llm, tg)) as d:
        started(d, clock, "telegram")
        tg.inject_message(CHAT, "hi", from_id=CHAT)
        await tg.wait_for(lambda: any("broke off" in (e or "") for e in _tg_edits(tg)), 15)
        await asyncio.sleep(0.3)
    assert tg.sent[0].text == "Half an"
    assert len(tg.calls_of("sendMessage")) == 1 and len(tg_alive(tg)) == 1
    assert "broke off" in tg_alive(tg)[0]["text"]
    assert len(llm.requests) == 1  # not retried after text went out


# ------------------------------------------------------------------------ Discord
async def test_discord_preview_is_edited_then_becomes_the_final_reply(tmp_path, llm, monkeypatch):
    from tests.e2e.test_e2e_discord import ALICE, DC_TOKEN, BOT_ID, dc_config
    from tests.fakes.discord import FakeDiscord

    dc = FakeDiscord(bot_id=BOT_ID, bot_name="chela", token=DC_TOKEN)
    await dc.start()
    try:
        clock = FakeClock()
        llm.stream_hook = live_stream_hook(lambda: len(dc.sent) + len(dc.edits))
        llm.script(streamed(*CHUNKS))
        cfg = dc_config(tmp_path, llm, dc, monkeypatch, streaming="partial")
        async with running(cfg) as d:
            log = started(d, clock, "discord")
            await dc.wait_for_clients(1)
            dm = dc.add_dm_channel(ALICE, "alice")
            await dc.inject_message(dm, "hi", author_id=ALICE, username="alice")
            await eventually(lambda: any(e["content"] == RAW for e in dc.edits), 15)
            await asyncio.sleep(0.3)
        assert len(dc.sent) == 1 and dc.sent[0]["content"] == "Hello"
        contents = [e["content"] for e in dc.edits]
        assert contents[:3] == [
            "Hello there,",
            "Hello there, this is",
            "Hello there, this is **streamed**",
        ]
        assert contents[-1] == RAW  # the final reply (native Markdown) was the last edit
        assert all(e["id"] == dc.sent[0]["id"] for e in dc.edits)
        assert [m["content"] for m in dc.bot_messages(dm)] == [RAW]
        assert_throttled(log)
    finally:
        await dc.stop()


# -------------------------------------------------------------------------- Slack
async def test_slack_preview_is_updated_then_becomes_the_final_reply(tmp_path, llm, monkeypatch):
    from tests.fakes.slack import FakeSlack
    from tests.e2e.test_e2e_slack import dm_event, slack_config

    async with FakeSlack(bot_user_id="UBOT", bot_token="xoxb-e2e", app_token="xapp-e2e") as sl:
        clock = FakeClock()
        llm.stream_hook = live_stream_hook(lambda: len(sl.posted) + len(sl.updates))
        llm.script(streamed(*CHUNKS))
        cfg = slack_config(tmp_path, llm, sl, monkeypatch, streaming="partial")
        final = "Hello there, this is *streamed* text."
        async with running(cfg) as d:
            log = started(d, clock, "slack")
            await sl.push_event(dm_event(sl, "hi"))
            await eventually(lambda: any(u["text"] == final for u in sl.updates), 15)
            await asyncio.sleep(0.3)
        posts = [c for c in sl.calls if c[0] == "chat.postMessage"]
        assert len(posts) == 1 and posts[0][1]["text"] == "Hello"
        texts = [u["text"] for u in sl.updates]
        assert texts[:2] == ["Hello there,", "Hello there, this is"]
        assert texts[-1] == final
        assert [p["text"] for p in sl.visible_posts("DALICE")] == [final]
        assert_throttled(log)


# --------------------------------------------------------------------------- HTTP
def http_cfg(tmp_path, llm, monkeypatch):
    monkeypatch.setenv("TEST_HTTP_TOKEN", "s3cret-token-value")
    section = {"enabled": True, "listen": "127.0.0.1:0", "token_env": "TEST_HTTP_TOKEN"}
    return make_config(tmp_path, llm, channels={"http": section})


def openai_client(d: Any) -> Any:
    import openai

    port = d.channels["http"].bound_port
    return openai.AsyncOpenAI(
        base_url=f"http://127.0.0.1:{port}/v1", api_key="s3cret-token-value", max_retries=0
    )


async def test_http_stream_sends_the_first_token_before_the_model_has_finished(
    tmp_path, llm, monkeypatch
):
    gate = asyncio.Event()
    llm.script(streamed("Hello", " from", " a streaming", " model.", gate=gate, usage=usage(17, 5)))
    async with running(http_cfg(tmp_path, llm, monkeypatch)) as d:
        client = openai_client(d)
        stream = await client.chat.completions.create(
            model="chela",
            messages=[{"role": "user", "content": "hi"}],
            stream=True,
            stream_options={"include_usage": True},
        )
        pieces: list[str] = []
        last = None
        async for chunk in stream:
            last = chunk
            if chunk.choices and chunk.choices[0].delta.content:
                pieces.append(chunk.choices[0].delta.content)
                if len(pieces) == 1:
                    # the model is still writing (held at its first chunk) and the client
                    # already has the first token
                    assert llm.streams_finished == 0 and pieces == ["Hello"]
                    gate.set()
        await client.close()
    assert len(pieces) > 1
    assert "".join(pieces) == "Hello from a streaming model."
    assert last is not None and last.choices == []
    assert (last.usage.prompt_tokens, last.usage.completion_tokens, last.usage.total_tokens) == (
        17,
        5,
        22,
    )


async def test_http_stream_through_a_tool_call_and_usage_of_every_call(tmp_path, llm, monkeypatch):
    (tmp_path / "ws").mkdir(parents=True, exist_ok=True)
    (tmp_path / "ws" / "a.txt").write_text("the file says hi")
    llm.script(
        tool_calls([("read", {"path": "a.txt"})], content="Reading it.", usage=usage(40, 12)),
        streamed("It", " says", " hi.", usage=usage(60, 4)),
        streamed("NO_", "REPLY"),
    )
    async with running(http_cfg(tmp_path, llm, monkeypatch)) as d:
        client = openai_client(d)
        stream = await client.chat.completions.create(
            model="chela",
            messages=[{"role": "user", "content": "what is in a.txt?"}],
            stream=True,
            stream_options={"include_usage": True},
        )
        chunks = [c async for c in stream]
        # a silent reply streams nothing, not even its beginning
        stream = await client.chat.completions.create(
            model="chela", messages=[{"role": "user", "content": "ok"}], stream=True
        )
        silent = [c async for c in stream]
        await client.close()
    content = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert content == "Reading it.\n\nIt says hi."
    assert "tool" not in content and "a.txt" not in content
    assert "the file says hi" in json.dumps(llm.requests[1]["messages"])  # the tool ran
    assert chunks[-1].usage.prompt_tokens == 100 and chunks[-1].usage.completion_tokens == 16
    assert [c.choices[0].delta.content for c in silent if c.choices] == ["", None]
    assert silent[-1].usage is None  # no usage chunk unless asked for


async def test_http_stream_errors_before_and_after_the_first_token(tmp_path, llm, monkeypatch):
    import openai

    llm.default = lambda req: error(503)
    async with running(http_cfg(tmp_path, llm, monkeypatch)) as d:
        client = openai_client(d)
        with pytest.raises(openai.APIStatusError) as exc:
            await client.chat.completions.create(
                model="chela", messages=[{"role": "user", "content": "hi"}], stream=True
            )
        assert exc.value.status_code == 502  # nothing streamed yet: a plain HTTP error
        llm.default = lambda req: text("ok")
        llm.script(streamed("Half", " an answer", " and more", cut_after=2))
        stream = await client.chat.completions.create(
            model="chela", messages=[{"role": "user", "content": "again"}], stream=True
        )
        got: list[str] = []
        with pytest.raises(openai.APIError) as exc2:
            async for chunk in stream:
                if chunk.choices and chunk.choices[0].delta.content:
                    got.append(chunk.choices[0].delta.content)
        await client.close()
    assert got == ["Half", " an answer"]
    assert "broke off" in str(exc2.value)
