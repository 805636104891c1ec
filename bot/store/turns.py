"""A turn, its outbox rows and the inbound status, in ONE transaction."""

from __future__ import annotations

import json
import time
from collections.abc import Iterable
from typing import Any

from bot.store.outbox import OutboxMixin
from bot.store.sessions import SessionsMixin


class TurnsMixin(SessionsMixin, OutboxMixin):
    def commit_turn(
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
    ) -> list[int]:
        """Store a whole turn atomically; with ``inbound_id`` the inbound row becomes
        'done'.  The reply (``outbound``: OutboundMessage dicts) is queued in the outbox in
        the same transaction, for ``channel`` (default: the inbound row's channel; a
        scheduled turn has none and names it), and so are the ``state`` values (kv: the
        heartbeat's last alert).  Returns the new outbox row ids."""
        now = time.time()
        epoch = self.session(key)["epoch"]
        rows = [
            (key, epoch, turn, kind, m.get("role", ""), s, len(s), self._count_json(m, s), now)
            for m in messages
            for s in (json.dumps(m, ensure_ascii=False),)
        ]
        with self._tx():
            self.db.executemany(
                "INSERT INTO messages(session_key, epoch, turn, kind, role, data, chars, tokens, created)"
                " VALUES (?,?,?,?,?,?,?,?,?)",
                rows,
            )
            usage = usage or {}
            self.db.execute(
                "UPDATE sessions SET updated=?, usage_in=usage_in+?, usage_out=usage_out+? WHERE key=?",
                (
                    now,
                    int(usage.get("prompt_tokens", 0) or 0),
                    int(usage.get("completion_tokens", 0) or 0),
                    key,
                ),
            )
            out_ids: list[int] = []
            if outbound and channel is None and inbound_id is not None:
                row = self.db.execute(
                    "SELECT channel FROM inbound WHERE id=?", (inbound_id,)
                ).fetchone()
                channel = row[0] if row is not None else None
            if outbound and channel is not None:
                out_ids = self._insert_outbox(channel, outbound, outbox_kind, inbound_id, now)
            if inbound_id is not None:
                self.db.execute(
                    "UPDATE inbound SET status='done', outbound=NULL WHERE id=?", (inbound_id,)
                )
            self.db.executemany(
                "INSERT OR REPLACE INTO kv(key, value) VALUES (?,?)",
                [(k, json.dumps(v)) for k, v in (state or {}).items()],
            )
        return out_ids
