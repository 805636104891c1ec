"""DM pairing: pending requests, approved senders, approvals not acted on yet.

A request's first message (what the owner is shown) is kept in the key/value
table under ``pairing:first:<channel>:<sender id>`` and goes with its request."""

from __future__ import annotations

import json
import time

from bot.store.db import Database

FIELDS = ("channel", "sender_id", "sender_name", "code", "created", "notified")


def _first_key(channel: str, sender_id: str) -> str:
    return f"pairing:first:{channel}:{sender_id}"


class PairingMixin(Database):
    def is_approved(self, channel: str, sender_id: str) -> bool:
        return (
            self.db.execute(
                "SELECT 1 FROM approved_senders WHERE channel=? AND sender_id=?",
                (channel, sender_id),
            ).fetchone()
            is not None
        )

    def pairing_requests(self, channel: str | None = None) -> list[dict]:
        """The stored requests (of ``channel``, else of every channel), oldest first, each
        with its ``first_message`` ("" when none was kept)."""
        q = "SELECT " + ", ".join(FIELDS) + " FROM pairing_requests"
        args: tuple = ()
        if channel:
            q += " WHERE channel=?"
            args = (channel,)
        rows = [
            dict(zip(FIELDS, r, strict=True))
            for r in self.db.execute(q + " ORDER BY created", args)
        ]
        for row in rows:
            got = self.db.execute(
                "SELECT value FROM kv WHERE key=?", (_first_key(row["channel"], row["sender_id"]),)
            ).fetchone()
            row["first_message"] = str(json.loads(got[0])) if got else ""
        return rows

    def upsert_pairing(
        self,
        channel: str,
        sender_id: str,
        sender_name: str,
        code: str,
        created: float,
        notified: float,
        first_message: str | None = None,
    ) -> None:
        """Store a request; ``first_message`` (when given) replaces the one kept."""
        with self._tx():
            self.db.execute(
                "INSERT INTO pairing_requests(channel, sender_id, sender_name, code, created, notified) VALUES (?,?,?,?,?,?)"
                " ON CONFLICT(channel, sender_id) DO UPDATE SET sender_name=excluded.sender_name, code=excluded.code,"
                " created=excluded.created, notified=excluded.notified",
                (channel, sender_id, sender_name, code, created, notified),
            )
            if first_message is not None:
                self.db.execute(
                    "INSERT OR REPLACE INTO kv(key, value) VALUES (?,?)",
                    (_first_key(channel, sender_id), json.dumps(first_message)),
                )

    def delete_pairing(self, channel: str, sender_id: str) -> None:
        with self._tx():
            self._drop_request(channel, sender_id)

    def _drop_request(self, channel: str, sender_id: str) -> None:
        self.db.execute(
            "DELETE FROM pairing_requests WHERE channel=? AND sender_id=?", (channel, sender_id)
        )
        self.db.execute("DELETE FROM kv WHERE key=?", (_first_key(channel, sender_id),))

    def approve(self, channel: str, sender_id: str) -> None:
        with self._tx():
            self.db.execute(
                "INSERT OR REPLACE INTO approved_senders(channel, sender_id, approved) VALUES (?,?,?)",
                (channel, sender_id, time.time()),
            )
            self.db.execute(
                "INSERT OR IGNORE INTO pairing_welcome(channel, sender_id) VALUES (?,?)",
                (channel, sender_id),
            )
            self._drop_request(channel, sender_id)

    def take_new_approvals(self) -> list[tuple[str, str]]:
        """Approvals not acted on yet (the sender is told and their message answered)."""
        with self._tx():
            rows = self.db.execute("SELECT channel, sender_id FROM pairing_welcome").fetchall()
            self.db.execute("DELETE FROM pairing_welcome")
        return [(r[0], r[1]) for r in rows]
