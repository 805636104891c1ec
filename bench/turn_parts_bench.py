"""Micro-benchmark of the Python work one agent turn repeats (not a pass/fail test).

    cd /work/main && python bench/turn_parts_bench.py [--repeat 7] [--number 20000]

Times, best of ``--repeat`` runs of ``--number`` calls each, the per-turn pieces of
``Agent._run_turn`` and of the prepare stage on a real ``Agent`` (test config, a
Telegram-like owner DM, the workspace's default files): the cached system prompt's
look-up, the tool context, the tool schema list the loop sends, the compaction budget,
the user turn's text, the compaction plan (``history_for_turn``) and a whole
``Agent.run_turn`` with the model answering at once in-process (nothing stored, so the
history stays 50 or 0 messages).  Numbers in microseconds per call (the coroutine cases
run ``--number``/10 times a round).
The host is noisy: compare runs interleaved (run the same script from a checkout of the
old code and from this one, alternately).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
import timeit
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bot.agent.context import format_user_turn, zone
from bot.agent.request import TurnRequest
from bot.agent.turn import Agent
from bot.conversation.prepare import Prepare
from bot.rules.admission import Verdict
from bot.model import Completion
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
    prep = Prepare(agent.cfg, agent, {}, agent.store)
    owner = Verdict("serve", "owner")
    key = "agent:main:telegram:direct:42"
    return {
        "prepare.request": lambda: prep.request(msg, key, "text", owner, include_intro=False),
        "system_prompt": lambda: agent.system_prompt(req()),
        "prompt_context": lambda: agent.prompt_context(req()),
        "tool_context": lambda: agent.tool_context(req()),
        "registry.openai_tools": agent.registry.openai_tools,
        "compactor.budget": lambda: agent.compactor.budget(system, tools),
        "format_user_turn": lambda: format_user_turn(msg, tz=tz, pending=[], notes=[]),
    }


def async_cases(agent: Agent) -> dict:
    """Coroutine cases, timed inside one running loop: the compaction plan of a turn of
    a session holding ``HISTORY`` messages (25 exchanges), and one with none."""
    store = agent.store
    prep = Prepare(agent.cfg, agent, {}, store)
    msg = InboundMessage(
        channel="telegram",
        chat_id="42",
        sender_id="42",
        sender_name="Alice Example",
        text="round 1: hello, how are you today?",
        message_id="1001",
        timestamp=time.time(),
    )
    long_key, short_key = "agent:main:telegram:direct:long", "agent:main:telegram:direct:new"
    for i in range(HISTORY // 2):
        msgs = [
            {"role": "user", "content": f"question {i}: " + "words " * 40},
            {"role": "assistant", "content": f"answer {i}: " + "more words " * 60},
        ]
        store.commit_turn(long_key, f"t{i}", msgs)
    long_req, short_req = _request(0), _request(1)
    long_req.session_key, short_req.session_key = long_key, short_key
    system = agent.system_prompt(long_req)
    tools = agent._openai_tools("owner")
    ctx = agent.tool_context(long_req)
    new = [{"role": "user", "content": "the new question"}]
    fit = agent.compactor.history_for_turn

    def plan(req):
        return lambda: fit(req, system, tools, ctx, agent.registry, new)

    async def answer(messages, tools=None, **kw):  # the model, answering at once
        return Completion(text="ok", usage={"prompt_tokens": 1, "completion_tokens": 1})

    agent.llm.complete = answer  # type: ignore[method-assign]

    def turn(req):
        return lambda: agent.run_turn(req)

    return {
        "history_for_turn/50": plan(long_req),
        "history_for_turn/0": plan(short_req),
        "prepare.user_turn": lambda: prep.user_turn(
            msg,
            "agent:main:telegram:direct:42",
            Verdict("serve", "owner"),
            pending=[],
            was_mentioned=None,
        ),
        "run_turn/50": turn(long_req),
        "run_turn/0": turn(short_req),
    }


HISTORY = 50


async def _time_async(fn, number: int, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        for _ in range(number):
            await fn()
        best = min(best, (time.perf_counter() - t0) / number)
    return best


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
    for name, fn in async_cases(agent).items():
        if only and name not in only:
            continue
        best = asyncio.run(_time_async(fn, max(1, a.number // 10), a.repeat))
        print(f"{name:<24}{best * 1e6:9.2f} us")


if __name__ == "__main__":
    main()
