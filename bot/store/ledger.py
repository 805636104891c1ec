"""The schedule ledger: one row per due occurrence of every job and of the
heartbeat (ran, skipped with its reason, missed), plus each job's kept state (paused, the
anchor of its grid, when a one-shot ended)."""

from __future__ import annotations

import sqlite3
import time
from typing import Any

from bot.store.db import Database

LEDGER_COLUMNS = (
    "id",
    "job",
    "due",
    "status",
    "reason",
    "detail",
    "manual",
    "catch_up",
    "run_id",
    "started",
    "ended",
)


def _row(r: tuple) -> dict[str, Any]:
    d = dict(zip(LEDGER_COLUMNS, r, strict=True))
    d["manual"], d["catch_up"] = bool(d["manual"]), bool(d["catch_up"])
    return d


class LedgerMixin(Database):
    def ledger_begin(
        self, job: str, due: float, run_id: str, *, manual: bool = False, catch_up: bool = False
    ) -> bool:
        """A ``running`` row for one occurrence; False when that occurrence has a row
        already (it is never run twice).  Manual runs have rows of their own."""
        try:
            self.db.execute(
                "INSERT INTO schedule_ledger(job, due, status, manual, catch_up, run_id, started)"
                " VALUES (?,?,?,?,?,?,?)",
                (job, due, "running", int(manual), int(catch_up), run_id, time.time()),
            )
        except sqlite3.IntegrityError:
            return False
        return True

    def ledger_end(self, run_id: str, status: str, reason: str = "", detail: str = "") -> None:
        self.db.execute(
            "UPDATE schedule_ledger SET status=?, reason=?, detail=?, ended=? WHERE run_id=?",
            (status, reason, detail, time.time(), run_id),
        )

    def ledger_note(self, job: str, due: float, status: str, reason: str = "") -> bool:
        """An occurrence that did not run (skipped or missed); False when it has a row."""
        try:
            self.db.execute(
                "INSERT INTO schedule_ledger(job, due, status, reason, started, ended)"
                " VALUES (?,?,?,?,?,?)",
                (job, due, status, reason, time.time(), time.time()),
            )
        except sqlite3.IntegrityError:
            return False
        return True

    def ledger_rows(self, job: str | None = None, limit: int = 1000) -> list[dict[str, Any]]:
        cols = ", ".join(LEDGER_COLUMNS)
        if job is None:
            q = f"SELECT {cols} FROM schedule_ledger ORDER BY id LIMIT ?"
            return [_row(r) for r in self.db.execute(q, (limit,))]
        q = f"SELECT {cols} FROM schedule_ledger WHERE job=? ORDER BY id LIMIT ?"
        return [_row(r) for r in self.db.execute(q, (job, limit))]

    def ledger_since(self, since: float) -> list[dict[str, Any]]:
        """Every row of an occurrence due at ``since`` or later, oldest first."""
        cols = ", ".join(LEDGER_COLUMNS)
        q = f"SELECT {cols} FROM schedule_ledger WHERE due>=? ORDER BY id"
        return [_row(r) for r in self.db.execute(q, (since,))]

    def ledger_last(self, job: str) -> dict[str, Any] | None:
        cols = ", ".join(LEDGER_COLUMNS)
        q = f"SELECT {cols} FROM schedule_ledger WHERE job=? ORDER BY id DESC LIMIT 1"
        r = self.db.execute(q, (job,)).fetchone()
        return _row(r) if r else None

    def ledger_last_due(self, job: str) -> float | None:
        """The latest scheduled occurrence the ledger holds for ``job`` (manual runs aside)."""
        r = self.db.execute(
            "SELECT MAX(due) FROM schedule_ledger WHERE job=? AND manual=0", (job,)
        ).fetchone()
        return r[0] if r and r[0] is not None else None

    def ledger_interrupted(self) -> list[dict[str, Any]]:
        """Rows left ``running`` by a daemon that died: marked ran (interrupted), never rerun."""
        cols = ", ".join(LEDGER_COLUMNS)
        q = f"SELECT {cols} FROM schedule_ledger WHERE status='running'"
        rows = [_row(r) for r in self.db.execute(q)]
        self.db.execute(
            "UPDATE schedule_ledger SET status='ran', detail='interrupted (the daemon stopped)',"
            " ended=? WHERE status='running'",
            (time.time(),),
        )
        return rows

    # ------------------------------------------------------------------ job state
    def job_state(self, name: str) -> dict[str, Any] | None:
        r = self.db.execute(
            "SELECT paused, anchor, spec, ended FROM schedule_state WHERE name=?", (name,)
        ).fetchone()
        if r is None:
            return None
        return {"paused": bool(r[0]), "anchor": r[1], "spec": r[2], "ended": r[3]}

    def job_seen(self, name: str, spec: str, anchor: float) -> dict[str, Any]:
        """The job's state; first seen (or its schedule changed): anchored at ``anchor``."""
        state = self.job_state(name)
        if state is None:
            self.db.execute(
                "INSERT INTO schedule_state(name, paused, anchor, spec) VALUES (?,0,?,?)",
                (name, anchor, spec),
            )
        elif state["spec"] != spec:
            self.db.execute(
                "UPDATE schedule_state SET anchor=?, spec=?, ended=NULL WHERE name=?",
                (anchor, spec, name),
            )
        return self.job_state(name) or {}

    def job_set_paused(self, name: str, paused: bool) -> None:
        self.db.execute(
            "INSERT INTO schedule_state(name, paused, anchor, spec) VALUES (?,?,0,'')"
            " ON CONFLICT(name) DO UPDATE SET paused=excluded.paused",
            (name, int(paused)),
        )

    def job_ended(self, name: str) -> None:
        self.db.execute("UPDATE schedule_state SET ended=? WHERE name=?", (time.time(), name))

    def job_forget(self, name: str) -> None:
        self.db.execute("DELETE FROM schedule_state WHERE name=?", (name,))
