"""A turn, its outbox rows and the inbound status, in ONE transaction."""

from __future__ import annotations

import json
import time
from collections.abc import Iterable
from typing import Any

from bot.store.kv import KV_PUT
from bot.store.outbox import OutboxMixin, queued_rows
from bot.store.rows import OutboxRow
from bot.store.sessions import SessionsMixin

_TOUCH = "UPDATE sessions SET updated=?, usage_in=usage_in+?, usage_out=usage_out+? WHERE key=?"
_INSERT = (
    "INSERT INTO messages(session_key, epoch, turn, kind, role, data, chars, tokens, created)"
    " VALUES (?,?,?,?,?,?,?,?,?)"
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
        agent: str = "",
    ) -> list[OutboxRow]:
        """:meth:`commit_turn`, returning the new outbox rows as stored (what
        ``outbox_rows`` would read back), for the sender to queue without reading them.
        A caller that knows the inbound row's channel passes it (it is not looked up);
        ``agent``: the agent whose turn it is, recorded on its outbox rows."""
        now = time.time()
        rows = [
            (m.get("role", ""), s, len(s), self._count(m))
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
            epoch = int(self.session(key)["epoch"])  # creates the row when missing
            self.db.execute(_TOUCH, touch)
            self.db.executemany(_INSERT, [(key, epoch, turn, kind, *r, now) for r in rows])
            made: list[tuple[int, str, str]] = []
            if outbound and channel is None and inbound_id is not None:
                channel = self._inbound_channel(inbound_id)
            if outbound and channel is not None:
                made = self._insert_outbox(channel, outbound, outbox_kind, inbound_id, now, agent)
            if inbound_id is not None:
                self.db.execute(
                    "UPDATE inbound SET status='done', outbound=NULL WHERE id=?", (inbound_id,)
                )
            if state:
                self.db.executemany(KV_PUT, [(k, json.dumps(v)) for k, v in state.items()])
        return queued_rows(channel, outbox_kind, now, made) if channel is not None else []

    def _inbound_channel(self, inbound_id: int) -> str | None:
        row = self.db.execute("SELECT channel FROM inbound WHERE id=?", (inbound_id,)).fetchone()
        return row[0] if row is not None else None
