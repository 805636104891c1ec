"""Turn-path benchmark (not a pass/fail test): the core without a platform.

    cd /work/main && python bench/turn_bench.py [--turns 1000] [--sessions 100]

A real ``Daemon`` with a ``TerminalChannel`` (``dm_scope = "per-peer"`` so every sender is
its own session), the real litellm client and an in-process ``FakeLLM`` answering "ok" at
once.  Messages enter through ``conversation.on_inbound``; a turn ends when the channel's
``turn_done`` hook fires.

Per turn we record
  * e2e      on_inbound() call → turn_done (includes lane queueing in the concurrent phase)
  * llm      time spent awaiting ``LLMClient.complete`` inside the turn (litellm + fake)
  * fake     time the fake server spent in its handler for that request
and report ``overhead = e2e - llm`` (Chela alone) and ``e2e - fake`` (Chela + litellm client).

Phases
  sequential   one turn at a time, sessions round-robin: the pure per-turn cost.
  concurrent   all sessions at once, each sending its messages back to back (closed loop).

Budget (issue): p50 overhead < 3 ms, p99 < 15 ms, peak RSS < 250 MB.
"""

from __future__ import annotations

import argparse
import asyncio
import contextvars
import gc
import json
import logging
import os
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bot.model import Completion, LLMClient, warm_up
from bot.model.response import _parse_response
from bot.app.daemon import Daemon
from bot.conversation.pipeline import Conversation
from channels.base import InboundMessage
from channels.terminal import TerminalChannel
from tests.e2e import make_config
from tests.fakes.llm import FakeLLM

# ----------------------------------------------------------------------------- probes
_turn_acc: contextvars.ContextVar[list | None] = contextvars.ContextVar("turn_acc", default=None)
_orig_complete = LLMClient.complete
_orig_process = Conversation._process


async def _timed_complete(self, messages, tools=None, **kw):
    t0 = time.perf_counter()
    try:
        return await _orig_complete(self, messages, tools, **kw)
    finally:
        acc = _turn_acc.get()
        if acc is not None:
            acc[0] += time.perf_counter() - t0
            acc[1] += 1


async def _timed_process(self, inbound_id, msg, key, verdict):
    acc = [0.0, 0, time.perf_counter()]  # llm seconds, llm calls, process start
    _turn_acc.set(acc)
    LLM_BY_MID[msg.message_id] = acc
    return await _orig_process(self, inbound_id, msg, key, verdict)


LLMClient.complete = _timed_complete
Conversation._process = _timed_process

LLM_BY_MID: dict[str, list] = {}
LAST_BODY: list[dict] = []


class BenchTerminal(TerminalChannel):
    """Terminal channel that swallows output and signals turn completion per message id."""

    def __init__(self):
        super().__init__(out=open(os.devnull, "w"))
        self.done: dict[str, float] = {}
        self.waiters: dict[str, asyncio.Future] = {}

    async def turn_done(self, chat_id: str, message_id: str) -> None:
        self.done[message_id] = time.perf_counter()
        fut = self.waiters.pop(message_id, None)
        if fut and not fut.done():
            fut.set_result(None)


def pct(values: list[float], p: float) -> float:
    if not values:
        return float("nan")
    s = sorted(values)
    k = min(len(s) - 1, max(0, round(p / 100 * (len(s) - 1))))
    return s[k]


def rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


