"""The terminal chat's view of a turn, fed TurnEvent values as the conversation publishes
them (issue 27: streamed answer, Markdown when complete, one dim line per tool call)."""

from __future__ import annotations

import io

from bot.cli.chat_render import ChatView, clean, rows
from bot.conversation.events import TurnEvent


def ev(kind, **kw) -> TurnEvent:
    return TurnEvent(kind, "agent:main:main", "t1", **kw)


def view(tty=True, size=(80, 24), **kw) -> tuple[ChatView, io.StringIO]:
    out = io.StringIO()
    return ChatView(out, tty=tty, size=lambda: size, **kw), out


def test_text_streams_as_it_arrives_then_the_reply_replaces_it_rendered():
    v, out = view(render=lambda text, width: f"<md>{text}</md>\n")
    v.feed(ev("started"))
    v.feed(ev("text", text="**Hel"))
    assert out.getvalue() == "**Hel"  # shown before the answer is complete
    v.feed(ev("text", text="lo**"))
    assert out.getvalue() == "**Hello**"
    v.reply("**Hello**")
    # the streamed line is erased and the rendering written in its place
    assert out.getvalue() == "**Hello**\r\x1b[J<md>**Hello**</md>\n"


def test_a_multi_line_stream_is_erased_from_its_first_row():
    v, out = view(size=(10, 24), render=lambda text, width: "R\n")
    v.feed(ev("started"))
    v.feed(ev("text", text="line one\n" + "x" * 15))  # 1 row + 2 rows
    v.reply("done")
    assert out.getvalue().endswith("\r\x1b[2A\x1b[JR\n")


def test_a_reply_too_long_for_the_screen_stays_as_streamed():
    v, out = view(size=(80, 5), render=lambda text, width: "RENDERED\n")
    v.feed(ev("started"))
    long = "\n".join(f"line {i}" for i in range(10))
    v.feed(ev("text", text=long))
    v.reply(long)
    assert out.getvalue() == long + "\n"  # not erased (it scrolled off), not printed twice


def test_not_a_tty_plain_text_no_escapes():
    v, out = view(tty=False, render=lambda text, width: "RENDERED\n")
    v.reply("# Title\n\nsome *text*")
    assert out.getvalue() == "# Title\n\nsome *text*\n"
    v.feed(ev("started"))
    v.feed(ev("tool_start", tool="exec", summary='{"command": "ls"}'))
    v.feed(ev("tool_end", tool="exec", duration=0.25))
    assert out.getvalue().endswith('  · exec {"command": "ls"} 0.2s\n')
    assert "\x1b" not in out.getvalue()


def test_one_dim_line_per_tool_call_with_summary_and_duration():
    v, out = view()
    v.feed(ev("started"))
    v.feed(ev("text", text="Let me look."))
    v.feed(ev("step"))
    v.feed(ev("tool_start", tool="web_fetch", summary='{"url": "https://example.com"}'))
    pending = out.getvalue()
    assert pending.endswith('\x1b[2m  · web_fetch {"url": "https://example.com"} …\x1b[0m')
    v.feed(ev("tool_end", tool="web_fetch", duration=1.234, ok=True))
    v.feed(ev("tool_start", tool="exec", summary="false"))
    v.feed(ev("tool_end", tool="exec", duration=0.05, ok=False))
    v.feed(ev("text", text="Found it."))
    text = out.getvalue()
    lines = [line.split("\r\x1b[K")[-1] for line in text.split("\n")]
    assert lines == [
        "Let me look.",
        '\x1b[2m  · web_fetch {"url": "https://example.com"} 1.2s\x1b[0m',
        "\x1b[2m  · exec false 0.1s failed\x1b[0m",
        "Found it.",
    ]
    v.reply("Found it.")  # only the text after the tools is replaced
    assert out.getvalue().count("Let me look.") == 1


def test_tool_lines_are_scrubbed_cut_and_cannot_drive_the_terminal():
    secret = "sk-live-abcdef123456"
    v, out = view(size=(60, 24), secrets=[secret])
    v.feed(ev("started"))
    v.feed(
        ev(
            "tool_start",
            tool="exec\x1b[31m",
            summary=f"curl -H {secret} \x1b]0;pwn\x07" + "a" * 200,
        )
    )
    v.feed(ev("tool_end", tool="exec\x1b[31m", duration=2))
    text = out.getvalue()
    assert secret not in text and "***" in text
    assert "\x1b]0" not in text and "\x07" not in text and "\x1b[31m" not in text
    last = text.split("\r\x1b[K")[-1]
    assert len(clean(last).rstrip("\n")) <= 60  # one row of the terminal


def test_streamed_text_loses_escape_sequences():
    v, out = view()
    v.feed(ev("started"))
    v.feed(ev("text", text="red \x1b[31mtext\x1b[0m\r"))
    assert out.getvalue() == "red text"


def test_events_after_the_turn_ended_are_not_shown():
    v, out = view()
    v.feed(ev("started"))
    v.feed(ev("text", text="partial"))
    v.end()  # cancelled
    v.feed(ev("text", text=" late"))
    v.feed(ev("tool_start", tool="exec"))
    assert out.getvalue() == "partial\n"
    v.feed(ev("started"))  # the next turn is shown again
    v.feed(ev("text", text="next"))
    assert out.getvalue() == "partial\nnext"


def test_the_thinking_indicator_is_hidden_before_output_and_back_after_a_tool():
    calls: list[str] = []
    v, _ = view(quiet=lambda: calls.append("quiet"), busy=lambda: calls.append("busy"))
    v.feed(ev("started"))
    v.feed(ev("tool_start", tool="exec"))
    v.feed(ev("tool_end", tool="exec", duration=1))
    assert calls == ["quiet", "quiet", "busy"]


def test_markdown_is_rendered_with_rich():
    v, out = view()
    v.reply("# Title\n\nsome **bold** and `code`")
    text = out.getvalue()
    assert "Title" in text and "**" not in text and "`" not in text
    assert "\x1b[" in text  # styled


def test_rows_counts_wrapped_lines():
    assert rows("abc", 10) == 1
    assert rows("a" * 25, 10) == 3
    assert rows("a\n\nb", 10) == 3
