"""Long-session benchmark (not a pass/fail test): Chela's cost per turn as history grows.

    cd /work/main && python bench/long_session_bench.py [--sizes 10,300,3000] [--turns 200]

For each size N a fresh daemon (``TerminalChannel``, real litellm client, in-process
``FakeLLM`` answering at once) gets a main session whose database already holds N turns
(stored through ``Store.commit_turn``, so every message has its token count), one warm-up
turn (which compacts the backlog, as the daemon would have done along the way), then
``--turns`` measured turns.  Compaction stays on with its defaults, so the measured turns
include the compactions a real session would go through (summary call + memory flush).

Reported per turn: ``overhead = (on_inbound → turn_done) - time awaiting the model``
(litellm + fake, including the summary and flush calls), as p50 / mean / p99 in ms.
The issue's requirement: the cost per turn stays flat from 10 to 3,000 turns of history.
"""

from __future__ import annotations

import argparse
import asyncio
import contextvars
import logging
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bot.model import LLMClient, warm_up
from bot.agent.compaction import SUMMARY_INSTRUCTIONS
from bot.app.daemon import Daemon
from bot.conversation.pipeline import Conversation
from channels.base import InboundMessage
from channels.terminal import TerminalChannel
from tests.e2e import make_config
from tests.fakes.llm import FakeLLM, text

_acc: contextvars.ContextVar[list | None] = contextvars.ContextVar("acc", default=None)
_orig_complete = LLMClient.complete
LLM_SECONDS: dict[str, list] = {}


async def _timed_complete(self, messages, tools=None):
    t0 = time.perf_counter()
    try:
        return await _orig_complete(self, messages, tools)
    finally:
        acc = _acc.get()
        if acc is not None:
            acc[0] += time.perf_counter() - t0
            acc[1] += 1


_orig_process = Conversation._process


async def _timed_process(self, inbound_id, msg, key, verdict):
    # the lane runs the turn in its own task: the accumulator is set there
    _acc.set(LLM_SECONDS.setdefault(msg.message_id, [0.0, 0]))
    return await _orig_process(self, inbound_id, msg, key, verdict)


LLMClient.complete = _timed_complete
Conversation._process = _timed_process


class BenchTerminal(TerminalChannel):
    def __init__(self):
        super().__init__(out=open(os.devnull, "w"))
        self.waiters: dict[str, asyncio.Future] = {}
        self.done: dict[str, float] = {}

    async def turn_done(self, chat_id: str, message_id: str) -> None:
        self.done[message_id] = time.perf_counter()
        fut = self.waiters.pop(message_id, None)
        if fut and not fut.done():
            fut.set_result(None)


def model(req: dict):
    if req["messages"][0]["content"] == SUMMARY_INSTRUCTIONS:
        return text("- the user has been chatting about the weather; nothing is pending")
    if "[Memory flush before compaction]" in str(req["messages"][-1].get("content")):
        return text("NO_REPLY")
    return text("ok, noted")


def prefill(store, key: str, n: int) -> None:
    for i in range(n):
        store.commit_turn(
            key,
            f"pre{i}",
            [
                {
                    "role": "user",
                    "content": f"[Message metadata]\ntime: 2025-01-01 10:00 UTC\n\n[Message]\nhistory turn {i}: "
                    "how is the weather today, and what should I wear?",
                },
                {
                    "role": "assistant",
                    "content": f"Turn {i}: mild and dry; a light jacket is enough.",
                },
            ],
        )


async def measure(size: int, turns: int) -> dict:
    tmp = Path(tempfile.mkdtemp(prefix="chela-long-bench-"))
    fake = FakeLLM(keep_requests=False)
    fake.default = model
    await fake.start()
    cfg = make_config(tmp, fake)
    term = BenchTerminal()
    d = Daemon(cfg, channels={"terminal": term}, scheduler=False)
    await d.start()
    key = f"agent:{cfg.agent.id}:main"
    seq = iter(range(10**9))
    try:
        prefill(d.store, key, size)

        async def one(text_: str) -> tuple[float, float, int]:
            mid = f"m{next(seq)}"
            fut = asyncio.get_running_loop().create_future()
            term.waiters[mid] = fut
            acc = LLM_SECONDS.setdefault(mid, [0.0, 0])
            t0 = time.perf_counter()
            await d.conversation.on_inbound(
                InboundMessage(
                    channel="terminal",
                    chat_id="local",
                    sender_id="local",
                    sender_name="owner",
                    text=text_,
                    message_id=mid,
                    timestamp=time.time(),
                    chat_type="direct",
                )
            )
            await fut
            LLM_SECONDS.pop(mid, None)
            return term.done.pop(mid) - t0, acc[0], acc[1]

        await asyncio.to_thread(warm_up)
        await one("warm up")  # compacts the prefilled backlog
        compactions0 = d.store.summary_count(key)
        over, calls = [], 0
        for i in range(turns):
            e2e, llm_s, n = await one(f"measured turn {i}: anything new on the weather?")
            over.append((e2e - llm_s) * 1000)
            calls += n
        return {
            "size": size,
            "turns": turns,
            "p50": statistics.median(over),
            "mean": statistics.fmean(over),
            "p99": sorted(over)[int(0.99 * (len(over) - 1))],
            "compactions": d.store.summary_count(key) - compactions0,
            "llm_calls": calls,
            "stored": d.store.message_count(key),
            "in_view": len(d.store.window(key, limit=100000)),
        }
    finally:
        await d.stop()
        await fake.stop()


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="10,300,3000")
    ap.add_argument("--turns", type=int, default=200)
    args = ap.parse_args()
    logging.basicConfig(level=logging.WARNING)
    print(
        f"{'history':>8} {'turns':>6} {'p50 ms':>8} {'mean ms':>8} {'p99 ms':>8} {'compactions':>12} "
        f"{'llm calls':>10} {'stored msgs':>12} {'in view':>8}"
    )
    for size in (int(x) for x in args.sizes.split(",")):
        r = await measure(size, args.turns)
        print(
            f"{r['size']:>8} {r['turns']:>6} {r['p50']:>8.2f} {r['mean']:>8.2f} {r['p99']:>8.2f} "
            f"{r['compactions']:>12} {r['llm_calls']:>10} {r['stored']:>12} {r['in_view']:>8}",
            flush=True,
        )


if __name__ == "__main__":
    asyncio.run(main())
