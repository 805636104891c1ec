"""DM pairing: pending requests, approved senders, approvals not acted on yet."""

from __future__ import annotations

import time

from bot.store.db import Database


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
        q = "SELECT channel, sender_id, sender_name, code, created, notified FROM pairing_requests"
        args: tuple = ()
        if channel:
            q += " WHERE channel=?"
            args = (channel,)
        return [
            dict(
                zip(
                    ("channel", "sender_id", "sender_name", "code", "created", "notified"),
                    r,
                    strict=True,
                )
            )
            for r in self.db.execute(q + " ORDER BY created", args)
        ]

    def upsert_pairing(
        self,
        channel: str,
        sender_id: str,
        sender_name: str,
        code: str,
        created: float,
        notified: float,
    ) -> None:
        self.db.execute(
            "INSERT INTO pairing_requests(channel, sender_id, sender_name, code, created, notified) VALUES (?,?,?,?,?,?)"
            " ON CONFLICT(channel, sender_id) DO UPDATE SET sender_name=excluded.sender_name, code=excluded.code,"
            " created=excluded.created, notified=excluded.notified",
            (channel, sender_id, sender_name, code, created, notified),
        )

    def delete_pairing(self, channel: str, sender_id: str) -> None:
        self.db.execute(
            "DELETE FROM pairing_requests WHERE channel=? AND sender_id=?", (channel, sender_id)
        )

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
            self.db.execute(
                "DELETE FROM pairing_requests WHERE channel=? AND sender_id=?", (channel, sender_id)
            )

    def take_new_approvals(self) -> list[tuple[str, str]]:
        """Approvals not acted on yet (the sender is told and their message answered)."""
        with self._tx():
            rows = self.db.execute("SELECT channel, sender_id FROM pairing_welcome").fetchall()
            self.db.execute("DELETE FROM pairing_welcome")
        return [(r[0], r[1]) for r in rows]
