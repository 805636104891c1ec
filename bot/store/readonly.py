"""Reading the state database beside a running daemon, for ``chela status``.

The database is opened read-only (``mode=ro``): never created, never migrated, never
locked for writing, so a status check cannot disturb the daemon that owns it.  A database
that is missing, unreadable or from before a table existed reads as nothing."""

from __future__ import annotations

import sqlite3
from pathlib import Path

_LEDGER_KEYS = ("job", "due", "status", "reason", "detail", "manual", "catch_up", "ended")


def _rows(db: Path, sql: str) -> list[tuple]:
    if not db.is_file():
        return []
    try:
        conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    except sqlite3.Error:
        return []
    try:
        return conn.execute(sql).fetchall()
    except sqlite3.Error:
        return []
    finally:
        conn.close()


def schedule_states(db: Path) -> dict[str, tuple]:
    """Each job's kept state: ``name -> (paused, anchor, ended)``."""
    q = "SELECT name, paused, anchor, ended FROM schedule_state"
    return {r[0]: tuple(r[1:]) for r in _rows(db, q)}


def last_ledger_rows(db: Path) -> dict[str, dict]:
    """The newest ledger row of every job, as a dict per job."""
    q = (
        "SELECT job, due, status, reason, detail, manual, catch_up, ended FROM schedule_ledger"
        " WHERE id IN (SELECT MAX(id) FROM schedule_ledger GROUP BY job)"
    )
    return {r[0]: dict(zip(_LEDGER_KEYS, r, strict=True)) for r in _rows(db, q)}


def tool_jobs(db: Path) -> list[tuple]:
    """The jobs the schedule tool made: ``(name, kind, spec, target, to, anchor)`` by name."""
    return _rows(
        db, "SELECT name, kind, spec, target, to_, anchor FROM schedule_jobs ORDER BY name"
    )


def sessions_by_activity(db: Path) -> list[tuple]:
    """Every session: ``(key, updated, usage_in, usage_out)``, the most recent first."""
    return _rows(db, "SELECT key, updated, usage_in, usage_out FROM sessions ORDER BY updated DESC")
