"""Outage benchmark (numbers, not a pass/fail test): the drain after a model outage.

    cd /work/main && python bench/outage_bench.py [--messages 1000] [--chats 100] [--runs 3]

A real ``Daemon`` with the Telegram channel against the Telegram wire fake and the fake LLM.
The model is down (HTTP 500) while ``--messages`` messages arrive across ``--chats`` chats
(``dm_scope = "per-peer"``: one session per chat); each chat must get exactly one notice and
every message is kept.  Then the model comes back (answering at once) and the bench times
the drain: from the model's return to the last answer handed to the platform.  For scale,
the same number of messages is then sent with the model up (``normal``: arrival to the last
answer).  Each run checks that every message was answered exactly once, in order per chat.

Reported per run: hold (s until every message is kept), drain (s), drain rate (messages/s),
normal rate (messages/s), notices.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import re
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bot.app.daemon import Daemon
from bot.conversation.outage import NOTICE
from bot.store import pending
from tests.e2e import TG_TOKEN, make_config, telegram_section
from tests.fakes.llm import FakeLLM, last_user_text, text
from tests.fakes.telegram import FakeTelegram

TOKEN = re.compile(r"c(\d+)-m(\d+)")


def echo(request: dict):
    m = TOKEN.search(last_user_text(request))
    return text(f"re {m.group(0)}" if m else "OK")


async def wait(predicate, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise SystemExit("timed out")
        await asyncio.sleep(0.01)


def check(tg, chats: list[int], per_chat: int, tag: str) -> None:
    seen: dict[str, int] = defaultdict(int)
    order: dict[int, list[int]] = defaultdict(list)
    for s in tg.sent:
        m = TOKEN.search(s.text or "")
        if m and m.group(0).startswith("c") and (s.text or "").startswith(f"re {tag}"):
            seen[m.group(0)] += 1
            order[int(m.group(1))].append(int(m.group(2)))
    want = {f"c{c}-m{k}" for c in chats for k in range(per_chat)}
    assert set(seen) == want, f"lost {len(want - set(seen))}"
    assert all(n == 1 for n in seen.values()), "an answer was sent twice"
    assert all(order[c] == sorted(order[c]) for c in chats), "out of order"


def answered(tg, tag: str) -> int:
    return sum(1 for s in tg.sent if (s.text or "").startswith(f"re {tag}"))


async def one_run(n: int, n_chats: int) -> dict:
    per_chat = n // n_chats
    first = 100_000
    async with FakeLLM(keep_requests=False) as llm:
        tg = FakeTelegram(token=TG_TOKEN, bot_username="chela_bot")
        await tg.start()
        try:
            with tempfile.TemporaryDirectory() as tmp:
                chats = [first + i for i in range(n_chats)]
                cfg = make_config(
                    Path(tmp),
                    llm,
                    agent={"llm_max_retries": 0},
                    session={"dm_scope": "per-peer", "max_concurrent_turns": 8},
                    channels=telegram_section(tg, allow_from=[str(c) for c in chats]),
                    outage={"probe_initial": "100ms", "probe_max": "100ms"},
                )
                d = Daemon(cfg)
                await d.start()
                try:
                    return await _measure(d, llm, tg, chats, per_chat)
                finally:
                    await d.stop()
        finally:
            await tg.stop()


async def _measure(d, llm, tg, chats: list[int], per_chat: int) -> dict:
    n = len(chats) * per_chat
    llm.go_down()
    t0 = time.perf_counter()
    for k in range(per_chat):
        for c in chats:
            tg.inject_message(c, f"c{c}-m{k}", from_id=c)
    await wait(lambda: len(pending.waiting(d.store)) == n, 300)
    hold = time.perf_counter() - t0
    notices = sum(1 for s in tg.sent if s.text == NOTICE)
    llm.come_up(echo)
    t1 = time.perf_counter()
    await wait(lambda: answered(tg, "c") == n, 600)
    drain = time.perf_counter() - t1
    check(tg, chats, per_chat, "c")
    # the same load with the model up, for scale
    t2 = time.perf_counter()
    for k in range(per_chat):
        for c in chats:
            tg.inject_message(c, f"c{c}-m{k + per_chat}", from_id=c)
    await wait(lambda: answered(tg, "c") == 2 * n, 600)
    normal = time.perf_counter() - t2
    return {
        "hold_s": hold,
        "drain_s": drain,
        "drain_rate": n / drain,
        "normal_rate": n / normal,
        "notices": notices,
    }


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--messages", type=int, default=1000)
    ap.add_argument("--chats", type=int, default=100)
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    logging.basicConfig(level=logging.ERROR)
    results = []
    for i in range(args.runs):
        r = await one_run(args.messages, args.chats)
        results.append(r)
        print(
            f"run {i + 1}: hold {r['hold_s']:.2f} s, drain {r['drain_s']:.2f} s "
            f"({r['drain_rate']:.0f} msg/s), normal {r['normal_rate']:.0f} msg/s, "
            f"notices {r['notices']}"
        )
    rates = [r["drain_rate"] for r in results]
    normal = [r["normal_rate"] for r in results]
    print(
        f"drain rate: best {max(rates):.0f} msg/s, median {statistics.median(rates):.0f} msg/s; "
        f"normal: best {max(normal):.0f}, median {statistics.median(normal):.0f} msg/s"
    )


if __name__ == "__main__":
    asyncio.run(main())
