"""Micro-benchmark of the Python work one agent turn repeats (not a pass/fail test).

    cd /work/main && python bench/turn_parts_bench.py [--repeat 7] [--number 20000]

Times, best of ``--repeat`` runs of ``--number`` calls each, the per-turn pieces of
``Agent._run_turn`` and of the prepare stage on a real ``Agent`` (test config, a
Telegram-like owner DM, the workspace's default files): the cached system prompt's
look-up, the tool context, the tool schema list the loop sends, the compaction budget,
the tool schemas' token count and the user turn's text.  Numbers in microseconds per call.
The host is noisy: compare runs interleaved (run the same script from a checkout of the
old code and from this one, alternately).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
import timeit
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bot.agent.context import format_user_turn, zone
from bot.agent.request import TurnRequest
from bot.agent.turn import Agent
from bot.store import Store
from channels.base import InboundMessage
from tests.e2e import make_config


class _Nowhere:
    base_url = "http://127.0.0.1:9/v1"  # no model call is made


def _request(i: int) -> TurnRequest:
    return TurnRequest(
        session_key=f"agent:main:telegram:direct:{i}",
        user_text="hello",
        channel="telegram",
        chat_type="direct",
        capabilities=("reactions", "inline_buttons"),
        reactions="minimal",
        after_user_system="Reply in Telegram markdown.",
        route={"channel": "telegram", "chat_id": str(i)},
        message_text="hello",
    )


def cases(agent: Agent) -> dict:
    reqs = [_request(i) for i in range(200)]
    state = {"n": 0}

    def req() -> TurnRequest:  # round-robin over sessions, like a burst of chats
        state["n"] = (state["n"] + 1) % len(reqs)
        return reqs[state["n"]]

    system = agent.system_prompt(reqs[0])
    tools = agent._openai_tools("owner")
    msg = InboundMessage(
        channel="telegram",
        chat_id="42",
        sender_id="42",
        sender_name="Alice Example",
        sender_username="alice",
        text="round 1: hello, how are you today?",
        message_id="1001",
        timestamp=time.time(),
    )
    tz = zone(agent.cfg)
    return {
        "system_prompt": lambda: agent.system_prompt(req()),
        "prompt_context": lambda: agent.prompt_context(req()),
        "tool_context": lambda: agent.tool_context(req()),
        "registry.openai_tools": agent.registry.openai_tools,
        "compactor.budget": lambda: agent.compactor.budget(system, tools),
        "format_user_turn": lambda: format_user_turn(msg, tz=tz, pending=[], notes=[]),
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--number", type=int, default=20000)
    ap.add_argument("--only", default="", help="comma-separated case names")
    a = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="chela-turn-parts-"))
    cfg = make_config(tmp, _Nowhere(), tools={"enabled": ["read", "write", "edit", "exec"]})
    agent = Agent(cfg, Store(":memory:"))
    only = {s for s in a.only.split(",") if s}
    for name, fn in cases(agent).items():
        if only and name not in only:
            continue
        fn()
        best = min(timeit.repeat(fn, number=a.number, repeat=a.repeat)) / a.number
        print(f"{name:<24}{best * 1e6:9.2f} us")


if __name__ == "__main__":
    main()
