"""SQL statements per Telegram message (not a test): the real daemon against the wire fakes,
every statement the store's connection runs traced (``sqlite3`` ``set_trace_callback``).

    cd /work/main && python bench/sql_count.py [--chats 20] [--per-chat 3]

Warms up with one message in each chat, then counts the statements of ``chats × per-chat``
messages (each chat's session already exists, as on a normal day; the chats take turns, or
with ``--one-by-one`` each chat's messages come in a row) and prints them per message, grouped by statement (literals as ``?``, whitespace squeezed).
"""

from __future__ import annotations

import argparse
import asyncio
import re
import sys
import tempfile
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from bot.app.daemon import Daemon  # noqa: E402
from e2e_bench import TimedTelegram, wait_replies  # noqa: E402
from tests.e2e import TG_TOKEN, make_config, telegram_section  # noqa: E402
from tests.fakes.llm import FakeLLM  # noqa: E402

BASE = 1_000_000
_LITERAL = re.compile(r"'(?:[^']|'')*'|\b\d+(?:\.\d+)?\b")


def shape(sql: str) -> str:
    """The statement with its literals as ``?`` (the trace shows the bound values)."""
    return re.sub(r"\s+", " ", _LITERAL.sub("?", sql.strip()))


def is_commit(sql: str, in_transaction: bool) -> bool:
    """A statement that ends in a commit: COMMIT, or a write run outside a transaction
    (autocommit).  Traced before it runs, so ``in_transaction`` is the state before it."""
    verb = sql.lstrip()[:7].upper()
    if verb.startswith("COMMIT"):
        return True
    writes = ("INSERT", "UPDATE", "DELETE", "REPLACE")
    return not in_transaction and verb.startswith(writes)


async def run(chats: int, per_chat: int, one_by_one: bool) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="chela-sql-count-"))
    llm = FakeLLM(keep_requests=False)
    await llm.start()
    tg = TimedTelegram(token=TG_TOKEN, bot_username="chela_bot")
    await tg.start()
    owners = [str(BASE + c) for c in range(chats)]
    cfg = make_config(
        tmp,
        llm,
        channels=telegram_section(tg, dm_policy="open", allow_from=owners, poll_timeout=1),
        session={"dm_scope": "per-channel-peer"},
    )
    d = Daemon(cfg, scheduler=False)
    await d.start()
    for c in range(chats):
        tg.inject_timed(BASE + c, "warm up")
    await wait_replies(tg, chats, 60)
    await asyncio.sleep(0.3)  # the outbox's last 'sent' writes
    tg.latencies.clear()
    seen: Counter[str] = Counter()
    commits = [0]
    db = d.store.db  # type: ignore[attr-defined]

    def trace(sql: str) -> None:
        seen.update([shape(sql)])
        if is_commit(sql, db.in_transaction):
            commits[0] += 1

    db.set_trace_callback(trace)
    n = chats * per_chat
    if one_by_one:  # each chat's messages in a row, each after the last reply
        for c in range(chats):
            for k in range(per_chat):
                tg.inject_timed(BASE + c, f"message {k} from chat {c}")
                await wait_replies(tg, c * per_chat + k + 1, 60)
    else:  # the chats take turns
        for k in range(per_chat):
            for c in range(chats):
                tg.inject_timed(BASE + c, f"message {k} from chat {c}")
        await wait_replies(tg, n, 60)
    await asyncio.sleep(0.3)
    db.set_trace_callback(None)
    await d.stop()
    await tg.stop()
    await llm.stop()
    total = sum(seen.values())
    print(
        f"{total / n:.2f} statements per message ({n} messages), "
        f"{commits[0] / n:.2f} commits (a COMMIT, or a write outside a transaction)"
    )
    for sql, k in sorted(seen.items(), key=lambda kv: -kv[1]):
        print(f"{k / n:6.2f}  {sql[:150]}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--chats", type=int, default=20)
    ap.add_argument("--per-chat", type=int, default=3)
    ap.add_argument(
        "--one-by-one",
        action="store_true",
        help="each chat's messages in a row, one at a time (an owner writing from one chat)",
    )
    a = ap.parse_args()
    asyncio.run(run(a.chats, a.per_chat, a.one_by_one))


if __name__ == "__main__":
    main()
