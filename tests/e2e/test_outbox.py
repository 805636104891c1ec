"""The outbox (SPEC §4.5): every delivery stored, ordered per chat, retried through
platform outages, failed at once on a permanent refusal; a full disk loses nothing.

End to end: fake Telegram → daemon (real python-telegram-bot) → fake LLM → fake Telegram.
"""

from __future__ import annotations

import asyncio
import logging
import re
import sqlite3

from bot.delivery import classify
from tests.e2e import eventually, make_config, running, telegram_section
from tests.e2e.harness import settled, tg_taken
from tests.fakes.llm import last_user_text, text

CHATS = (42, 43, 44)


def echo(request: dict):
    """Answer every message with its own token ("c42-m1" → "re c42-m1")."""
    m = re.search(r"c\d+-m\d+", last_user_text(request))
    return text(f"re {m.group(0)}" if m else "ok")


def cfg_for(tmp_path, llm, tg, **delivery):
    return make_config(
        tmp_path,
        llm,
        channels=telegram_section(tg, allow_from=[str(c) for c in CHATS]),
        session={"dm_scope": "per-channel-peer"},
        **({"delivery": delivery} if delivery else {}),
    )


def replies(tg, chat: int) -> list[str]:
    return [s.visible_text for s in tg.sent if s.chat_id == chat]


def retried(d, n: int) -> bool:
    """``n`` rows still to send, and the oldest one of each chat (the one a chat's later
    replies wait behind) tried at least twice: the store counts the attempts."""
    rows = d.store.outbox_pending()
    heads = {r.payload["chat_id"]: r for r in reversed(rows)}
    return len(rows) == n and all(r.attempts >= 2 for r in heads.values())


def outbox_states(cfg) -> dict[str, int]:
    db = sqlite3.connect(cfg.db_path)
    try:
        return dict(db.execute("SELECT state, COUNT(*) FROM outbox GROUP BY state").fetchall())
    finally:
        db.close()


async def test_a_platform_outage_is_retried_until_every_reply_is_delivered(tmp_path, llm, tg):
    llm.default = echo
    async with running(cfg_for(tmp_path, llm, tg)) as d:
        tg.fail_next("sendMessage", 502, times=10_000)  # Telegram answers 502 from now on
        for k in (1, 2):
            for c in CHATS:
                tg.inject_message(c, f"c{c}-m{k}", from_id=c)
        await llm.wait_for_requests(6, timeout=20)
        await tg.wait_for(lambda: len(tg.calls_of("sendMessage")) >= 6, timeout=20)
        # the outage goes on: every reply is tried again, nothing gets through, nothing is dropped
        await eventually(lambda: retried(d, 6), timeout=20)
        assert tg.sent == []
        assert d.conversation.outbox.pending() == 6
        tg.clear_failures()  # the platform is back: no restart needed
        await tg.wait_for_sent(6, timeout=60)
        await settled(d, tg_taken(tg))
        for c in CHATS:
            assert replies(tg, c) == [f"re c{c}-m1", f"re c{c}-m2"]  # once each, in order
        assert d.conversation.outbox.pending() == 0
        assert outbox_states(d.cfg) == {"sent": 6}


async def test_one_chat_that_keeps_failing_does_not_hold_up_the_others(tmp_path, llm, tg):
    llm.default = echo
    async with running(cfg_for(tmp_path, llm, tg)):
        tg.fail_chat(42, 502, times=10_000)
        tg.inject_message(42, "c42-m1", from_id=42)
        tg.inject_message(42, "c42-m2", from_id=42)
        await llm.wait_for_requests(2, timeout=20)
        for k in (1, 2, 3):
            tg.inject_message(43, f"c43-m{k}", from_id=43)
        await tg.wait_for(lambda: len(replies(tg, 43)) == 3, timeout=20)
        assert replies(tg, 43) == ["re c43-m1", "re c43-m2", "re c43-m3"]
        assert replies(tg, 42) == []  # the later reply to 42 waits behind the earlier one
        tg.clear_failures()
        await tg.wait_for(lambda: len(replies(tg, 42)) == 2, timeout=60)
        assert replies(tg, 42) == ["re c42-m1", "re c42-m2"]


async def test_a_permanent_refusal_fails_at_once_and_the_chat_goes_on(tmp_path, llm, tg, caplog):
    llm.default = echo
    caplog.set_level(logging.WARNING, logger="chela.outbox")
    async with running(cfg_for(tmp_path, llm, tg)) as d:
        tg.fail_chat(42, 403)  # "Forbidden: bot was blocked by the user"
        tg.inject_message(42, "c42-m1", from_id=42)
        await tg.wait_for(lambda: len(tg.calls_of("sendMessage")) == 1, timeout=20)
        # the twin: the next message in that chat is answered normally
        tg.inject_message(42, "c42-m2", from_id=42)
        await tg.wait_for_sent(1, timeout=20)
        # a refused message is not retried: it is over (failed), nothing is left to send
        await settled(d, tg_taken(tg))
        assert replies(tg, 42) == ["re c42-m2"]
        assert len(tg.calls_of("sendMessage")) == 2
        assert outbox_states(d.cfg) == {"failed": 1, "sent": 1}
    assert any("failed for good" in r.getMessage() for r in caplog.records)


