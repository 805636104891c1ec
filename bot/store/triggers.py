"""The triggers' tables: the event ledger (every webhook request and mail with its verdict
and its turn's result), the delivery ids seen (kept 7 days, so a redelivery is answered
``duplicate`` and never run twice) and each mail account's place in its folder (the
UIDVALIDITY and the last UID seen)."""

from __future__ import annotations

import json
import sqlite3
import time
import uuid
from typing import Any

from bot.store.db import Database

DEDUPE_SECONDS = 7 * 86400
LEDGER_SECONDS = 30 * 86400
# the kv key the event turn's commit writes in its own transaction: the turn ran
DONE_KEY = "trigger.done:"

TRIGGER_SCHEMA = """
CREATE TABLE IF NOT EXISTS trigger_events (
    id TEXT PRIMARY KEY,
    source TEXT NOT NULL,          -- the hook's name, or mail:<name>
    delivery_id TEXT NOT NULL DEFAULT '',
    verdict TEXT NOT NULL,         -- accepted | duplicate | unauthorized | too large | ...
    status TEXT NOT NULL DEFAULT '',  -- pending | done | '' (nothing to run)
    result TEXT NOT NULL DEFAULT '',
    payload TEXT NOT NULL DEFAULT '',  -- JSON: what the turn needs (never a secret)
    received REAL NOT NULL,
    finished REAL
);
CREATE INDEX IF NOT EXISTS trigger_events_source ON trigger_events(source, received);
CREATE INDEX IF NOT EXISTS trigger_events_pending ON trigger_events(status) WHERE status='pending';
CREATE INDEX IF NOT EXISTS trigger_events_waiting ON trigger_events(source) WHERE status='waiting';
CREATE TABLE IF NOT EXISTS trigger_deliveries (
    source TEXT NOT NULL,
    delivery_id TEXT NOT NULL,
    seen REAL NOT NULL,
    PRIMARY KEY (source, delivery_id)
);
CREATE TABLE IF NOT EXISTS mail_cursor (
    account TEXT PRIMARY KEY,
    uidvalidity INTEGER NOT NULL,
    last_uid INTEGER NOT NULL
);
"""

EVENT_COLUMNS = (
    "id",
    "source",
    "delivery_id",
    "verdict",
    "status",
    "result",
    "payload",
    "received",
    "finished",
)
_SELECT = f"SELECT {', '.join(EVENT_COLUMNS)} FROM trigger_events"
_INSERT = (
    "INSERT INTO trigger_events(id, source, delivery_id, verdict, status, payload, received,"
    " result) VALUES (?,?,?,?,?,?,?,?)"
)


def _row(r: tuple) -> dict[str, Any]:
    d = dict(zip(EVENT_COLUMNS, r, strict=True))
    d["payload"] = json.loads(d["payload"]) if d["payload"] else {}
    return d


def new_event_id() -> str:
    return "evt_" + uuid.uuid4().hex[:20]


