"""Start-up, RSS and CPU per message of the real `chela run` process with 1, 3 and 10 agents
(not a pass/fail test).

    cd /work/main && python bench/agents_bench.py [--runs 3] [--messages 100]

Each run starts `python -m bot run` against one FakeTelegram bot and a FakeLLM, with a fresh
state dir.  With N agents, N owners write to the bot and a ``[[bindings]]`` entry per chat
gives each owner's chat to its own agent (the first chat to the default agent); each agent has
a workspace of its own.  The agent counts are interleaved run by run.  It measures:

  ready      process spawn → the daemon's "ready" log line
  rss        the daemon's VmRSS once every agent has answered one message
  cpu/msg    the daemon's CPU time (user + system, /proc/<pid>/stat) over ``--messages``
             messages spread evenly over the agents' chats, divided by their number

Prints min / median per agent count.
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

TOKEN = "111:BENCH-agents"
TICK = os.sysconf("SC_CLK_TCK")


def owners(agents: int) -> list[int]:
    return [1000 + i for i in range(agents)]


def config(path: Path, tmp: Path, tg: FakeTelegram, llm: FakeLLM, agents: int) -> None:
    chats = owners(agents)
    lines = [
        "[agent]",
        f"workspace = {json.dumps(str(tmp / 'ws-main'))}",
        f"state_dir = {json.dumps(str(tmp / 'state'))}",
        'model = "openai/fake-model"',
        f"api_base = {json.dumps(llm.base_url)}",
        "[heartbeat]",
        'every = "0m"',
        "[session]",
        'dm_scope = "per-peer"',
        "[channels.telegram]",
        "enabled = true",
        'token_env = "BENCH_TG"',
        f"api_base = {json.dumps(tg.api_base)}",
        "poll_timeout = 1",
        f"allow_from = {json.dumps([str(c) for c in chats])}",
    ]
    for i in range(1, agents):
        lines += [f"[agents.a{i}]", f"workspace = {json.dumps(str(tmp / f'ws-a{i}'))}"]
    for i in range(1, agents):
        lines += [
            "[[bindings]]",
            f'agent = "a{i}"',
            'channel = "telegram"',
            f'chat = "{chats[i]}"',
        ]
    path.write_text("\n".join(lines) + "\n")


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK  # utime + stime


async def answered(tg: FakeTelegram, chats: list[int], each: int) -> None:
    def done() -> bool:
        counts = {c: 0 for c in chats}
        for m in tg.sent:
            if m.chat_id in counts:
                counts[m.chat_id] += 1
        return all(n >= each for n in counts.values())

    await tg.wait_for(done, timeout=300)


async def one_run(agents: int, messages: int) -> tuple[float, float, float]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "BENCH_TG": TOKEN}
    chats = owners(agents)
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        async with (
            FakeTelegram(token=TOKEN, bot_username="bench_bot") as tg,
            FakeLLM(keep_requests=False) as llm,
        ):
            config(tmp / "config.toml", tmp, tg, llm, agents)
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
            for c in chats:  # every agent answers once (its prompt built, its caches warm)
                tg.inject_message(c, "hello", from_id=c)
            await answered(tg, chats, 1)
            rss = rss_mb(proc.pid)
            before = cpu_s(proc.pid)
            for i in range(messages):
                c = chats[i % len(chats)]
                tg.inject_message(c, f"message {i}", from_id=c)
            await answered(tg, chats, 1 + messages // len(chats))
            per_msg = (cpu_s(proc.pid) - before) / messages
            proc.terminate()
            await proc.wait()
            drain.cancel()
    return ready * 1000, rss, per_msg * 1000


async def main(runs: int, messages: int) -> None:
    results: dict[int, list[tuple[float, float, float]]] = {1: [], 3: [], 10: []}
    for _ in range(runs):
        for n, rows in results.items():  # interleaved: 1, 3, 10, 1, 3, 10, ...
            rows.append(await one_run(n, messages))
    print(f"{'agents':>6} {'ready ms (min/med)':>20} {'RSS MB (min/med)':>18} {'CPU ms/msg':>16}")
    for n, rows in results.items():
        cols = []
        for k, fmt in enumerate(("{:.0f}", "{:.1f}", "{:.2f}")):
            vals = [r[k] for r in rows]
            cols.append(f"{fmt.format(min(vals))}/{fmt.format(statistics.median(vals))}")
        print(f"{n:>6} {cols[0]:>20} {cols[1]:>18} {cols[2]:>16}")


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--messages", type=int, default=120)
    args = ap.parse_args()
    asyncio.run(main(args.runs, args.messages))