async def test_a_message_not_delivered_within_max_age_is_given_up(tmp_path, llm, tg, caplog):
    llm.default = echo
    caplog.set_level(logging.ERROR, logger="chela.outbox")
    async with running(cfg_for(tmp_path, llm, tg, max_age="2s")) as d:
        tg.fail_chat(42, 502, times=10_000)
        tg.inject_message(42, "c42-m1", from_id=42)
        await eventually_state(d.cfg, {"failed": 1}, timeout=30)
    assert any("giving up" in r.getMessage() for r in caplog.records)
    assert tg.sent == []


async def eventually_state(cfg, want: dict, timeout: float) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while outbox_states(cfg) != want:
        assert loop.time() < deadline, outbox_states(cfg)
        await asyncio.sleep(0.1)


class FullDisk:
    """The store's SQLite connection with a full disk switched on and off: while ``full``
    every write statement fails with the error SQLite gives for a full disk
    (SQLITE_FULL, "database or disk is full"); reads go through."""

    WRITES = ("INSERT", "UPDATE", "DELETE", "REPLACE")

    def __init__(self, store):
        self.real = store.db
        self.full = False
        self.refused = 0
        store.db = self

    def _check(self, sql: str) -> None:
        if self.full and sql.lstrip().split(None, 1)[0].upper() in self.WRITES:
            self.refused += 1
            e = sqlite3.OperationalError("database or disk is full")
            e.sqlite_errorcode = sqlite3.SQLITE_FULL  # type: ignore[attr-defined]
            raise e

    def execute(self, sql: str, *args):
        self._check(sql)
        return self.real.execute(sql, *args)

    def executemany(self, sql: str, *args):
        self._check(sql)
        return self.real.executemany(sql, *args)

    def __getattr__(self, name: str):
        return getattr(self.real, name)


def test_max_page_count_gives_the_error_the_store_treats_as_a_full_disk(tmp_path):
    # the FullDisk switch raises exactly what SQLite raises when the database cannot grow
    from bot.store import Store, storage_full

    s = Store(tmp_path / "s.db")
    s.db.execute(f"PRAGMA max_page_count = {s.db.execute('PRAGMA page_count').fetchone()[0]}")
    try:
        for i in range(10_000):
            s.put(f"k{i}", "x" * 500)
        raise AssertionError("the database never filled up")
    except sqlite3.OperationalError as e:
        assert storage_full(e) and "database or disk is full" in str(e)
    with_tx = None
    try:
        s.add_outbox("telegram", [{"chat_id": "1", "text": "x" * 5000}], kind="message")
    except sqlite3.OperationalError as e:  # inside a transaction: still the full-disk error
        with_tx = e
    assert with_tx is not None and storage_full(with_tx)
    s.db.execute("PRAGMA max_page_count = 1000000")
    assert s.add_outbox("telegram", [{"chat_id": "1", "text": "x"}], kind="message")
    s.close()


async def test_a_full_disk_loses_nothing_and_messages_are_answered_once_space_is_back(
    tmp_path, llm, tg, caplog
):
    llm.default = echo
    caplog.set_level(logging.WARNING, logger="chela")
    async with running(cfg_for(tmp_path, llm, tg)) as d:
        tg.inject_message(42, "c42-m0", from_id=42)  # before: all normal
        await tg.wait_for_sent(1, timeout=20)
        disk = FullDisk(d.store)
        disk.full = True
        for k in (1, 2):
            for c in CHATS:
                tg.inject_message(c, f"c{c}-m{k}", from_id=c)
        # the first write is refused, then its retry too (the store retries with backoff)
        await eventually(lambda: disk.refused, timeout=20)
        first = disk.refused
        await eventually(lambda: disk.refused > first, timeout=20)
        assert len(tg.sent) == 1  # nothing answered while the disk is full, nothing dropped
        full = [r for r in caplog.records if "disk full: " in r.getMessage()]
        assert len(full) == 1  # said once, clearly
        disk.full = False  # space is back
        await tg.wait_for_sent(7, timeout=60)
        await settled(d, tg_taken(tg))
        assert replies(tg, 42) == ["re c42-m0", "re c42-m1", "re c42-m2"]
        for c in CHATS[1:]:
            assert replies(tg, c) == [f"re c{c}-m1", f"re c{c}-m2"]
    assert any("disk space is back" in r.getMessage() for r in caplog.records)


