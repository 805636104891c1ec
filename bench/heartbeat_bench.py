"""Heartbeat cost benchmark (not a pass/fail test).

    cd /work/main && python bench/heartbeat_bench.py [--ticks 100]

Issue: the tokens sent to the model per heartbeat tick of an idle session must not grow
with the number of ticks, and an effectively empty HEARTBEAT.md must cost no model call.

A real ``Daemon`` (no channels, no scheduler, ``heartbeat.every = "0m"``, ``target = "none"``)
and a FakeLLM that answers ``HEARTBEAT_OK``.  ``daemon.scheduled.heartbeat()`` is called
directly ``--ticks`` times.

Per tick: messages in the request, chars of all message contents (tokens ≈ chars / 4), and the
fake's ``usage.prompt_tokens`` (it reports len(json.dumps(messages)) // 4).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bot.app.daemon import Daemon
from tests.e2e import make_config
from tests.fakes.llm import FakeLLM, text

CONTENT_MD = "# Heartbeat checklist\n\n- check the inbox for anything urgent\n- remind me about the dentist on Friday\n"
EMPTY_MD = "# Heartbeat checklist\n\n## Morning\n\n## Evening\n\n- [ ]\n"


def content_chars(req: dict) -> int:
    n = 0
    for m in req.get("messages", []):
        c = m.get("content")
        n += len(c) if isinstance(c, str) else len(json.dumps(c)) if c else 0
        if m.get("tool_calls"):
            n += len(json.dumps(m["tool_calls"]))
    return n


async def run_case(md: str, ticks: int, reply: str) -> tuple[list[dict], dict[str, int], float]:
    tmp = Path(tempfile.mkdtemp(prefix="chela-hb-bench-"))
    async with FakeLLM() as fake:
        fake.default = lambda req: text(reply)
        cfg = make_config(tmp, fake, heartbeat={"every": "0m", "target": "none"})
        d = Daemon(cfg, channels={}, scheduler=False)
        await d.start()
        try:
            (cfg.agent.workspace / "HEARTBEAT.md").write_text(md)
            rows, statuses = [], {}
            t0 = time.perf_counter()
            for i in range(1, ticks + 1):
                before = len(fake.requests)
                out = await d.scheduled.heartbeat()
                statuses[out.status] = statuses.get(out.status, 0) + 1
                reqs = fake.requests[before:]
                if reqs:
                    r = reqs[-1]
                    rows.append(
                        {
                            "tick": i,
                            "calls": len(reqs),
                            "messages": len(r["messages"]),
                            "chars": content_chars(r),
                            "tools": len(json.dumps(r.get("tools") or [])),
                            "prompt_tokens": max(1, len(json.dumps(r["messages"])) // 4),
                        }
                    )
                else:
                    rows.append({"tick": i, "calls": 0})
            elapsed = time.perf_counter() - t0
            stored = d.store.message_count(f"agent:{cfg.agent.id}:main")
            statuses["(stored messages in main session)"] = stored
        finally:
            await d.stop()
    return rows, statuses, elapsed


async def main(ticks: int) -> None:
    logging.basicConfig(level=logging.WARNING)
    rows, statuses, elapsed = await run_case(CONTENT_MD, ticks, "HEARTBEAT_OK")
    print(
        f"\nheartbeat_bench: {ticks} ticks, HEARTBEAT.md with content, model answers HEARTBEAT_OK, "
        f"nproc={os.cpu_count()}"
    )
    hdr = f"{'tick':>6}{'model calls':>13}{'messages':>10}{'content chars':>15}{'~tokens (chars/4)':>19}{'fake prompt_tokens':>20}{'+tools JSON chars':>18}"
    print(hdr)
    print("-" * len(hdr))
    for t in sorted({1, 2, 10, 50, ticks}):
        r = rows[t - 1]
        if r["calls"]:
            print(
                f"{t:>6}{r['calls']:>13}{r['messages']:>10}{r['chars']:>15}{r['chars'] // 4:>19}{r['prompt_tokens']:>20}{r['tools']:>18}"
            )
        else:
            print(f"{t:>6}{0:>13}{'-':>10}{'-':>15}{'-':>19}{'-':>20}{'-':>18}")
    called = [r for r in rows if r["calls"]]
    if called:
        growth = called[-1]["prompt_tokens"] - called[0]["prompt_tokens"]
        print(
            f"growth tick 1 → {ticks}: {growth:+d} prompt tokens (must be ~0); "
            f"total model calls {sum(r['calls'] for r in rows)}; outcomes {statuses}; "
            f"{elapsed / ticks * 1000:.1f} ms per tick"
        )

    rows_e, statuses_e, _ = await run_case(EMPTY_MD, ticks, "HEARTBEAT_OK")
    calls_e = sum(r["calls"] for r in rows_e)
    print(
        f"\neffectively-empty HEARTBEAT.md (headings / empty checkbox only): model calls in {ticks} ticks = "
        f"{calls_e}  [must be 0]; outcomes {statuses_e}"
    )
    print(f"peak RSS: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB")


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--ticks", type=int, default=100)
    asyncio.run(main(ap.parse_args().ticks))
