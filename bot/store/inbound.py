"""Inbound rows: every platform message, stored before the platform is acknowledged."""

from __future__ import annotations

import json
import time

from bot.store.db import Database
from bot.store.kv import KV_PUT
from bot.store.rows import InboundRow


_ROW = "id, session_key, payload, status, outbound, agent"


def _inbound_row(r: tuple) -> InboundRow:
    return InboundRow(r[0], r[1], json.loads(r[2]), r[3], json.loads(r[4]) if r[4] else None, r[5])


class InboundMixin(Database):
    def add_inbound(
        self,
        channel: str,
        account: str,
        chat_id: str,
        message_id: str,
        session_key: str,
        payload: dict,
        agent: str = "",
        cursor: tuple[str, int] | None = None,
    ) -> int | None:
        """Persist an inbound message (``agent``: the one its binding chose); None when the
        same platform message was stored before.  ``cursor``: the platform position
        ``(kv key, value)`` its adapter keeps, stored in the same transaction as the row
        (stored even when the row was there already)."""
        row = (
            channel,
            account,
            chat_id,
            message_id,
            session_key,
            json.dumps(payload),
            time.time(),
            agent,
        )
        if cursor is None:
            return self._insert_inbound(row)
        with self._tx():
            self.db.execute(KV_PUT, (cursor[0], json.dumps(cursor[1])))
            return self._insert_inbound(row)

    def _insert_inbound(self, row: tuple) -> int | None:
        cur = self.db.execute(
            "INSERT OR IGNORE INTO inbound(channel, account, chat_id, message_id, session_key,"
            " payload, created, agent) VALUES (?,?,?,?,?,?,?,?)",
            row,
        )
        return cur.lastrowid if cur.rowcount else None

    def set_inbound_status(self, inbound_id: int, status: str) -> None:
        self.db.execute(
            "UPDATE inbound SET status=?, outbound=NULL WHERE id=?", (status, inbound_id)
        )

    def unfinished_inbound(self) -> list[InboundRow]:
        rows = self.db.execute(
            f"SELECT {_ROW} FROM inbound WHERE status='pending' ORDER BY id"
        ).fetchall()
        return [_inbound_row(r) for r in rows]

    def inbound_with_status(
        self, status: str, *, channel: str | None = None, session_key: str | None = None
    ) -> list[InboundRow]:
        q = f"SELECT {_ROW} FROM inbound WHERE status=?"
        args: list = [status]
        if channel is not None:
            q += " AND channel=?"
            args.append(channel)
        if session_key is not None:
            q += " AND session_key=?"
            args.append(session_key)
        rows = self.db.execute(q + " ORDER BY id", args).fetchall()
        return [_inbound_row(r) for r in rows]

    def hold_for_pairing(self, inbound_id: int, session_key: str) -> None:
        """Keep this message of an unknown sender for after their pairing is approved, and
        forget their older held ones (only the newest is answered)."""
        with self._tx():
            self.db.execute("UPDATE inbound SET status='pairing' WHERE id=?", (inbound_id,))
            self.db.execute(
                "DELETE FROM inbound WHERE session_key=? AND status='pairing' AND id<?",
                (session_key, inbound_id),
            )

    def requeue_inbound(self, inbound_id: int, session_key: str, agent: str = "") -> None:
        """Make a held message pending again (e.g. after its sender's pairing was approved),
        for ``agent`` (its binding's) in the session ``session_key``."""
        self.db.execute(
            "UPDATE inbound SET status='pending', session_key=?, outbound=NULL, agent=? WHERE id=?",
            (session_key, agent, inbound_id),
        )