async def test_a_full_disk_in_the_middle_of_a_turn_is_answered_once_space_is_back(
    tmp_path, llm, tg
):
    # the disk fills while the model is answering: the turn cannot be stored, the model's
    # answer is kept and delivered once the store write succeeds
    holder: dict = {}

    def answer(request: dict):
        if "c42-m1" in last_user_text(request) and not holder.get("filled"):
            holder["filled"] = holder["disk"].full = True
        return echo(request)

    llm.default = answer
    async with running(cfg_for(tmp_path, llm, tg)) as d:
        holder["disk"] = FullDisk(d.store)
        tg.inject_message(42, "c42-m1", from_id=42)
        await llm.wait_for_requests(1, timeout=20)
        disk = holder["disk"]
        # the turn's commit is refused, then its retry too: the answer is still not sent
        await eventually(lambda: disk.refused, timeout=20)
        first = disk.refused
        await eventually(lambda: disk.refused > first, timeout=20)
        assert tg.sent == []
        disk.full = False
        await tg.wait_for_sent(1, timeout=60)
        await settled(d, tg_taken(tg))
        assert replies(tg, 42) == ["re c42-m1"]
        assert outbox_states(d.cfg) == {"sent": 1}


async def test_replies_stored_before_a_restart_are_sent_once_after_it(tmp_path, llm, tg):
    # a daemon stops while Telegram is down: its replies stay queued and the next run
    # sends them (before anything newer to the same chat)
    llm.default = echo
    cfg = cfg_for(tmp_path, llm, tg)
    async with running(cfg):
        tg.fail_next("sendMessage", 502, times=10_000)
        tg.inject_message(42, "c42-m1", from_id=42)
        tg.inject_message(43, "c43-m1", from_id=43)
        await tg.wait_for(lambda: len(tg.calls_of("sendMessage")) >= 2, timeout=20)
    assert outbox_states(cfg) == {"queued": 2}
    tg.clear_failures()
    tg.inject_message(42, "c42-m2", from_id=42)
    async with running(cfg) as d:
        await tg.wait_for_sent(3, timeout=30)
        await settled(d, tg_taken(tg))
    assert replies(tg, 42) == ["re c42-m1", "re c42-m2"]
    assert replies(tg, 43) == ["re c43-m1"]
    assert outbox_states(cfg) == {"sent": 3}


def test_classify_platform_errors():
    from telegram.error import BadRequest, Forbidden, NetworkError, RetryAfter, TimedOut

    from channels.base import ChannelError

    def wrapped(e: Exception) -> ChannelError:
        try:
            raise ChannelError("telegram: nothing could be delivered") from e
        except ChannelError as c:
            return c

    assert classify(wrapped(Forbidden("Forbidden: bot was blocked by the user"))) == (True, None)
    assert classify(wrapped(BadRequest("Chat not found"))) == (True, None)
    assert classify(wrapped(NetworkError("Bad Gateway"))) == (False, None)
    assert classify(wrapped(TimedOut())) == (False, None)
    assert classify(wrapped(RetryAfter(7))) == (False, 7.0)
    # no chain: the text decides; unknown errors are retried
    assert classify(ChannelError("slack: nothing delivered to C1 (channel_not_found)"))[0]
    assert not classify(ChannelError("slack: nothing delivered to C1 (internal_error)"))[0]
    assert not classify(ConnectionResetError("reset by peer"))[0]


async def test_rows_left_by_a_one_shot_command_are_sent_by_the_running_daemon(
    tmp_path, llm, tg, monkeypatch
):
    # `chela heartbeat` next to a running daemon stored an alert it could not send and
    # exited; the daemon sends it (once), and never adopts rows it is sending itself
    from bot.delivery import outbox
    from bot.store import Store

    monkeypatch.setattr(outbox, "ADOPT_EVERY", 0.05)
    monkeypatch.setattr(outbox, "ADOPT_IDLE", 0.0)
    llm.default = echo
    async with running(cfg_for(tmp_path, llm, tg)) as d:
        tg.fail_chat(43, 502, times=10_000)  # the daemon's own reply to 43 keeps retrying
        tg.inject_message(43, "c43-m1", from_id=43)
        await tg.wait_for(lambda: len(tg.calls_of("sendMessage")) >= 1, timeout=20)
        other = Store(d.cfg.db_path)  # another process's connection
        other.add_outbox(
            "telegram", [{"chat_id": "42", "text": "alert from chela heartbeat"}], kind="heartbeat"
        )
        other.close()
        await tg.wait_for_sent(1, timeout=20)
        # this IS about time: adoption is a periodic scan; let several more scans pass (every
        # 0.05 s) in which the daemon's own unsent row must not be adopted a second time
        await asyncio.sleep(0.3)
        assert replies(tg, 42) == ["alert from chela heartbeat"]
        assert d.conversation.outbox.pending() == 1  # 43's reply, once
        tg.clear_failures()
        await tg.wait_for(lambda: len(replies(tg, 43)) == 1, timeout=60)
        await settled(d, tg_taken(tg))
        assert replies(tg, 43) == ["re c43-m1"]
        assert outbox_states(d.cfg) == {"sent": 2}
