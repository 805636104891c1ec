"""Conversation history: the stored messages of a session's current epoch."""

from __future__ import annotations

import json

from bot.store.sessions import SessionsMixin


def _is_tool_result(data: str) -> bool:
    """A text-protocol turn carries tool results back as a user message."""
    content = json.loads(data).get("content")
    return isinstance(content, str) and content.lstrip().startswith("<tool_result")


class MessagesMixin(SessionsMixin):
    def history(self, key: str, *, limit: int, max_chars: int) -> list[dict]:
        """The newest messages of the session's current epoch, oldest first, bounded by
        count and characters, never starting with a tool result (or an orphaned
        assistant tool-call whose results were cut)."""
        epoch = self.session(key)["epoch"]
        rows = self.db.execute(
            "SELECT data, chars, role FROM messages WHERE session_key=? AND epoch=? ORDER BY id DESC LIMIT ?",
            (key, epoch, limit),
        ).fetchall()
        picked: list[tuple[str, str]] = []
        total = 0
        for data, chars, role in rows:
            if total + chars > max_chars and picked:
                break
            total += chars
            picked.append((data, role))
        picked.reverse()
        # a window must begin with a user message: drop leading tool results and the
        # assistant/tool pieces of a turn whose beginning fell off
        while picked and (picked[0][1] != "user" or _is_tool_result(picked[0][0])):
            picked.pop(0)
        return [json.loads(d) for d, _ in picked]

    def transcript(self, key: str) -> list[dict]:
        """Every stored message of the session's current epoch, oldest first (summarized
        ones too), each with its time and kind: what `chela sessions show` prints.  Read
        only: an unknown key gives [] and creates nothing."""
        row = self.db.execute("SELECT epoch FROM sessions WHERE key=?", (key,)).fetchone()
        if row is None:
            return []
        rows = self.db.execute(
            "SELECT data, created, kind FROM messages WHERE session_key=? AND epoch=? ORDER BY id",
            (key, row[0]),
        ).fetchall()
        return [{**json.loads(d), "created": created, "kind": kind} for d, created, kind in rows]

    def sessions_list(self) -> list[dict]:
        """Every session, most recently used first: key, updated, messages of its current
        epoch, tokens in and out."""
        rows = self.db.execute(
            "SELECT s.key, s.updated, s.usage_in, s.usage_out, "
            "(SELECT COUNT(*) FROM messages m WHERE m.session_key=s.key AND m.epoch=s.epoch) "
            "FROM sessions s ORDER BY s.updated DESC, s.key"
        ).fetchall()
        return [
            {"key": k, "updated": u, "usage_in": i, "usage_out": o, "messages": n}
            for k, u, i, o, n in rows
        ]

    def message_count(self, key: str) -> int:
        epoch = self.session(key)["epoch"]
        return self.db.execute(
            "SELECT COUNT(*) FROM messages WHERE session_key=? AND epoch=?", (key, epoch)
        ).fetchone()[0]
