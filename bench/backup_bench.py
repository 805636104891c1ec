"""Backup benchmark (numbers, not a pass/fail test).

    cd /work/main && python bench/backup_bench.py [--messages 10000] [--rounds 8] [--seconds 6] [--rate 5]

1. size and time: a state of --messages stored messages (half user, half assistant, over 50
   sessions, ~300 and ~700 characters) and a starter workspace; ``take`` (the code behind
   ``chela backup``) --rounds times, then ``verify``: best and median seconds, archive size.
2. reply latency: the real daemon (FakeTelegram → daemon → FakeLLM, in this process) on that
   state, messages paced at --rate per second over 20 chats for --seconds per window (5/s
   keeps a loaded 2-core VM short of saturation, where latency measures the queue); the
   p50/p99 of inject → sendMessage in windows that alternate:
     idle      nothing else running;
     cli       `chela backup` as its own process, back to back for the whole window;
     thread    ``take`` in a worker thread of the daemon's process, back to back (what the
               scheduled backup does).
   Goal: p99 while a backup runs within 2x of idle.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from e2e_bench import TimedTelegram, pct

from bot.app.daemon import Daemon
from bot.config import Config
from bot.schedule.backups import off_loop
from bot.prompt.init import init_workspace
from bot.store import Store
from bot.store.backup import take
from bot.store.restore import verify
from tests.e2e import TG_TOKEN, make_config, telegram_section
from tests.fakes.llm import FakeLLM

ROOT = Path(__file__).resolve().parents[1]
USER = "Could you look at my notes for the week and tell me what I promised to whom? " * 4
ASSISTANT = "Here is what I found in your notes, grouped by person and by day. " * 10


def fill(cfg: Config, messages: int) -> None:
    init_workspace(cfg.agent.workspace)
    store = Store(cfg.db_path)
    for k in range(messages // 2):
        key = f"agent:main:telegram:direct:{1_000_000 + k % 50}"
        store.commit_turn(
            key,
            uuid.uuid4().hex,
            [
                {"role": "user", "content": f"{k}: {USER}"},
                {"role": "assistant", "content": f"{k}: {ASSISTANT}"},
            ],
        )
    store.close()


def size_and_time(cfg: Config, rounds: int) -> None:
    times, sizes, checks = [], [], []
    out = Path(tempfile.mkdtemp(prefix="chela-backup-bench-out-"))
    for i in range(rounds):
        done = take(cfg, out=out / f"b{i}.tar.gz")
        times.append(done.seconds)
        sizes.append(done.size)
        t = time.perf_counter()
        verify(done.path)
        checks.append(time.perf_counter() - t)
    db = cfg.db_path.stat().st_size
    print(f"database {db / 1e6:.1f} MB; archive {sizes[-1] / 1e6:.2f} MB ({done.members} members)")
    print(
        f"backup  best {min(times) * 1000:.0f} ms  median {statistics.median(times) * 1000:.0f} ms"
    )
    print(
        f"verify  best {min(checks) * 1000:.0f} ms  median {statistics.median(checks) * 1000:.0f} ms"
    )


async def cli_backups(cfg_path: Path, out: Path, stop: asyncio.Event) -> int:
    n = 0
    while not stop.is_set():
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "bot",
            "backup",
            "--config",
            str(cfg_path),
            "--out",
            str(out / f"cli{n}.tar.gz"),
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            stdout=subprocess.DEVNULL,
        )
        await proc.wait()
        n += 1
    return n


async def thread_backups(cfg: Config, out: Path, stop: asyncio.Event) -> int:
    n = 0
    while not stop.is_set():
        await off_loop(take, cfg, out=out / f"t{n}.tar.gz")
        n += 1
    return n


async def window(tg: TimedTelegram, seconds: float, rate: float, base: int) -> list[float]:
    tg.latencies.clear()
    t0 = time.perf_counter()
    n = int(seconds * rate)
    for i in range(n):
        wait = t0 + i / rate - time.perf_counter()
        if wait > 0:
            await asyncio.sleep(wait)
        tg.inject_timed(base + i % 20, f"paced message {i}")
    deadline = time.perf_counter() + 60
    while len(tg.latencies) < n and time.perf_counter() < deadline:
        await asyncio.sleep(0.005)
    return [(s - i) * 1000 for i, s in tg.latencies]


async def latency(cfg: Config, cfg_path: Path, tg, seconds: float, rate: float, rounds: int):
    d = Daemon(cfg, scheduler=False)
    await d.start()
    out = Path(tempfile.mkdtemp(prefix="chela-backup-bench-lat-"))
    results: dict[str, list[list[float]]] = {"idle": [], "cli": [], "thread": []}
    counts = {"cli": 0, "thread": 0}
    try:
        await window(tg, 2, rate, 1_000_000)  # warm up
        for r in range(rounds):
            for mode in ("idle", "cli", "thread"):
                stop = asyncio.Event()
                runner = None
                if mode == "cli":
                    runner = asyncio.ensure_future(cli_backups(cfg_path, out, stop))
                elif mode == "thread":
                    runner = asyncio.ensure_future(thread_backups(cfg, out, stop))
                await asyncio.sleep(0.3 if runner else 0)  # the backup is under way
                results[mode].append(await window(tg, seconds, rate, 1_000_000))
                stop.set()
                if runner is not None:
                    counts[mode] += await runner
                for f in out.glob("*.tar.gz"):
                    f.unlink()
    finally:
        await d.stop()
    print(f"reply latency, {rate:g} msgs/s over 20 chats, {rounds} x {seconds:g} s per mode:")
    for mode, runs in results.items():
        p99 = [pct(r, 99) for r in runs]
        p50 = [pct(r, 50) for r in runs]
        extra = f"  ({counts[mode]} backups)" if mode in counts else ""
        print(
            f"  {mode:7s} p50 best {min(p50):6.1f} median {statistics.median(p50):6.1f} ms   "
            f"p99 best {min(p99):6.1f} median {statistics.median(p99):6.1f} ms{extra}"
        )


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--messages", type=int, default=10000)
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("--seconds", type=float, default=6.0)
    ap.add_argument("--rate", type=float, default=5.0)
    ap.add_argument("--skip-latency", action="store_true")
    args = ap.parse_args()
    logging.basicConfig(level=logging.WARNING)
    tmp = Path(tempfile.mkdtemp(prefix="chela-backup-bench-"))
    llm = FakeLLM(keep_requests=False)
    await llm.start()
    tg = TimedTelegram(token=TG_TOKEN, bot_username="chela_bot")
    await tg.start()
    owners = [str(1_000_000 + k) for k in range(50)]
    section = telegram_section(tg, allow_from=owners, poll_timeout=1)
    cfg = make_config(tmp, llm, channels=section, session={"dm_scope": "per-channel-peer"})
    cfg_path = tmp / "config.toml"
    from tests.e2e import config_file

    config_file(
        cfg_path,
        llm,
        workspace=cfg.agent.workspace,
        state_dir=cfg.agent.state_dir,
        channels=section,
    )
    cfg = cfg.model_copy(update={"source": cfg_path})
    t = time.perf_counter()
    fill(cfg, args.messages)
    print(f"state of {args.messages} messages made in {time.perf_counter() - t:.1f} s")
    size_and_time(cfg, args.rounds)
    if not args.skip_latency:
        await latency(cfg, cfg_path, tg, args.seconds, args.rate, max(1, args.rounds // 2))
    await tg.stop()
    await llm.stop()


if __name__ == "__main__":
    asyncio.run(main())