class TriggersMixin(Database):
    def _create_trigger_tables(self) -> None:
        self.db.executescript(TRIGGER_SCHEMA)

    def trigger_accept(
        self, source: str, delivery_id: str, payload: dict[str, Any], now: float | None = None
    ) -> str | None:
        """An accepted event, stored ``pending`` with what its turn needs: its id; None when
        ``delivery_id`` was seen on this source within 7 days (a ``duplicate`` row is
        written instead).  One transaction."""
        now = time.time() if now is None else now
        event_id = new_event_id()
        with self._tx():
            if delivery_id and not self._first_delivery(source, delivery_id, now):
                self.db.execute(
                    _INSERT, (event_id, source, delivery_id, "duplicate", "", "", now, "")
                )
                self._ledger_changed(event_id)
                return None
            self.db.execute(
                _INSERT,
                (
                    event_id,
                    source,
                    delivery_id,
                    "accepted",
                    "pending",
                    json.dumps(payload),
                    now,
                    "",
                ),
            )
            self._ledger_changed(event_id)
        return event_id

    def _ledger_changed(self, event_id: str) -> None:
        """A ``trigger.event`` notice (the Control UI's Inbox lists the ledger live): the
        event's id only, never what it carried.  Every ledger write runs on the event loop,
        so the row is committed before any reader the notice wakes can run."""
        if self.publish is not None:
            self.publish("trigger.event", {"id": event_id})

    def _first_delivery(self, source: str, delivery_id: str, now: float) -> bool:
        self.db.execute(
            "DELETE FROM trigger_deliveries WHERE source=? AND delivery_id=? AND seen<?",
            (source, delivery_id, now - DEDUPE_SECONDS),
        )
        try:
            self.db.execute(
                "INSERT INTO trigger_deliveries(source, delivery_id, seen) VALUES (?,?,?)",
                (source, delivery_id, now),
            )
        except sqlite3.IntegrityError:
            return False
        return True

    def trigger_refused(
        self, source: str, verdict: str, delivery_id: str = "", result: str = ""
    ) -> None:
        """A ledger row for a request or mail that runs no turn (unauthorized, too large,
        rate limited, skipped (from_allow) ...)."""
        event_id = new_event_id()
        self.db.execute(
            _INSERT, (event_id, source, delivery_id, verdict, "", "", time.time(), result)
        )
        self._ledger_changed(event_id)

    def trigger_pending(self) -> list[dict[str, Any]]:
        """Accepted events whose turn has not run, oldest first.  An event whose turn was
        committed (its done key written in the turn's transaction) is closed here instead."""
        rows = [
            _row(r)
            for r in self.db.execute(_SELECT + " WHERE status='pending' ORDER BY received, rowid")
        ]
        out = []
        for row in rows:
            done = self.db.execute(
                "SELECT value FROM kv WHERE key=?", (DONE_KEY + row["id"],)
            ).fetchone()
            if done is None:
                out.append(row)
            else:
                self.trigger_finish(row["id"], json.loads(done[0]) or "ran")
        return out

    def trigger_finish(self, event_id: str, result: str) -> None:
        with self._tx():
            self.db.execute(
                "UPDATE trigger_events SET status='done', result=?, finished=? WHERE id=?",
                (result, time.time(), event_id),
            )
            self.db.execute("DELETE FROM kv WHERE key=?", (DONE_KEY + event_id,))
        self._ledger_changed(event_id)

    def trigger_log(
        self, source: str | None = None, limit: int = 50, before: str | None = None
    ) -> list[dict[str, Any]]:
        """The newest ledger rows (of one source, older than event ``before``), newest
        first, as :func:`ledger` shows them."""
        return ledger(self.db, source, limit, before)

    def trigger_prune(self, now: float | None = None) -> None:
        """Delivery ids older than 7 days and finished ledger rows older than 30."""
        now = time.time() if now is None else now
        self.db.execute("DELETE FROM trigger_deliveries WHERE seen<?", (now - DEDUPE_SECONDS,))
        self.db.execute(
            "DELETE FROM trigger_events WHERE status NOT IN ('pending', 'waiting') AND received<?",
            (now - LEDGER_SECONDS,),
        )

    # ------------------------------------------------------ kept while the model is down
    def trigger_wait(self, event_id: str, result: str) -> None:
        """An accepted event kept for the model: ``waiting`` (a restart does not run it;
        :meth:`trigger_release` does, once the model answers)."""
        self.db.execute(
            "UPDATE trigger_events SET status='waiting', result=? WHERE id=? AND status='pending'",
            (result, event_id),
        )
        self._ledger_changed(event_id)

    def trigger_waits(self, source: str) -> bool:
        """An event of ``source`` waits for the model (a newer one must not overtake it)."""
        q = "SELECT 1 FROM trigger_events WHERE source=? AND status='waiting' LIMIT 1"
        return self.db.execute(q, (source,)).fetchone() is not None

    def trigger_release(self) -> list[dict[str, Any]]:
        """Every waiting event made ``pending`` again (one transaction), oldest first: run
        now (a crash from here on runs them at restart, as any pending event)."""
        with self._tx():
            q = _SELECT + " WHERE status='waiting' ORDER BY received, rowid"
            rows = [_row(r) for r in self.db.execute(q).fetchall()]
            self.db.execute("UPDATE trigger_events SET status='pending' WHERE status='waiting'")
        for r in rows:
            self._ledger_changed(r["id"])
        return rows

    def trigger_expire(self, before: float, result: str) -> list[dict[str, Any]]:
        """Waiting events received before ``before``: closed with ``result``, never run."""
        with self._tx():
            q = _SELECT + " WHERE status='waiting' AND received<? ORDER BY received, rowid"
            rows = [_row(r) for r in self.db.execute(q, (before,)).fetchall()]
            self.db.executemany(
                "UPDATE trigger_events SET status='done', result=?, finished=? WHERE id=?",
                [(result, time.time(), r["id"]) for r in rows],
            )
        for r in rows:
            self._ledger_changed(r["id"])
        return rows

    # ------------------------------------------------------------------------- mail
    def mail_cursor(self, account: str) -> tuple[int, int] | None:
        """(UIDVALIDITY, last UID seen) of a mail account; None before its first start."""
        row = self.db.execute(
            "SELECT uidvalidity, last_uid FROM mail_cursor WHERE account=?", (account,)
        ).fetchone()
        return (int(row[0]), int(row[1])) if row else None

    def mail_set_cursor(self, account: str, uidvalidity: int, last_uid: int) -> None:
        self.db.execute(
            "INSERT OR REPLACE INTO mail_cursor(account, uidvalidity, last_uid) VALUES (?,?,?)",
            (account, uidvalidity, last_uid),
        )

    def mail_take(
        self,
        account: str,
        uidvalidity: int,
        uid: int,
        payload: dict[str, Any] | None,
        verdict: str = "accepted",
    ) -> str | None:
        """Message ``uid`` of a mail account, in ONE transaction with the cursor moved past
        it: stored ``pending`` (``payload`` given: its event id) or recorded with
        ``verdict`` (skipped).  None when the cursor is past it already."""
        source = f"mail:{account}"
        event_id = new_event_id()
        with self._tx():
            cur = self.mail_cursor(account)
            if cur is not None and cur[0] == uidvalidity and uid <= cur[1]:
                return None
            status = "pending" if payload is not None else ""
            body = json.dumps(payload) if payload is not None else ""
            self.db.execute(
                _INSERT,
                (event_id, source, str(uid), verdict, status, body, time.time(), ""),
            )
            self.mail_set_cursor(account, uidvalidity, uid)
        self._ledger_changed(event_id)
        return event_id if payload is not None else None


