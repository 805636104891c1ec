"""Chaos benchmark (not a pass/fail test): ``chela run`` killed with SIGKILL while it replies.

    cd /work/main && python bench/chaos_bench.py [--chats 50] [--per-chat 20] [--kill-every 100]

The real daemon runs as a subprocess against the wire-level fakes (FakeTelegram and FakeLLM
in this process).  All messages are injected at once; every ``--kill-every`` replies the
daemon gets ``kill -9`` and is started again.  The fake LLM answers each message with its
own token after ``--llm-ms``; the fake Telegram records a message and then holds its answer
for ``--send-ms`` (so kills land on sends in flight).

Printed: messages, kills, replies lost, replies duplicated, the outbox rows in flight
('sending') at each kill (the only possible duplicates), time to recover after each kill
(kill → the restarted daemon's first sendMessage, its start-up included), per-chat
order violations, and the wall time.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.e2e import TG_TOKEN  # noqa: E402
from tests.fakes.llm import FakeLLM, last_user_text, text  # noqa: E402
from tests.fakes.telegram import FakeTelegram  # noqa: E402

TOKEN_RE = re.compile(r"c(\d+)-m(\d+)")


def write_config(tmp: Path, llm: FakeLLM, tg: FakeTelegram, chats: list[int]) -> Path:
    owners = ", ".join(f'"{c}"' for c in chats)
    cfg = tmp / "config.toml"
    cfg.write_text(
        f"""[agent]
workspace = "{tmp / "ws"}"
state_dir = "{tmp / "state"}"
model = "openai/fake-model"
api_base = "{llm.base_url}"
timezone = "UTC"
llm_max_retries = 1

[session]
dm_scope = "per-channel-peer"

[heartbeat]
every = "0m"

[channels.telegram]
enabled = true
token_env = "TEST_TG_TOKEN"
api_base = "{tg.api_base}"
poll_timeout = 1
allow_from = [{owners}]
"""
    )
    return cfg


def start(cfg: Path, log: Path, daemon_root: Path) -> subprocess.Popen:
    env = {**os.environ, "TEST_TG_TOKEN": TG_TOKEN, "PYTHONPATH": str(daemon_root)}
    with open(log, "ab") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "bot", "run", "--config", str(cfg)],
            env=env,
            cwd=daemon_root,  # `-m bot` imports from the working directory first
            stdout=out,
            stderr=subprocess.STDOUT,
        )


def sending_rows(db_path: Path) -> int:
    db = sqlite3.connect(db_path)
    try:
        return db.execute("SELECT COUNT(*) FROM outbox WHERE state='sending'").fetchone()[0]
    except sqlite3.OperationalError:
        return -1  # no outbox table: a build from before the outbox
    finally:
        db.close()


def first_send_after_restart(tg: FakeTelegram, mark: int) -> bool:
    """A sendMessage from the new process: after its getMe, among the calls since ``mark``."""
    methods = [m.lower() for m, _ in tg.calls[mark:]]
    return "getme" in methods and "sendmessage" in methods[methods.index("getme") :]


async def run(args: argparse.Namespace) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="chela-chaos-"))
    llm = FakeLLM(keep_requests=False)

    async def answer(request: dict):
        await asyncio.sleep(args.llm_ms / 1000)
        m = TOKEN_RE.search(last_user_text(request))
        return text(f"re {m.group(0)}" if m else "ok")

    llm.default = answer
    await llm.start()
    tg = FakeTelegram(token=TG_TOKEN, bot_username="chela_bot")
    tg.send_delay = args.send_ms / 1000
    await tg.start()
    chats = [1000 + i for i in range(args.chats)]
    cfg = write_config(tmp, llm, tg, chats)
    db_path = tmp / "state" / "chela.sqlite3"
    log = tmp / "daemon.log"
    total = args.chats * args.per_chat
    for k in range(args.per_chat):
        for c in chats:
            tg.inject_message(c, f"c{c}-m{k}", from_id=c)

    def distinct() -> int:
        return len({s.text for s in tg.sent})

    t0 = time.perf_counter()
    in_flight: list[int] = []
    recover_s: list[float] = []
    proc = start(cfg, log, args.daemon_root)
    try:
        next_kill = args.kill_every
        while next_kill < total:
            await tg.wait_for(lambda n=next_kill: len(tg.sent) >= n, timeout=300)
            proc.send_signal(signal.SIGKILL)
            proc.wait(10)
            killed_at, mark = time.perf_counter(), len(tg.calls)
            in_flight.append(sending_rows(db_path))
            proc = start(cfg, log, args.daemon_root)
            await tg.wait_for(lambda m=mark: first_send_after_restart(tg, m), timeout=300)
            recover_s.append(time.perf_counter() - killed_at)
            next_kill = len(tg.sent) + args.kill_every
        await tg.wait_for(lambda: distinct() >= total, timeout=300)
        wall = time.perf_counter() - t0
        await asyncio.sleep(2.0)  # late duplicates
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
        await tg.stop()
        await llm.stop()

    seen: dict[str, int] = defaultdict(int)
    order: dict[int, list[int]] = defaultdict(list)
    for s in tg.sent:
        m = TOKEN_RE.search(s.visible_text)
        if not m:
            continue
        seen[m.group(0)] += 1
        if seen[m.group(0)] == 1:
            order[s.chat_id].append(int(m.group(2)))
    want = {f"c{c}-m{k}" for c in chats for k in range(args.per_chat)}
    lost = len(want - set(seen))
    dups = sum(n - 1 for n in seen.values())
    disorder = sum(1 for c in chats if order[c] != sorted(order[c]))
    rows = [
        ("messages", f"{total} ({args.chats} chats x {args.per_chat})"),
        ("kills (SIGKILL while replying)", str(len(in_flight))),
        ("lost", str(lost)),
        ("duplicated", str(dups)),
        ("in flight at each kill", " ".join(map(str, in_flight)) or "-"),
        ("in flight, total (duplicate bound)", str(sum(x for x in in_flight if x > 0))),
        (
            "time to recover, s (mean / max)",
            f"{sum(recover_s) / len(recover_s):.2f} / {max(recover_s):.2f}" if recover_s else "-",
        ),
        ("chats with replies out of order", str(disorder)),
        ("wall time, s", f"{wall:.1f}"),
        ("daemon log", str(log)),
    ]
    width = max(len(k) for k, _ in rows)
    for k, v in rows:
        print(f"{k:<{width}}  {v}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--chats", type=int, default=50)
    p.add_argument("--per-chat", type=int, default=20)
    p.add_argument("--kill-every", type=int, default=100)
    p.add_argument("--llm-ms", type=float, default=20.0)
    p.add_argument("--send-ms", type=float, default=20.0)
    p.add_argument(
        "--daemon-root",
        type=Path,
        default=ROOT,
        help="run the daemon from another checkout (e.g. `git archive HEAD` unpacked) to compare",
    )
    asyncio.run(run(p.parse_args()))


if __name__ == "__main__":
    main()
