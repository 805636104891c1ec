"""Start-up and RSS of the real `chela run` process with 1, 2 and 3 Telegram accounts (not a
pass/fail test).

    cd /work/main && python bench/accounts_bench.py [--runs 3]

Each run starts `python -m bot run` against one FakeTelegram serving one bot token per
account and a FakeLLM, with a fresh state dir; the account counts are interleaved run by run.
It measures:

  ready      process spawn → the daemon's "ready" log line (every account polling)
  replies    "ready" → one reply received on every account (one message to each bot)
  rss        the daemon's VmRSS once every account has answered

Prints min / median per account count.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.fakes.llm import FakeLLM  # noqa: E402
from tests.fakes.telegram import FakeTelegram  # noqa: E402

TOKENS = ["111:BENCH-home", "222:BENCH-work", "333:BENCH-play"]
NAMES = ["default", "work", "play"]


def config(path: Path, tmp: Path, tg: FakeTelegram, llm: FakeLLM, accounts: int) -> None:
    lines = [
        "[agent]",
        f"workspace = {json.dumps(str(tmp / 'ws'))}",
        f"state_dir = {json.dumps(str(tmp / 'state'))}",
        'model = "openai/fake-model"',
        f"api_base = {json.dumps(llm.base_url)}",
        "[heartbeat]",
        'every = "0m"',
        "[channels.telegram]",
        "enabled = true",
        'token_env = "BENCH_TG_0"',
        f"api_base = {json.dumps(tg.api_base)}",
        "poll_timeout = 1",
        'allow_from = ["42"]',
    ]
    for i in range(1, accounts):
        lines += [f"[channels.telegram.accounts.{NAMES[i]}]", f'token_env = "BENCH_TG_{i}"']
    path.write_text("\n".join(lines) + "\n")


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


async def one_run(accounts: int) -> tuple[float, float, float]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.update({f"BENCH_TG_{i}": TOKENS[i] for i in range(3)})
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        async with FakeTelegram(token=TOKENS[0], bot_username="home_bot") as tg, FakeLLM() as llm:
            bots = [tg] + [tg.add_bot(TOKENS[i], f"{NAMES[i]}_bot") for i in range(1, accounts)]
            config(tmp / "config.toml", tmp, tg, llm, accounts)
            t0 = time.perf_counter()
            proc = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "bot",
                "run",
                "--config",
                str(tmp / "config.toml"),
                env=env,
                stdout=asyncio.subprocess.DEVNULL,
                stderr=asyncio.subprocess.PIPE,
            )
            assert proc.stderr is not None
            while b"ready in" not in (line := await proc.stderr.readline()):
                if not line:
                    raise RuntimeError("the daemon exited before it was ready")
            ready = time.perf_counter() - t0
            drain = asyncio.create_task(proc.stderr.read())
            t1 = time.perf_counter()
            for bot in bots:
                bot.inject_message(42, "hello", from_id=42)
            for bot in bots:
                await bot.wait_for(lambda b=bot: b.sent, timeout=60)
            replies = time.perf_counter() - t1
            rss = rss_mb(proc.pid)
            proc.terminate()
            await proc.wait()
            drain.cancel()
    return ready * 1000, replies * 1000, rss


async def main(runs: int) -> None:
    results: dict[int, list[tuple[float, float, float]]] = {1: [], 2: [], 3: []}
    for _ in range(runs):
        for n, rows in results.items():  # interleaved: 1, 2, 3, 1, 2, 3, ...
            rows.append(await one_run(n))
    print(
        f"{'accounts':>8} {'ready ms (min/med)':>20} {'replies ms (min/med)':>22} {'RSS MB (min/med)':>18}"
    )
    for n, rows in results.items():
        cols = []
        for k in range(3):
            vals = [r[k] for r in rows]
            cols.append(
                f"{min(vals):.0f}/{statistics.median(vals):.0f}"
                if k < 2
                else f"{min(vals):.1f}/{statistics.median(vals):.1f}"
            )
        print(f"{n:>8} {cols[0]:>20} {cols[1]:>22} {cols[2]:>18}")


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    asyncio.run(main(ap.parse_args().runs))
