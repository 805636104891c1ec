"""Compaction: summaries and the model's window after the current one."""

from __future__ import annotations

import json
import time

from bot.store.rows import WindowRow
from bot.store.sessions import SessionsMixin


def _tool_result_content(message: dict) -> bool:
    content = message.get("content")
    return isinstance(content, str) and content.lstrip().startswith("<tool_result")


class SummariesMixin(SessionsMixin):
    def summary(self, key: str, *, epoch: int | None = None) -> dict | None:
        """The session's current summary (of its current epoch, or of ``epoch`` when the
        caller has just read it), or None."""
        return self._summary(key, self.session(key)["epoch"] if epoch is None else epoch)

    def _summary(self, key: str, epoch: int) -> dict | None:
        r = self.db.execute(
            "SELECT id, upto_id, text, tokens, source, created FROM summaries WHERE session_key=? AND epoch=?"
            " ORDER BY id DESC LIMIT 1",
            (key, epoch),
        ).fetchone()
        return (
            None
            if r is None
            else {
                "id": r[0],
                "upto_id": r[1],
                "text": r[2],
                "tokens": r[3],
                "source": r[4],
                "created": r[5],
            }
        )

    def summary_count(self, key: str) -> int:
        epoch = self.session(key)["epoch"]
        return self.db.execute(
            "SELECT COUNT(*) FROM summaries WHERE session_key=? AND epoch=?", (key, epoch)
        ).fetchone()[0]

    def window(
        self,
        key: str,
        *,
        limit: int,
        epoch: int | None = None,
        after: int | None = None,
        known: int = 0,
    ) -> list[WindowRow]:
        """The messages in the model's view: those after the current summary, newest
        ``limit`` of them, oldest first, never starting with a tool result.  The query
        reads only rows after the summary, so its cost does not grow with the session.
        A caller that has just read the session's ``epoch`` and its summary (``after``: the
        summary's ``upto_id``, 0 for none) passes them, and neither is read again.  Rows
        up to id ``known`` (a caller that holds them decoded) come back with an empty
        message: only their id, role and count are read."""
        if epoch is None:
            epoch = self.session(key)["epoch"]
        if after is None:
            s = self._summary(key, epoch)
            after = s["upto_id"] if s else 0
        rows = self.db.execute(
            "SELECT id, role, data, tokens FROM messages WHERE session_key=? AND epoch=? AND id>?"
            " ORDER BY id DESC LIMIT ?",
            (key, epoch, after, limit),
        ).fetchall()
        out: list[WindowRow] = []
        missing: list[tuple[int, int]] = []
        for mid, role, data, stored_tokens in reversed(rows):
            msg = json.loads(data) if mid > known or stored_tokens is None else {}
            tokens = stored_tokens
            if tokens is None:  # stored before token counts existed: count once, keep it
                tokens = self._count(msg)
                missing.append((tokens, mid))
            out.append(WindowRow(mid, role, msg, tokens))
        if missing:
            self.db.executemany("UPDATE messages SET tokens=? WHERE id=?", missing)
        while out and (out[0].role != "user" or _tool_result_content(out[0].message)):
            out.pop(0)
        return out

    def save_summary(
        self,
        key: str,
        upto_id: int,
        text: str,
        tokens: int,
        *,
        source: str = "model",
        reason: str = "",
        epoch: int | None = None,
    ) -> int:
        """Replace the session's messages up to ``upto_id`` by a summary, in one
        transaction: either both the summary and the marks are there, or neither."""
        if epoch is None:
            epoch = self.session(key)["epoch"]
        with self._tx():
            prev = (
                self.db.execute(
                    "SELECT MAX(upto_id) FROM summaries WHERE session_key=? AND epoch=?",
                    (key, epoch),
                ).fetchone()[0]
                or 0
            )
            cur = self.db.execute(
                "INSERT INTO summaries(session_key, epoch, upto_id, text, tokens, source, reason, created)"
                " VALUES (?,?,?,?,?,?,?,?)",
                (key, epoch, upto_id, text, tokens, source, reason, time.time()),
            )
            sid = int(cur.lastrowid or 0)
            self.db.execute(
                "UPDATE messages SET summary_id=? WHERE session_key=? AND epoch=? AND id<=?"
                " AND id>?",
                (sid, key, epoch, upto_id, prev),
            )
        return sid
