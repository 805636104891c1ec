"""Sessions: epoch (/new, /reset), activation, the group intro, usage totals."""

from __future__ import annotations

import time

from bot.store.db import Database


class SessionsMixin(Database):
    def _ensure_session(self, key: str) -> None:
        now = time.time()
        self.db.execute(
            "INSERT OR IGNORE INTO sessions(key, created, updated) VALUES (?,?,?)", (key, now, now)
        )

    def session(self, key: str) -> dict:
        """The session's row, created first when it does not exist yet.  Read first: the
        row exists at every message but a chat's first, and a read takes no write lock."""
        r = self._session_row(key)
        if r is None:
            self._ensure_session(key)
            r = self._session_row(key)
            assert r is not None
        return {
            "key": key,
            "epoch": r[0],
            "activation": r[1],
            "intro_done": bool(r[2]),
            "usage_in": r[3],
            "usage_out": r[4],
            "created": r[5],
            "updated": r[6],
        }

    def _session_row(self, key: str) -> tuple | None:
        return self.db.execute(
            "SELECT epoch, activation, intro_done, usage_in, usage_out, created, updated FROM sessions WHERE key=?",
            (key,),
        ).fetchone()

    def reset_session(self, key: str) -> None:
        self._ensure_session(key)
        self.db.execute(
            "UPDATE sessions SET epoch=epoch+1, intro_done=0, updated=? WHERE key=?",
            (time.time(), key),
        )
        self.db.execute("DELETE FROM group_history WHERE session_key=?", (key,))

    def prune_throwaway_sessions(self, marker: str, older_than: float) -> int:
        """Delete the sessions whose key contains ``marker`` (the HTTP API's stateless
        requests: ``:http-stateless:``) and that were last used before ``older_than`` (epoch
        seconds), with their messages and summaries.  Usage rows stay (they carry the key as
        text, for `chela usage`).  Returns how many sessions went."""
        keys = [
            k
            for (k,) in self.db.execute(
                "SELECT key FROM sessions WHERE instr(key, ?) > 0 AND updated < ?",
                (marker, older_than),
            )
        ]
        with self._tx():
            for k in keys:
                self.db.execute("DELETE FROM messages WHERE session_key=?", (k,))
                self.db.execute("DELETE FROM summaries WHERE session_key=?", (k,))
                self.db.execute("DELETE FROM sessions WHERE key=?", (k,))
        return len(keys)

    def set_activation(self, key: str, activation: str | None) -> None:
        self._ensure_session(key)
        self.db.execute(
            "UPDATE sessions SET activation=?, intro_done=0 WHERE key=?", (activation, key)
        )

    def mark_intro_done(self, key: str) -> None:
        self.db.execute("UPDATE sessions SET intro_done=1 WHERE key=?", (key,))
