"""A turn cancelled while ``exec`` runs (/stop, the UI's Stop, shutdown) leaves no process
behind: the command's whole process group (or sandbox) is killed."""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import time
from pathlib import Path

import pytest

from bot.agent.loop import run_agent_loop
from bot.agent.tools import ExecPolicy, ToolContext, build_registry
from bot.agent.tools import sandbox
from bot.model import LLMClient
from tests.fakes.llm import FakeLLM, text, tool_calls

SYSTEM = {"role": "system", "content": "You are a test."}
USER = {"role": "user", "content": "please wait"}


def _alive_with(arg: str) -> list[int]:
    """Live (not zombie) processes whose command line has ``arg``."""
    pids = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            cmd = (d / "cmdline").read_bytes().split(b"\0")
            state = (d / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if arg.encode() in cmd and state != "Z":
            pids.append(int(d.name))
    return pids


@pytest.mark.parametrize("poll", [0.05, 0.0], ids=["running", "starting"])
@pytest.mark.parametrize("sandboxed", [False, True], ids=["plain", "sandbox"])
async def test_cancelled_turn_kills_the_running_command(tmp_path, sandboxed, poll):
    """``poll`` 0: the cancel lands as soon as the process shows, often while asyncio still
    connects its pipes (the shell or bwrap alone was killed then, its command left running)."""
    if sandboxed and not sandbox.probe().ok:
        pytest.skip("bubblewrap cannot run here")
    # a duration no other process has: its command line finds it
    arg = f"30.{random.randrange(10**6):06d}"
    ctx = ToolContext(
        file_root=tmp_path,
        session_key="agent:main:main",
        agent_id="main",
        exec_policy=ExecPolicy("full", [], 60, sandbox=sandboxed),
    )
    async with FakeLLM() as fake:
        fake.script(tool_calls([("exec", {"command": f"sleep {arg}"}, "c1")]), text("never"))
        llm = LLMClient("openai/fake-model", api_base=fake.base_url, backoff_base=0.001)
        turn = asyncio.create_task(
            run_agent_loop(llm, [SYSTEM, USER], build_registry(["exec"]), ctx)
        )
        deadline = time.monotonic() + 10
        while not _alive_with(arg) and time.monotonic() < deadline:
            await asyncio.sleep(poll)
        assert _alive_with(arg), "the command never started"
        turn.cancel()
        with pytest.raises(asyncio.CancelledError):
            await turn
        gone_by = time.monotonic() + 2
        while _alive_with(arg) and time.monotonic() < gone_by:
            await asyncio.sleep(0.05)
        left = _alive_with(arg)
        for pid in left:  # never leave one behind, even when the test fails
            os.kill(pid, 9)
        assert left == [], f"still running 2 s after the cancel: {left}"


async def test_twin_uncancelled_command_runs_to_its_end(tmp_path):
    """The same path without a cancel: the command runs and its output comes back."""
    ctx = ToolContext(
        file_root=tmp_path,
        session_key="agent:main:main",
        agent_id="main",
        exec_policy=ExecPolicy("full", [], 60, sandbox=False),
    )
    async with FakeLLM() as fake:
        fake.script(
            tool_calls([("exec", {"command": "sleep 0.2; echo finished"}, "c1")]), text("ok")
        )
        llm = LLMClient("openai/fake-model", api_base=fake.base_url, backoff_base=0.001)
        res = await run_agent_loop(llm, [SYSTEM, USER], build_registry(["exec"]), ctx)
    assert res.text == "ok"
    assert "finished" in res.new_messages[1]["content"]


async def test_cancel_at_any_point_of_the_start_leaves_nothing(tmp_path):
    """The cancel lands after 0, 1, 2, … loop turns: some of them while the process runs
    but asyncio has not handed it over yet (only the shell was killed then)."""
    from bot.agent.tools.exec_tool import run_command

    arg = f"30.{random.randrange(10**6):06d}"
    for turns in range(40):
        task = asyncio.create_task(
            run_command(None, f"sleep {arg}; true", cwd=str(tmp_path), timeout=60, max_output=1000)
        )
        for _ in range(turns):
            await asyncio.sleep(0)
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
    gone_by = time.monotonic() + 2
    while _alive_with(arg) and time.monotonic() < gone_by:
        await asyncio.sleep(0.05)
    left = _alive_with(arg)
    for pid in left:
        os.kill(pid, 9)
    assert left == [], f"{len(left)} commands still running 2 s after their cancel"
