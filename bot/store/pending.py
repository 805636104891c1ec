"""Messages kept for the model: the inbound rows held while no configured model answers,
and the outage itself (since when, which chats were told).

A held message is an inbound row with status ``waiting``: ``recover`` at start-up does not
queue it (only ``pending`` rows), so a restart keeps it held until the model answers again.
When it does, the rows of a session are made ``pending`` again together and answered in
order; a row held longer than the allowed wait becomes ``expired``, one dropped by ``/new``
becomes ``dropped``.  The outage's state is two kv values, so ``chela status``, the
heartbeat and a restarted daemon all read the same thing.

Functions over the store (its ``db`` connection and kv ``get``/``put``), not a mixin: the
table group is the ``inbound`` table's, only its statuses are new."""

from __future__ import annotations

import json
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

WAITING = "waiting"
SINCE = "outage.since"  # epoch seconds the model stopped answering; absent: it answers
TOLD = "outage.told"  # the chats told of this outage: ["channel|account|chat", ...]


@dataclass(frozen=True)
class Held:
    """One message waiting for the model."""

    id: int
    session_key: str
    payload: dict
    created: float
    agent: str


_COLS = "id, session_key, payload, created, agent"


def _held(r: tuple) -> Held:
    return Held(r[0], r[1], json.loads(r[2]), r[3], r[4])


def down_since(store: Any) -> float | None:
    """When the model stopped answering (None: it answers)."""
    v = store.get(SINCE)
    return float(v) if isinstance(v, (int, float)) else None


def mark_down(store: Any, now: float) -> float:
    """Record the outage (once: an outage keeps its first time); its start."""
    since = down_since(store)
    if since is None:
        store.put(SINCE, now)
        store.put(TOLD, [])
        return now
    return since


def mark_up(store: Any) -> None:
    """The model answers again: the outage is over, the next one tells every chat anew."""
    store.db.execute(f"DELETE FROM kv WHERE key IN ('{SINCE}', '{TOLD}')")


def chat_of(payload: dict) -> str:
    return f"{payload.get('channel', '')}|{payload.get('account', '')}|{payload.get('chat_id', '')}"


def first_notice(store: Any, chat: str) -> bool:
    """True once per chat per outage: the chat is recorded as told (before the notice
    goes out, so a restart never tells it twice)."""
    told = store.get(TOLD) or []
    if chat in told:
        return False
    store.put(TOLD, [*told, chat])
    return True


def hold(store: Any, inbound_id: int) -> None:
    store.db.execute(
        "UPDATE inbound SET status=? WHERE id=? AND status='pending'", (WAITING, inbound_id)
    )


def agent_of(store: Any, inbound_id: int) -> str:
    """The agent chosen for an inbound message at intake ("" when unknown)."""
    row = store.db.execute("SELECT agent FROM inbound WHERE id=?", (inbound_id,)).fetchone()
    return row[0] if row else ""


def session_waits(store: Any, session_key: str) -> bool:
    """The session has a message waiting for the model (a newer one must not overtake it)."""
    row = store.db.execute(
        "SELECT 1 FROM inbound WHERE session_key=? AND status=? LIMIT 1", (session_key, WAITING)
    ).fetchone()
    return row is not None


def waiting(store: Any) -> list[Held]:
    rows = store.db.execute(
        f"SELECT {_COLS} FROM inbound WHERE status=? ORDER BY id", (WAITING,)
    ).fetchall()
    return [_held(r) for r in rows]


def sessions_waiting(store: Any) -> list[str]:
    """Sessions with held messages, the one holding the oldest first."""
    rows = store.db.execute(
        "SELECT session_key FROM inbound WHERE status=? GROUP BY session_key ORDER BY MIN(id)",
        (WAITING,),
    ).fetchall()
    return [r[0] for r in rows]


def release(store: Any, session_key: str) -> list[Held]:
    """Make the session's held messages ``pending`` again (one transaction), in order: they
    are answered now (a crash from here on answers them at restart, as any pending row)."""
    with store._tx():
        rows = store.db.execute(
            f"SELECT {_COLS} FROM inbound WHERE session_key=? AND status=? ORDER BY id",
            (session_key, WAITING),
        ).fetchall()
        store.db.execute(
            "UPDATE inbound SET status='pending' WHERE session_key=? AND status=?",
            (session_key, WAITING),
        )
    return [_held(r) for r in rows]


def expire(store: Any, before: float) -> list[Held]:
    """Held messages stored before ``before``: marked ``expired`` (never answered late)."""
    with store._tx():
        rows = store.db.execute(
            f"SELECT {_COLS} FROM inbound WHERE status=? AND created<? ORDER BY id",
            (WAITING, before),
        ).fetchall()
        store.db.executemany(
            "UPDATE inbound SET status='expired' WHERE id=?", [(r[0],) for r in rows]
        )
    return [_held(r) for r in rows]


def drop(store: Any, session_key: str) -> int:
    """``/new``: the session's held messages are dropped; how many."""
    cur = store.db.execute(
        "UPDATE inbound SET status='dropped' WHERE session_key=? AND status=?",
        (session_key, WAITING),
    )
    return cur.rowcount or 0


def view(store: Any) -> dict[str, Any] | None:
    """The outage as ``chela status`` and the Control UI show it (None: the model answers)."""
    since = down_since(store)
    count = store.db.execute(  # kept messages and kept webhook/mail events alike
        "SELECT (SELECT COUNT(*) FROM inbound WHERE status=?)"
        " + (SELECT COUNT(*) FROM trigger_events WHERE status=?)",
        (WAITING, WAITING),
    )
    pending = int(count.fetchone()[0])
    if since is None and not pending:
        return None
    return {"since": since, "pending": pending}


def read_view(db_path: Path) -> dict[str, Any] | None:
    """:func:`view` of a database read beside a running daemon (read-only; None when the
    file is missing or unreadable)."""
    if not Path(db_path).is_file():
        return None
    try:
        conn = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
    except sqlite3.Error:
        return None
    try:
        return view(_ReadOnly(conn))
    except sqlite3.Error:
        return None
    finally:
        conn.close()


class _ReadOnly:
    """The two reads :func:`view` makes, over a read-only connection."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.db = conn

    def get(self, key: str, default: Any = None) -> Any:
        row = self.db.execute("SELECT value FROM kv WHERE key=?", (key,)).fetchone()
        return json.loads(row[0]) if row else default


def describe(v: dict[str, Any] | None, now: float | None = None) -> str:
    """One line for ``chela status``."""
    if v is None:
        return "model: answering (no outage)"
    pending = f"{v['pending']} message(s) waiting"
    if v["since"] is None:
        return f"model: answering again; {pending} to be answered"
    now = time.time() if now is None else now
    mins = max(0.0, now - v["since"]) / 60
    started = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(v["since"]))
    return f"model: DOWN since {started} ({mins:.0f} min); {pending} for it"
