"""The terminal chat on a real pseudo-terminal (issue 27): the answer streams then shows as
Markdown, tool calls as one line each, local handling of unknown commands and of exit/quit,
Alt-Enter for a newline, Ctrl-C clearing a typed line.  The fake LLM answers in this
process, so each blocking pexpect call runs in a thread."""

from __future__ import annotations

import asyncio

import pexpect

from tests.fakes.llm import streamed, text, tool_calls
from tests.e2e.test_first_hour_pty import chat_config, expect, spawn, user_texts


async def _quit(child: pexpect.spawn, how: str = "") -> None:
    if how:
        child.send(how + "\r")
    else:
        child.sendeof()
    await asyncio.to_thread(child.expect, pexpect.EOF, timeout=15)


async def test_the_answer_streams_then_is_shown_as_markdown(tmp_path, llm):
    gate = asyncio.Event()
    llm.script(streamed("The answer is **", "bold** indeed", gate=gate))
    child = spawn(["chat", "--config", str(chat_config(tmp_path, llm))], tmp_path)
    try:
        await expect(child, "you>")
        child.send("tell me\r")
        # the first chunk is on the terminal while the model is still writing
        await expect(child, r"The answer is \*\*")
        gate.set()
        await expect(child, r"\x1b\[J")  # the raw text is erased ...
        await expect(child, "you>")
        shown = child.before
        assert "bold" in shown and "indeed" in shown and "**" not in shown  # ... rendered
        await _quit(child)
    finally:
        child.close(force=True)


async def test_a_tool_call_is_one_line_with_its_arguments_and_duration(tmp_path, llm):
    (tmp_path / "ws").mkdir(exist_ok=True)
    (tmp_path / "ws" / "notes.txt").write_text("heron\n")
    llm.script(tool_calls([("read", {"path": "notes.txt"})]), text("It is heron."))
    child = spawn(["chat", "--config", str(chat_config(tmp_path, llm))], tmp_path)
    try:
        await expect(child, "you>")
        child.send("what is in notes?\r")
        await expect(child, r"· read \{\"path\": \"notes.txt\"\} \d+\.\ds")
        await expect(child, "It is heron.")
        await expect(child, "you>")
        await _quit(child)
    finally:
        child.close(force=True)


async def test_unknown_command_gets_a_hint_not_a_model_call_and_exit_ends(tmp_path, llm):
    llm.script(text("a real answer"))
    child = spawn(["chat", "--config", str(chat_config(tmp_path, llm))], tmp_path)
    try:
        await expect(child, "you>")
        child.send("/stauts\r")
        await expect(child, r"Unknown command /stauts\. Did you mean /status\?")
        await expect(child, "/help")  # the list of commands
        await expect(child, "you>")
        child.send("/help\r")  # the core's list, then the chat's own lines
        await expect(child, "/status")
        await expect(child, "/quit or /exit")
        await expect(child, "you>")
        assert llm.requests == []  # neither was a paid call
        child.send("hello there\r")  # twin: ordinary text is a turn
        await expect(child, "a real answer")
        await expect(child, "you>")
        await _quit(child, "exit")
    finally:
        child.close(force=True)
    assert len(llm.requests) == 1  # exit was not sent either
    assert any("hello there" in t for t in user_texts(llm))


async def test_quit_alone_ends_the_chat(tmp_path, llm):
    child = spawn(["chat", "--config", str(chat_config(tmp_path, llm))], tmp_path)
    try:
        await expect(child, "you>")
        await _quit(child, "quit")
    finally:
        child.close(force=True)
    assert llm.requests == []


async def test_alt_enter_inserts_a_newline_and_enter_sends(tmp_path, llm):
    llm.script(text("two lines seen"))
    child = spawn(["chat", "--config", str(chat_config(tmp_path, llm))], tmp_path)
    try:
        await expect(child, "you>")
        child.send("first line")
        child.send("\x1b\r")  # Alt-Enter (Esc then Enter)
        child.send("second line\r")
        await expect(child, "two lines seen")
        await expect(child, "you>")
        await _quit(child)
    finally:
        child.close(force=True)
    texts = user_texts(llm)
    assert any("first line\nsecond line" in t for t in texts), texts


async def test_ctrl_c_with_text_clears_the_line_and_on_an_empty_line_exits(tmp_path, llm):
    llm.script(text("kept going"))
    child = spawn(["chat", "--config", str(chat_config(tmp_path, llm))], tmp_path)
    try:
        await expect(child, "you>")
        child.send("a draft I regret")
        await expect(child, "regret")
        child.sendintr()  # clears the line; the chat goes on
        child.send("the real question\r")
        await expect(child, "kept going")
        await expect(child, "you>")
        child.sendintr()  # on an empty line: quit
        await asyncio.to_thread(child.expect, pexpect.EOF, timeout=10)
    finally:
        child.close(force=True)
    texts = user_texts(llm)
    assert any("the real question" in t for t in texts), texts
    assert not any("draft" in t for t in texts), texts