async def run(turns: int, sessions: int, profile: str = "") -> None:
    logging.basicConfig(level=logging.WARNING)
    tmp = Path(tempfile.mkdtemp(prefix="chela-turn-bench-"))
    rss0 = rss_mb()
    fake = FakeLLM()
    await fake.start()
    fake_times = fake.handle_seconds
    cfg = make_config(tmp, fake, session={"dm_scope": "per-peer"})
    term = BenchTerminal()
    d = Daemon(cfg, channels={"terminal": term}, scheduler=False)
    await d.start()
    conversation = d.conversation
    seq = iter(range(10**9))

    async def one(sender: int, text: str) -> dict:
        mid = f"m{next(seq)}"
        fut = asyncio.get_running_loop().create_future()
        term.waiters[mid] = fut
        nfake = len(fake_times)
        t0 = time.perf_counter()
        await conversation.on_inbound(
            InboundMessage(
                channel="terminal",
                chat_id=f"c{sender}",
                sender_id=f"u{sender}",
                sender_name=f"user {sender}",
                text=text,
                message_id=mid,
                timestamp=time.time(),
                chat_type="direct",
            )
        )
        await fut
        if fake.requests:
            LAST_BODY[:] = fake.requests[-1:]
        fake.requests.clear()  # the fake records every body: that memory is the fake's, not Chela's
        fake.headers.clear()
        t1 = term.done.pop(mid)
        acc = LLM_BY_MID.pop(mid)
        return {
            "e2e": t1 - t0,
            "llm": acc[0],
            "calls": acc[1],
            "queued": acc[2] - t0,
            "nfake": nfake,
        }

    # warm-up: litellm import + one real call through the whole path (+ a few more)
    t = time.perf_counter()
    await asyncio.to_thread(warm_up)
    for i in range(5):
        await one(10_000 + i, "warm up")
    warm = time.perf_counter() - t
    fake_times.clear()
    rss_warm = rss_mb()

    per_session = max(1, turns // sessions)
    results: dict[str, dict] = {}

    # ---- phase 1: sequential
    gc.collect()
    recs = []
    fake_before = len(fake_times)
    prof = None
    if profile:
        import cProfile

        prof = cProfile.Profile()
        prof.enable()
    c0, t0 = time.process_time(), time.perf_counter()
    for r in range(per_session):
        for s in range(sessions):
            recs.append(await one(s, f"round {r}: hello from {s}, how are you today?"))
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    if prof is not None:
        prof.disable()
        prof.dump_stats(profile)
        import pstats

        for key in ("tottime", "cumulative"):
            print(f"\n--- sequential phase profile, top 30 by {key} ({len(recs)} turns) ---")
            pstats.Stats(prof).sort_stats(key).print_stats(30)
    fakes = fake_times[fake_before:]
    results["sequential"] = summarize(recs, fakes, wall, cpu)

    # ---- phase 2: concurrent (closed loop; fresh senders so history depth matches phase 1)
    gc.collect()
    fake_before = len(fake_times)

    async def session_loop(s: int, out: list) -> None:
        for r in range(per_session):
            out.append(await one(sessions + s, f"round {r}: hello from {s}, how are you today?"))

    recs = []
    c0, t0 = time.process_time(), time.perf_counter()
    await asyncio.gather(*(session_loop(s, recs) for s in range(sessions)))
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    fakes = fake_times[fake_before:]
    results["concurrent"] = summarize(recs, fakes, wall, cpu)

    # ---- phase 3: sequential with LLMClient.complete stubbed (no litellm, no HTTP): Chela alone
    gc.collect()
    stub_sessions = sessions * 2

    async def stub_complete(self, messages, tools=None, **kw):
        await asyncio.sleep(0)
        return Completion(
            text="ok", usage={"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}
        )

    global _orig_complete
    real_complete, _orig_complete = _orig_complete, stub_complete
    recs = []
    c0, t0 = time.process_time(), time.perf_counter()
    for r in range(per_session):
        for s in range(sessions):
            recs.append(
                await one(stub_sessions + s, f"round {r}: hello from {s}, how are you today?")
            )
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    results["stubbed"] = summarize(recs, [], wall, cpu)
    _orig_complete = real_complete

    # ---- phase 4: PROTOTYPE (not in bot/): LLMClient.complete as one plain aiohttp POST to
    # api_base/chat/completions (OpenAI-compatible endpoints), parsed by bot.model.response._parse_response
    import aiohttp

    gc.collect()
    http = aiohttp.ClientSession()

    async def direct_complete(self, messages, tools=None, **kw):
        payload = {"model": self.model.split("/", 1)[-1], "messages": messages}
        if tools:
            payload["tools"] = tools
        async with http.post(
            self.api_base.rstrip("/") + "/chat/completions",
            json=payload,
            headers={"Authorization": f"Bearer {self._api_key or 'sk-local'}"},
        ) as resp:
            data = await resp.json()
        return _parse_response(data)

    _orig_complete = direct_complete
    recs = []
    fake_before = len(fake_times)
    c0, t0 = time.process_time(), time.perf_counter()
    for r in range(per_session):
        for s in range(sessions):
            recs.append(
                await one(stub_sessions * 2 + s, f"round {r}: hello from {s}, how are you today?")
            )
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    results["direct"] = summarize(recs, fake_times[fake_before:], wall, cpu)

    async def conc_loop(s: int, out: list) -> None:
        for r in range(per_session):
            out.append(
                await one(stub_sessions * 3 + s, f"round {r}: hello from {s}, how are you today?")
            )

    recs = []
    fake_before = len(fake_times)
    c0, t0 = time.process_time(), time.perf_counter()
    await asyncio.gather(*(conc_loop(s, recs) for s in range(sessions)))
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    results["direct-conc"] = summarize(recs, fake_times[fake_before:], wall, cpu)
    _orig_complete = real_complete
    await http.close()

    # ---- reference: a plain aiohttp POST of a typical request body to the fake
    body = (
        dict(LAST_BODY[0])
        if LAST_BODY
        else {"model": "fake-model", "messages": [{"role": "user", "content": "hi"}]}
    )
    raw = []
    async with aiohttp.ClientSession() as http:
        for i in range(300):
            t = time.perf_counter()
            async with http.post(fake.base_url + "/chat/completions", json=body) as resp:
                await resp.read()
            raw.append((time.perf_counter() - t) * 1000)
            fake.requests.clear()
    raw_rtt = statistics.median(raw[50:])

    await d.stop()
    await fake.stop()

    print(
        f"\nturn_bench: {per_session * sessions} turns x 2 phases over {sessions} sessions each, "
        f"nproc={os.cpu_count()}, python {sys.version.split()[0]}, "
        f"max_concurrent_turns={cfg.session.max_concurrent_turns}"
    )
    print(
        f"warm-up (litellm import + 5 turns): {warm * 1000:.0f} ms; RSS before daemon {rss0:.0f} MB, "
        f"after warm-up {rss_warm:.0f} MB\n"
    )
    hdr = (
        f"{'metric':<44}{'sequential':>12}{'concurrent':>12}{'seq stub':>10}"
        f"{'seq direct*':>12}{'conc direct*':>13}"
    )
    print(hdr)
    print("-" * len(hdr))
    rows = [
        ("turns/s", "tps", "{:.0f}"),
        ("CPU ms per turn (whole process)", "cpu_ms", "{:.2f}"),
        ("e2e latency p50 (ms)", "e2e50", "{:.2f}"),
        ("e2e latency p99 (ms)", "e2e99", "{:.2f}"),
        ("llm await p50 (ms) [litellm+fake]", "llm50", "{:.2f}"),
        ("fake handler p50 (ms)", "fake50", "{:.2f}"),
        ("lane queue wait p50 (ms)", "q50", "{:.2f}"),
        ("OVERHEAD e2e-llm p50 (ms)  [<3]", "ov50", "{:.2f}"),
        ("OVERHEAD e2e-llm p99 (ms)  [<15]", "ov99", "{:.2f}"),
        ("OVERHEAD excl. lane queue p50 (ms)", "ovq50", "{:.2f}"),
        ("OVERHEAD excl. lane queue p99 (ms)", "ovq99", "{:.2f}"),
        ("litellm client p50 (llm-fake, ms)", "lite50", "{:.2f}"),
        ("e2e-fake p50 (ms) [Chela+litellm]", "ef50", "{:.2f}"),
        ("e2e-fake p99 (ms) [Chela+litellm]", "ef99", "{:.2f}"),
    ]
    for label, key, fmt in rows:
        print(
            f"{label:<44}"
            + "".join(
                f"{fmt.format(results[ph][key]):>{w}}"
                for ph, w in (
                    ("sequential", 12),
                    ("concurrent", 12),
                    ("stubbed", 10),
                    ("direct", 12),
                    ("direct-conc", 13),
                )
            )
        )
    print(
        f"{'plain aiohttp POST to the fake, median (ms)':<44}{raw_rtt:>12.2f}   "
        f"(request body {len(json.dumps(body))} chars, {len(body.get('tools') or [])} tools)"
    )
    print(f"{'peak RSS (MB)  [<250]':<44}{rss_mb():>12.0f}")
    print("seq stub: LLMClient.complete replaced by an instant in-process answer (Chela alone).")
    print(
        "* direct: PROTOTYPE, LLMClient.complete as one plain aiohttp POST instead of litellm.acompletion."
    )


def summarize(recs: list[dict], fakes: list[float], wall: float, cpu: float) -> dict:
    n = len(recs)
    e2e = [r["e2e"] * 1000 for r in recs]
    llm = [r["llm"] * 1000 for r in recs]
    q = [max(0.0, r["queued"]) * 1000 for r in recs]
    ov = [a - b for a, b in zip(e2e, llm)]
    ovq = [a - b for a, b in zip(ov, q)]
    fk = [f * 1000 for f in fakes]
    fake50 = statistics.median(fk) if fk else float("nan")
    ef = [a - fake50 for a in e2e]
    return {
        "tps": n / wall,
        "cpu_ms": cpu / n * 1000,
        "e2e50": pct(e2e, 50),
        "e2e99": pct(e2e, 99),
        "llm50": pct(llm, 50),
        "fake50": fake50,
        "q50": pct(q, 50),
        "ov50": pct(ov, 50),
        "ov99": pct(ov, 99),
        "ovq50": pct(ovq, 50),
        "ovq99": pct(ovq, 99),
        "lite50": pct(llm, 50) - fake50,
        "ef50": pct(ef, 50),
        "ef99": pct(ef, 99),
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--turns", type=int, default=1000)
    ap.add_argument("--sessions", type=int, default=100)
    ap.add_argument(
        "--profile",
        metavar="FILE",
        default="",
        help="cProfile the sequential phase: save the stats to FILE and print the top entries",
    )
    ap.add_argument(
        "--path",
        choices=("openai_compat", "litellm"),
        default="openai_compat",
        help="the model path for the fake's openai/ model (SPEC §12): Chela's own client "
        "(the default since issue 28) or litellm (CHELA_MODEL_PATH=litellm)",
    )
    a = ap.parse_args()
    if a.path == "litellm":
        os.environ["CHELA_MODEL_PATH"] = "litellm"
    print(f"model path: {a.path}", file=sys.stderr)
    asyncio.run(run(a.turns, a.sessions, a.profile))


if __name__ == "__main__":
    main()
