"""Group history: what was said in a group since the bot last answered there."""

from __future__ import annotations

from bot.store.db import Database


class GroupHistoryMixin(Database):
    def add_group_history(self, key: str, sender: str, text: str, ts: float, cap: int) -> None:
        self.db.execute(
            "INSERT INTO group_history(session_key, sender, text, ts) VALUES (?,?,?,?)",
            (key, sender, text, ts),
        )
        self.db.execute(
            "DELETE FROM group_history WHERE session_key=? AND id NOT IN"
            " (SELECT id FROM group_history WHERE session_key=? ORDER BY id DESC LIMIT ?)",
            (key, key, cap),
        )

    def take_group_history(self, key: str) -> list[dict]:
        rows = self.db.execute(
            "SELECT id, sender, text, ts FROM group_history WHERE session_key=? ORDER BY id", (key,)
        ).fetchall()
        if rows:
            self.db.execute(
                "DELETE FROM group_history WHERE session_key=? AND id<=?", (key, rows[-1][0])
            )
        return [{"sender": r[1], "text": r[2], "ts": r[3]} for r in rows]

    def peek_group_history(self, key: str) -> list[dict]:
        rows = self.db.execute(
            "SELECT sender, text, ts FROM group_history WHERE session_key=? ORDER BY id", (key,)
        ).fetchall()
        return [{"sender": r[0], "text": r[1], "ts": r[2]} for r in rows]
