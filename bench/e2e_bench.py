"""End-to-end benchmark (not a pass/fail test): FakeTelegram → daemon → FakeLLM → FakeTelegram.

    cd /work/main && python bench/e2e_bench.py [--chats 200] [--per-chat 10] [--rate 100]

The real daemon (python-telegram-bot client, litellm, SQLite store) against the wire-level
fakes, all in this one process and event loop (so the fakes' own CPU is included: their
handler time is reported).  Every sender is an owner (``allow_from``), ``dm_scope = "per-channel-peer"`` (one
session per chat), ``poll_timeout = 1``.  A message's latency runs from ``inject_message`` to
the fake recording the matching ``sendMessage`` (the k-th reply in a chat answers the k-th
message of that chat: sessions keep order).

Phases
  start-up     Daemon.start() call → first getUpdates the fake receives (fresh process,
               litellm not yet imported: the daemon imports it in a thread after start).
  idle         one message at a time (no queueing): the floor latency.
  burst        chats × per-chat messages injected at once: messages/s = all / (last reply - first inject).
  paced        the same count injected at a steady --rate msgs/s spread over the chats: latency under load.

Budgets: ≥ 150 messages/s, p99 < 100 ms, start-up < 1.5 s, RSS < 300 MB.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import logging
import os
import resource
import sys
import tempfile
import time
from collections import defaultdict, deque
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bot.model import litellm_needed, litellm_path
from bot.app.daemon import Daemon
from tests.e2e import TG_TOKEN, make_config, telegram_section
from tests.fakes.llm import FakeLLM
from tests.fakes.telegram import FakeTelegram


T0 = time.perf_counter()
TURNS = 0  # --turns: session.max_concurrent_turns (0 = the default)


def rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def pct(values: list[float], p: float) -> float:
    if not values:
        return float("nan")
    s = sorted(values)
    return s[min(len(s) - 1, max(0, round(p / 100 * (len(s) - 1))))]


class TimedTelegram(FakeTelegram):
    """FakeTelegram that timestamps injections, sendMessage records and the first getUpdates."""

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.first_poll: float | None = None
        self.injected: dict[int, deque[float]] = defaultdict(deque)  # chat → inject times, FIFO
        self.latencies: list[tuple[float, float]] = []  # (inject, sent)
        self.handler_s = 0.0

    def inject_timed(self, chat_id: int, text: str) -> None:
        self.injected[chat_id].append(time.perf_counter())
        self.inject_message(chat_id, text, from_id=chat_id, first_name=f"User{chat_id}")

    def _record(self, method, kind, msg, params, reply_id, **extra):
        now = time.perf_counter()
        super()._record(method, kind, msg, params, reply_id, **extra)
        q = self.injected.get(msg["chat"]["id"])
        if method == "sendMessage" and q:
            self.latencies.append((q.popleft(), now))
        # keep the fake's own memory flat: the records are not needed here
        self.sent.clear()
        self._sent_by_key.clear()
        self.messages.clear()
        self.calls.clear()

    async def _m_getupdates(self, method, params):
        if self.first_poll is None:
            self.first_poll = time.perf_counter()
        return await super()._m_getupdates(method, params)

    async def _dispatch(self, request):
        t = time.perf_counter()
        try:
            return await super()._dispatch(request)
        finally:
            # getUpdates long-polls: count only its non-waiting part roughly by excluding it
            if not request.path.endswith("/getUpdates"):
                self.handler_s += time.perf_counter() - t


async def wait_replies(tg: TimedTelegram, n: int, timeout: float) -> bool:
    deadline = time.perf_counter() + timeout
    while len(tg.latencies) < n:
        if time.perf_counter() > deadline:
            print(
                f"TIMED OUT: {len(tg.latencies)}/{n} replies after {timeout:.0f}s", file=sys.stderr
            )
            return False
        await asyncio.sleep(0.002)
    return True


async def run(chats: int, per_chat: int, rate: float) -> None:
    logging.basicConfig(
        level=logging.WARNING, format="%(relativeCreated)d %(levelname)s %(name)s: %(message)s"
    )
    tmp = Path(tempfile.mkdtemp(prefix="chela-e2e-bench-"))
    llm = FakeLLM(keep_requests=False)  # the fake's memory is not Chela's
    llm_times = llm.handle_seconds
    await llm.start()

    tg = TimedTelegram(token=TG_TOKEN, bot_username="chela_bot")
    await tg.start()
    # every bench sender is an owner (by id), so turns carry the owner's tools and prompt,
    # as in a real day's use; "open" DMs would make them guests with a smaller request
    owners = [
        str(1_000_000 + k)
        for k in (*range(50), *range(1000, 1000 + chats), *range(5000, 5000 + chats))
    ]
    cfg = make_config(
        tmp,
        llm,
        channels=telegram_section(tg, dm_policy="open", allow_from=owners, poll_timeout=1),
        session={
            "dm_scope": "per-channel-peer",
            **({"max_concurrent_turns": TURNS} if TURNS else {}),
        },
    )
    rss_before = rss_mb()

    # ---- start-up
    d = Daemon(cfg, scheduler=False)
    t0 = time.perf_counter()
    await d.start()
    t_ready = time.perf_counter() - t0
    while tg.first_poll is None:
        await asyncio.sleep(0.001)
    t_poll = tg.first_poll - t0
    # wait for the background litellm import the daemon started (only a config with a
    # model on litellm's path starts one), then warm the whole path
    t_imp = time.perf_counter()
    while litellm_needed(cfg) and litellm_path.loaded() is None:
        await asyncio.sleep(0.01)
    t_imp = time.perf_counter() - t_imp
    for i in range(5):
        tg.inject_timed(9_000_000 + i, "warm up")
    await wait_replies(tg, 5, 60)

    base_chat = 1_000_000
    results = {}

    # ---- idle: one at a time
    gc.collect()
    tg.latencies.clear()
    for i in range(50):
        tg.inject_timed(base_chat + i, f"idle message {i}")
        await wait_replies(tg, i + 1, 30)
    results["idle"] = stats(tg.latencies, 50, None)

    # ---- burst
    gc.collect()
    tg.latencies.clear()
    llm_times.clear()
    tg.handler_s = 0.0
    n = chats * per_chat
    c0 = time.process_time()
    t_first = time.perf_counter()
    for k in range(per_chat):
        for c in range(chats):
            tg.inject_timed(
                base_chat + 1000 + c, f"message {k} from chat {c}: what's on my calendar?"
            )
    ok = await wait_replies(tg, n, 60)
    t_last = max(s for _, s in tg.latencies) if ok else time.perf_counter()
    results["burst"] = stats(tg.latencies, n, t_last - t_first)
    results["burst"]["cpu"] = (time.process_time() - c0) / n * 1000
    results["burst"]["fake"] = (sum(llm_times) + tg.handler_s) / n * 1000
    print(f"burst done at {(time.perf_counter() - T0) * 1000:.0f} ms", file=sys.stderr)

    # ---- paced (open loop)
    gc.collect()
    tg.latencies.clear()
    llm_times.clear()
    tg.handler_s = 0.0
    c0 = time.process_time()
    t_first = time.perf_counter()
    for i in range(n):
        target = t_first + i / rate
        delay = target - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        c = i % chats
        tg.inject_timed(
            base_chat + 5000 + c, f"message {i // chats} from chat {c}: what's on my calendar?"
        )
    ok = await wait_replies(tg, n, 60)
    t_last = max(s for _, s in tg.latencies) if ok else time.perf_counter()
    results["paced"] = stats(tg.latencies, n, t_last - t_first)
    results["paced"]["cpu"] = (time.process_time() - c0) / n * 1000
    results["paced"]["fake"] = (sum(llm_times) + tg.handler_s) / n * 1000

    t = time.perf_counter()
    await d.stop()
    t_stop = time.perf_counter() - t
    await tg.stop()
    await llm.stop()

    print(
        f"\ne2e_bench: {chats} chats x {per_chat} messages, nproc={os.cpu_count()}, python {sys.version.split()[0]}, "
        f"max_concurrent_turns={cfg.session.max_concurrent_turns}, fakes in-process"
    )
    print(
        f"start-up: Daemon.start() → first getUpdates {t_poll * 1000:.0f} ms  [<1500]   "
        f"(start() returned after {t_ready * 1000:.0f} ms; background litellm import done "
        f"{t_imp * 1000:.0f} ms later; stop() {t_stop * 1000:.0f} ms)"
    )
    hdr = f"{'phase':<26}{'msgs':>6}{'msg/s':>8}{'p50 ms':>9}{'p90 ms':>9}{'p99 ms':>9}{'max ms':>9}{'CPU ms/msg':>12}{'fakes ms/msg':>14}"
    print(hdr)
    print("-" * len(hdr))
    labels = {
        "idle": "idle (1 at a time)",
        "burst": "burst (all at once)",
        "paced": f"paced {rate:g}/s",
    }
    for k in ("idle", "burst", "paced"):
        r = results[k]
        print(
            f"{labels[k]:<26}{r['n']!s:>6}{r['tps']:>8.0f}{r['p50']:>9.1f}{r['p90']:>9.1f}{r['p99']:>9.1f}{r['max']:>9.1f}"
            f"{r.get('cpu', float('nan')):>12.2f}{r.get('fake', float('nan')):>14.2f}"
        )
    print(f"peak RSS: {rss_mb():.0f} MB [<300]  (before the daemon: {rss_before:.0f} MB)")
    print(f"litellm imported: {'litellm' in sys.modules}")
    print("budgets: >= 150 msg/s (burst), p99 < 100 ms (paced), start-up < 1500 ms")


def stats(lat: list[tuple[float, float]], n: int, span: float | None) -> dict:
    ms = [(s - i) * 1000 for i, s in lat] or [float("nan")]
    n_ok = len(lat)
    return {
        "n": n_ok if n_ok == n else f"{n_ok}/{n}",
        "tps": (n_ok / span) if span else float("nan"),
        "p50": pct(ms, 50),
        "p90": pct(ms, 90),
        "p99": pct(ms, 99),
        "max": max(ms),
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--chats", type=int, default=200)
    ap.add_argument("--per-chat", type=int, default=10)
    ap.add_argument("--rate", type=float, default=100.0, help="paced phase: messages per second")
    ap.add_argument(
        "--path",
        choices=("openai_compat", "litellm"),
        default="openai_compat",
        help="the model path for the fake's openai/ model (SPEC §12): Chela's own client "
        "(the default since issue 28) or litellm (CHELA_MODEL_PATH=litellm)",
    )
    ap.add_argument("--turns", type=int, default=0, help="session.max_concurrent_turns")
    a = ap.parse_args()
    global TURNS  # one bench run per process
    TURNS = a.turns
    if a.path == "litellm":
        os.environ["CHELA_MODEL_PATH"] = "litellm"
    print(f"model path: {a.path}", file=sys.stderr)
    asyncio.run(run(a.chats, a.per_chat, a.rate))


if __name__ == "__main__":
    main()
