"""A turn, its outbox rows and the inbound status, in ONE transaction."""

from __future__ import annotations

import functools
import json
import sqlite3
import time
from collections.abc import Iterable
from typing import Any

from bot.store.kv import kv_params, kv_upsert
from bot.store.outbox import OutboxMixin, queued_rows
from bot.store.rows import OutboxRow
from bot.store.sessions import SessionsMixin

# UPDATE ... RETURNING (SQLite 3.35): the session's epoch comes back from the write that
# counts the turn's usage, instead of a SELECT of its row before the transaction
RETURNING = sqlite3.sqlite_version_info >= (3, 35, 0)

_TOUCH = "UPDATE sessions SET updated=?, usage_in=usage_in+?, usage_out=usage_out+? WHERE key=?"


# a turn's messages go in ONE statement (multi-row VALUES), up to this many rows each
# (9 parameters a row, far below SQLite's limit on bound parameters)
_ROWS_PER_INSERT = 100


@functools.cache
def _insert_messages(n: int) -> str:
    return (
        "INSERT INTO messages(session_key, epoch, turn, kind, role, data, chars, tokens, created)"
        " VALUES " + ",".join(["(?,?,?,?,?,?,?,?,?)"] * n)
    )


class TurnsMixin(SessionsMixin, OutboxMixin):
    def commit_turn(self, key: str, turn: str, messages: Iterable[dict], **kw: Any) -> list[int]:
        """Store a whole turn atomically; with ``inbound_id`` the inbound row becomes
        'done'.  The reply (``outbound``: OutboundMessage dicts) is queued in the outbox in
        the same transaction, for ``channel`` (default: the inbound row's channel; a
        scheduled turn has none and names it), and so are the ``state`` values (kv: the
        heartbeat's last alert).  Takes :meth:`commit_turn_rows`'s keywords; returns the
        new outbox row ids."""
        return [r.id for r in self.commit_turn_rows(key, turn, messages, **kw)]

    def commit_turn_rows(
        self,
        key: str,
        turn: str,
        messages: Iterable[dict],
        *,
        kind: str = "chat",
        inbound_id: int | None = None,
        outbound: list | None = None,
        usage: dict | None = None,
        outbox_kind: str = "reply",
        channel: str | None = None,
        state: dict[str, Any] | None = None,
    ) -> list[OutboxRow]:
        """:meth:`commit_turn`, returning the new outbox rows as stored (what
        ``outbox_rows`` would read back), for the sender to queue without reading them.
        A caller that knows the inbound row's channel passes it (it is not looked up)."""
        now = time.time()
        rows = [
            (m.get("role", ""), s, len(s), self._count_json(m, s))
            for m in messages
            for s in (json.dumps(m, ensure_ascii=False),)
        ]
        usage = usage or {}
        touch = (
            now,
            int(usage.get("prompt_tokens", 0) or 0),
            int(usage.get("completion_tokens", 0) or 0),
            key,
        )
        with self._tx():
            epoch = self._touch_session(touch)
            for at in range(0, len(rows), _ROWS_PER_INSERT):
                chunk = rows[at : at + _ROWS_PER_INSERT]
                self.db.execute(
                    _insert_messages(len(chunk)),
                    [x for r in chunk for x in (key, epoch, turn, kind, *r, now)],
                )
            made: list[tuple[int, str, str]] = []
            if outbound and channel is None and inbound_id is not None:
                channel = self._inbound_channel(inbound_id)
            if outbound and channel is not None:
                made = self._insert_outbox(channel, outbound, outbox_kind, inbound_id, now)
            if inbound_id is not None:
                self.db.execute(
                    "UPDATE inbound SET status='done', outbound=NULL WHERE id=?", (inbound_id,)
                )
            if state:
                self.db.execute(kv_upsert(len(state)), kv_params(state))
        return queued_rows(channel, outbox_kind, now, made) if channel is not None else []

    def _touch_session(self, touch: tuple) -> int:
        """Count the turn's usage on its session row and return the session's epoch, inside
        the turn's transaction (the row is created first when missing, as ``session``
        does): one UPDATE ... RETURNING, or on an older SQLite the read and the UPDATE."""
        if RETURNING:
            got = self.db.execute(_TOUCH + " RETURNING epoch", touch).fetchall()
            if got:
                return int(got[0][0])
        epoch = int(self.session(touch[-1])["epoch"])
        self.db.execute(_TOUCH, touch)
        return epoch

    def _inbound_channel(self, inbound_id: int) -> str | None:
        row = self.db.execute("SELECT channel FROM inbound WHERE id=?", (inbound_id,)).fetchone()
        return row[0] if row is not None else None
