"""A web turn's ``tool.finished`` says how long the tool's result was (SPEC §16.5
``result_chars``), through the real daemon, the real agent loop and the fake LLM: the size of
what the model was given (scrubbed and cut), not 0."""

from __future__ import annotations

from tests.e2e.ui_api_helpers import turn
from tests.e2e.ui_client import ui_daemon
from tests.fakes.llm import text, tool_calls

MAIN = "agent:main:main"


def tool_messages(request: dict) -> list[str]:
    return [str(m["content"]) for m in request["messages"] if m.get("role") == "tool"]


async def _finished(tmp_path, llm, path: str, size: int = 1234) -> tuple[dict, str]:
    llm.script(tool_calls([("read", {"path": path})]), text("read it"))
    async with ui_daemon(tmp_path, llm) as ui, await ui.login() as c:
        (ui.cfg.agent.workspace / "notes.txt").write_text("x" * size + "\n")
        status, evs = await turn(c, MAIN, "read my notes", "chars1")
    assert status == 200
    assert evs[-1][0] == "final" and evs[-1][1]["message"]["text"] == "read it"
    finished = next(d for n, d, _ in evs if n == "tool.finished")
    return finished, tool_messages(llm.requests[1])[0]


async def test_tool_finished_carries_the_size_of_the_result_the_model_saw(tmp_path, llm):
    finished, seen = await _finished(tmp_path, llm, "notes.txt")
    assert finished["name"] == "read" and finished["ok"] is True
    assert seen == "x" * 1234 + "\n"  # the model was given the file's 1,235 characters
    assert finished["result_chars"] == len(seen) == 1235  # was 0 before


async def test_a_failed_tool_reports_the_size_of_its_error(tmp_path, llm):
    finished, seen = await _finished(tmp_path, llm, "missing.txt")
    assert finished["ok"] is False
    assert seen.startswith("Error:")
    assert finished["result_chars"] == len(seen) > 0


async def test_a_long_result_counts_what_was_left_after_the_cut(tmp_path, llm):
    finished, seen = await _finished(tmp_path, llm, "notes.txt", size=300_000)
    assert len(seen) < 300_001  # tool output is cut before the model gets it
    assert finished["result_chars"] == len(seen)
