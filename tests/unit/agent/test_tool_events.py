"""Tool events of a turn (issue 24 item 4): run_agent_loop tells tool_start before each tool
call and tool_end after it, through the real loop, real LLM client and the fake LLM server."""

from __future__ import annotations

import asyncio

import pytest

from bot.agent.loop import run_agent_loop, summarize_args
from bot.agent.tools import ToolContext, build_registry
from bot.delivery.previews import StreamEvent
from bot.model import LLMClient
from tests.fakes.llm import FakeLLM, text, tool_calls

SYSTEM = {"role": "system", "content": "You are a test."}
USER = {"role": "user", "content": "please help"}
SECRET = "sk-live-7f3a9c1e5b2d4a6f8e0c"


@pytest.fixture
async def fake():
    async with FakeLLM() as f:
        yield f


async def _turn(fake: FakeLLM, ws, *calls, secrets=()) -> list[StreamEvent]:
    fake.script(tool_calls(list(calls)), text("done"))
    events: list[StreamEvent] = []
    ctx = ToolContext(file_root=ws, session_key="agent:main:main", agent_id="main", secrets=secrets)
    llm = LLMClient("openai/fake-model", api_base=fake.base_url, backoff_base=0.001)
    res = await run_agent_loop(
        llm, [SYSTEM, USER], build_registry(["read", "write"]), ctx, on_event=events.append
    )
    assert res.text == "done"
    return [e for e in events if e.kind in ("tool_start", "tool_end", "step")]


async def test_tool_events_frame_each_call_in_order(fake, tmp_path):
    (tmp_path / "a.txt").write_text("hello\n")
    events = await _turn(fake, tmp_path, ("read", {"path": "a.txt"}, "call_A"))
    assert [(e.kind, e.tool) for e in events] == [
        ("tool_start", "read"),
        ("tool_end", "read"),
        ("step", ""),  # the next model call comes after the tool ended
    ]
    start, end = events[0], events[1]
    assert start.summary == '{"path": "a.txt"}'  # a plain argument shows
    assert end.ok is True
    assert 0 <= end.duration < 5


async def test_failed_tool_ends_not_ok(fake, tmp_path):
    events = await _turn(fake, tmp_path, ("read", {"path": "missing.txt"}, "call_A"))
    ends = [e for e in events if e.kind == "tool_end"]
    assert len(ends) == 1 and ends[0].tool == "read" and ends[0].ok is False


async def test_secret_in_argument_not_in_summary(fake, tmp_path):
    events = await _turn(
        fake,
        tmp_path,
        ("write", {"path": "key.txt", "content": f"token={SECRET}"}, "call_A"),
        secrets=(SECRET,),
    )
    start = events[0]
    assert start.kind == "tool_start" and start.tool == "write"
    assert SECRET not in start.summary
    assert SECRET[:12] not in start.summary
    assert "key.txt" in start.summary  # the rest of the call still shows


async def test_twin_same_argument_without_registered_secret_shows(fake, tmp_path):
    events = await _turn(
        fake, tmp_path, ("write", {"path": "key.txt", "content": "token=plain"}, "call_A")
    )
    assert "token=plain" in events[0].summary


async def test_parallel_calls_each_framed(fake, tmp_path):
    (tmp_path / "a.txt").write_text("a")
    (tmp_path / "b.txt").write_text("b")
    events = await _turn(
        fake, tmp_path, ("read", {"path": "a.txt"}, "c1"), ("read", {"path": "b.txt"}, "c2")
    )
    kinds = [e.kind for e in events]
    assert kinds.count("tool_start") == 2 and kinds.count("tool_end") == 2
    assert kinds[-1] == "step"


def test_summary_is_one_short_line():
    line = summarize_args({"command": "echo " + "x" * 200 + "\nsecond line"})
    assert len(line) <= 80 and "\n" not in line and line.endswith("…")
    assert summarize_args({}) == "" and summarize_args(None) == ""
    # the secret is scrubbed before the cut: half of it never shows
    cut = summarize_args({"a": "y" * 70 + SECRET}, (SECRET,))
    assert SECRET[:6] not in cut


async def test_cancelled_call_still_ends(fake, tmp_path):
    """A turn cancelled while a tool runs tells tool_end (ok False), so no UI keeps a
    tool spinning."""
    from bot.agent.tools import ExecPolicy

    fake.script(tool_calls([("exec", {"command": "sleep 30"}, "c1")]), text("never"))
    events: list[StreamEvent] = []
    ctx = ToolContext(
        file_root=tmp_path,
        session_key="agent:main:main",
        agent_id="main",
        exec_policy=ExecPolicy("full", [], 60),
    )
    llm = LLMClient("openai/fake-model", api_base=fake.base_url, backoff_base=0.001)
    task = asyncio.create_task(
        run_agent_loop(llm, [SYSTEM, USER], build_registry(["exec"]), ctx, on_event=events.append)
    )
    for _ in range(200):
        if any(e.kind == "tool_start" for e in events):
            break
        await asyncio.sleep(0.02)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    ends = [e for e in events if e.kind == "tool_end"]
    assert len(ends) == 1 and ends[0].ok is False
