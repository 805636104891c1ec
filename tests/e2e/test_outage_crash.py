"""kill -9 while the messages kept during a model outage are being answered (SPEC §4.5 as in
test_crash.py): ``chela run`` as a subprocess; after the restart every message is answered,
none twice beyond the sends in flight at the kill, in order per chat."""

from __future__ import annotations

import asyncio
import sqlite3

from bot.conversation.outage import NOTICE
from tests.e2e import eventually
from tests.e2e.harness import store_idle, tg_taken
from tests.e2e.test_crash import (
    TOKEN_RE,
    check_replies,
    echo,
    in_flight,
    kill9,
    start,
    stop,
    write_config,
)
from tests.fakes.llm import last_user_text, text

CHATS = [2000, 2001, 2002]
PER_CHAT = 4


def waiting(db_path) -> int:
    """Messages kept for the model (-1 while the daemon is still creating its database)."""
    db = sqlite3.connect(db_path)
    try:
        return db.execute("SELECT COUNT(*) FROM inbound WHERE status='waiting'").fetchone()[0]
    except sqlite3.OperationalError:
        return -1
    finally:
        db.close()


async def test_kill_9_during_the_drain_answers_every_kept_message_once(tmp_path, llm, tg):
    async def slow_echo(request: dict):
        if not TOKEN_RE.search(last_user_text(request)):
            return text("OK")  # the probe
        await asyncio.sleep(0.2)  # the drain takes a while: the kill lands in it
        return echo(request)

    section = {
        "enabled": True,
        "token_env": "TEST_TG_TOKEN",
        "api_base": tg.api_base,
        "poll_timeout": 1,
        "allow_from": [str(c) for c in CHATS],
    }
    outage = {"probe_initial": "100ms", "probe_max": "300ms"}
    cfg = write_config(tmp_path, llm, {"channels.telegram": section}, outage=outage)
    db_path = tmp_path / "state" / "chela.sqlite3"
    log_path = tmp_path / "daemon.log"
    llm.go_down()
    for k in range(PER_CHAT):
        for c in CHATS:
            tg.inject_message(c, f"c{c}-m{k}", from_id=c)
    proc = start(cfg, log_path)
    try:
        await eventually(
            lambda: db_path.exists() and waiting(db_path) == len(CHATS) * PER_CHAT, timeout=60
        )
        llm.come_up(slow_echo)
        await tg.wait_for(lambda: sum(1 for s in tg.sent if s.text != NOTICE) >= 3, timeout=60)
        kill9(proc)
        sending = in_flight(db_path)
        proc = start(cfg, log_path)
        answers = lambda: [(s.chat_id, s.text) for s in tg.sent if s.text != NOTICE]  # noqa: E731
        want = len(CHATS) * PER_CHAT
        await tg.wait_for(lambda: len({t for _, t in answers()}) >= want, timeout=60)
        await eventually(lambda: tg_taken(tg)() and store_idle(db_path), timeout=60)
        assert waiting(db_path) == 0
    finally:
        rc = stop(proc)
    result = check_replies(answers(), CHATS, PER_CHAT)
    assert result["lost"] == [] and result["out_of_order"] == []
    assert result["duplicates"] <= sending
    assert sorted(int(s.chat_id) for s in tg.sent if s.text == NOTICE) == CHATS
    assert rc == 0