def read_log(db_path: Any, source: str | None = None, limit: int = 50) -> list[dict[str, Any]]:
    """The newest ledger rows read beside a running daemon (read-only: never created,
    never migrated); [] without a database or before the table existed."""
    from pathlib import Path

    path = Path(db_path)
    if not path.is_file():
        return []
    try:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    except sqlite3.Error:
        return []
    try:
        return ledger(conn, source, limit)
    except sqlite3.Error:
        return []
    finally:
        conn.close()


# ---------------------------------------------------------------- the ledger as shown
# What a listing shows of an event's stored payload: its event name, its header NAMES and
# the first characters of its body or mail text; never the whole body.
EXCERPT_CHARS = 2000
SUMMARY_CHARS = 120
REFUSED = ("unauthorized", "too large", "rate limited")
_LEDGER = (
    "SELECT id, source, delivery_id, verdict, status, result, received, finished,"
    " json_extract(nullif(payload, ''), '$.event'),"
    " substr(json_extract(nullif(payload, ''), '$.headers'), 1, 4000),"
    " substr(coalesce(json_extract(nullif(payload, ''), '$.body'),"
    f" json_extract(nullif(payload, ''), '$.mail'), ''), 1, {EXCERPT_CHARS})"
    " FROM trigger_events"
)
_LEDGER_COLUMNS = (
    "id",
    "source",
    "delivery_id",
    "verdict",
    "status",
    "result",
    "received",
    "finished",
)


def ledger(
    conn: sqlite3.Connection, source: str | None = None, limit: int = 50, before: str | None = None
) -> list[dict[str, Any]]:
    """THE ledger query (``chela hooks log``, ``chela hooks list``, the Control UI's Inbox):
    rows of one source or all, older than event ``before`` (none when it is unknown), newest
    first; each with :func:`ledger_entry`'s fields and no payload."""
    where, args = [], []
    if source:
        where.append("source=?")
        args.append(source)
    if before:
        where.append("(received, rowid) < (SELECT received, rowid FROM trigger_events WHERE id=?)")
        args.append(before)
    sql = _LEDGER + (" WHERE " + " AND ".join(where) if where else "")
    rows = conn.execute(sql + " ORDER BY received DESC, rowid DESC LIMIT ?", (*args, limit))
    return [ledger_entry(r) for r in rows]


def ledger_entry(r: tuple) -> dict[str, Any]:
    d: dict[str, Any] = dict(zip(_LEDGER_COLUMNS, r[:8], strict=True))
    event, headers, excerpt = r[8] or "", r[9] or "", r[10] or ""
    mail = d["source"].startswith("mail:")
    d.update(
        payload={},
        kind="mail" if mail else "hook",
        event=event,
        headers=[line.split(":", 1)[0] for line in headers.splitlines() if ":" in line],
        excerpt=excerpt,
        summary=_summary(excerpt, event, mail),
        outcome=outcome(d),
        state=event_state(d),
    )
    return d


def _summary(excerpt: str, event: str, mail: bool) -> str:
    """A mail's Subject; a webhook's event name and the start of its body, on one line."""
    if mail:
        for line in excerpt.splitlines():
            if line.startswith("Subject: "):
                return _printable(line.removeprefix("Subject: "))[:SUMMARY_CHARS]
        return ""
    text = _printable(" ".join(excerpt.split()))[:SUMMARY_CHARS]
    return f"{event} · {text}" if event and text else event or text


def _printable(text: str) -> str:
    """No control character (a terminal escape in a sender's text) survives in a summary."""
    return "".join(c if c.isprintable() else "?" for c in text)


def outcome(row: dict[str, Any]) -> str:
    """An event's verdict and, once its turn ran, the turn's result: ``accepted
    (delivered to telegram:42)``, ``unauthorized``, ``accepted (pending)``."""
    status, result = row.get("status") or "", row.get("result") or ""
    after = result or (status if status not in ("", "done") else "")
    return f"{row['verdict']} ({after})" if after else row["verdict"]


def event_state(row: dict[str, Any]) -> str:
    """One word for how an event ended, for colour: ``refused``, ``duplicate``,
    ``skipped``, ``waiting`` (its turn has not run), ``done`` (ran: delivered or silent),
    ``failed``, or ``note`` (ran, but nothing reached its target: queued, no route, stopped)."""
    verdict, status, result = row["verdict"], row.get("status") or "", row.get("result") or ""
    if verdict in REFUSED:
        return "refused"
    if verdict == "duplicate":
        return "duplicate"
    if verdict.startswith("skipped"):
        return "skipped"
    if status not in ("", "done"):
        return "waiting"
    if result.startswith(("delivered", "silent", "ran")) or (not result and not status):
        return "done"
    return "failed" if result.startswith("failed") else "note"
