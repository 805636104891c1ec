"""Read-only queries the Control UI shows: a session's transcript, a turn's
answer and cost, the session search, cost per session, each channel's last traffic and
unsent outbox rows, and which sessions moved since the UI last looked.

Nothing here writes; the UI (bot/ui/) reads the state database only through these."""

from __future__ import annotations

import json
from dataclasses import dataclass

from bot.store.db import Database

UNSENT = ("queued", "sending", "failed")  # the outbox states the Channels page counts


@dataclass(frozen=True)
class StoredMessage:
    """One row of ``messages`` with its JSON decoded."""

    id: int
    data: dict
    created: float
    kind: str


def like_pattern(text: str) -> str:
    """``text`` as a LIKE pattern matching it anywhere, its ``\\``, ``%`` and ``_`` taken
    literally (used with ``ESCAPE '\\'``)."""
    return "%" + text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"


class ViewsMixin(Database):
    # ---------------------------------------------------------------- transcript
    def transcript_rows(self, key: str, *, before: int | None = None) -> list[StoredMessage]:
        """The messages of the session's current epoch that compaction has not summarised
        away, below id ``before`` if given, oldest first ([] for an unknown session)."""
        row = self.db.execute("SELECT epoch FROM sessions WHERE key=?", (key,)).fetchone()
        if row is None:
            return []
        epoch = row[0]
        upto = self.db.execute(
            "SELECT COALESCE(MAX(upto_id), 0) FROM summaries WHERE session_key=? AND epoch=?",
            (key, epoch),
        ).fetchone()[0]
        q = "SELECT id, data, created, kind FROM messages WHERE session_key=? AND epoch=? AND id>?"
        args: list[str | int] = [key, epoch, upto]
        if before is not None:
            q += " AND id<?"
            args.append(before)
        return [
            StoredMessage(rid, json.loads(data), created, kind)
            for rid, data, created, kind in self.db.execute(q + " ORDER BY id", args)
        ]

    def turn_answers(self, key: str, turn: str) -> list[StoredMessage]:
        """The assistant messages a stored turn wrote, newest first."""
        return [
            StoredMessage(rid, json.loads(data), created, kind)
            for rid, data, created, kind in self.db.execute(
                "SELECT id, data, created, kind FROM messages WHERE session_key=? AND turn=? AND"
                " role='assistant' ORDER BY id DESC",
                (key, turn),
            )
        ]

    # ---------------------------------------------------------------- costs
    def turn_cost(self, key: str, turn: str) -> float:
        """What a turn's model calls cost (the usage rows the gate recorded for it)."""
        row = self.db.execute(
            "SELECT COALESCE(SUM(cost_usd), 0) FROM usage WHERE session_key=? AND turn=?",
            (key, turn),
        ).fetchone()
        return float(row[0] or 0.0)

    def session_costs(self) -> dict[str, float]:
        """Session key → what its model calls cost so far."""
        return {
            k: float(c or 0.0)
            for k, c in self.db.execute("SELECT session_key, SUM(cost_usd) FROM usage GROUP BY 1")
        }

    # ---------------------------------------------------------------- sessions
    def search_sessions(self, text: str) -> set[str]:
        """Sessions whose key or current-epoch messages contain ``text`` (literally: LIKE's
        wildcards in it match only themselves)."""
        like = like_pattern(text)
        rows = self.db.execute(
            "SELECT s.key FROM sessions s WHERE s.key LIKE ? ESCAPE '\\' OR EXISTS (SELECT 1 FROM"
            " messages m WHERE m.session_key=s.key AND m.epoch=s.epoch AND m.data LIKE ? ESCAPE"
            " '\\')",
            (like, like),
        )
        return {r[0] for r in rows}

    def newest_session_update(self) -> float:
        """The latest ``updated`` of any session (0 with none)."""
        row = self.db.execute("SELECT COALESCE(MAX(updated), 0) FROM sessions").fetchone()
        return float(row[0] or 0.0)

    def sessions_updated_after(self, since: float) -> list[tuple[str, float]]:
        """(key, updated) of the sessions updated after ``since``, oldest update first."""
        return [
            (key, float(updated))
            for key, updated in self.db.execute(
                "SELECT key, updated FROM sessions WHERE updated>? ORDER BY updated", (since,)
            )
        ]

    # ---------------------------------------------------------------- channels
    def last_inbound_by_channel(self) -> dict[str, float]:
        """Channel → when its newest stored inbound message arrived."""
        return dict(self.db.execute("SELECT channel, MAX(created) FROM inbound GROUP BY channel"))

    def last_sent_by_channel(self) -> dict[str, float]:
        """Channel → when its newest sent outbox row was sent."""
        return dict(
            self.db.execute(
                "SELECT channel, MAX(updated) FROM outbox WHERE state='sent' GROUP BY channel"
            )
        )

    def unsent_by_channel(self) -> dict[str, dict[str, int]]:
        """Channel → {state: rows} for its outbox rows queued, sending or failed."""
        out: dict[str, dict[str, int]] = {}
        for ch, st, n in self.db.execute(
            "SELECT channel, state, COUNT(*) FROM outbox WHERE state IN (?,?,?)"
            " GROUP BY channel, state",
            UNSENT,
        ):
            out.setdefault(ch, {})[st] = n
        return out
