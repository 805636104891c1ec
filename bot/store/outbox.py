"""Outbox rows: every message to send, queued -> sending -> sent | failed, and a failed row
the owner gives up on -> discarded (the Inbox's Discard) (bot/delivery/outbox.py)."""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Iterable

from bot.store.db import Database
from bot.store.rows import OutboxRow

OUTBOX_OVER = ("sent", "failed", "discarded")  # pruned once older than the delivery's keep


def _new_nonce() -> str:
    return secrets.token_hex(8)


def queued_rows(
    channel: str, kind: str, now: float, made: list[tuple[int, str, str]]
) -> list[OutboxRow]:
    """Rows just inserted (``OutboxMixin._insert_outbox``) as ``outbox_rows`` reads them
    back: 'queued', no attempt yet, the payload decoded from the JSON stored."""
    return [
        OutboxRow(row_id, channel, kind, json.loads(payload), nonce, "queued", 0, now, now)
        for row_id, payload, nonce in made
    ]


class OutboxMixin(Database):
    def _insert_outbox(
        self,
        channel: str,
        outs: list[dict],
        kind: str,
        inbound_id: int | None,
        now: float,
        agent: str = "",
    ) -> list[tuple[int, str, str]]:
        """Insert the rows (inside the caller's transaction): each one's id, payload JSON
        and nonce (:func:`queued_rows` makes them the rows ``outbox_rows`` would read).
        ``agent``: the agent whose turn wrote them ("" when no agent did)."""
        made = []
        for o in outs:
            payload = json.dumps(o, ensure_ascii=False)
            nonce = _new_nonce()
            cur = self.db.execute(
                "INSERT INTO outbox(channel, account, chat_id, kind, payload, nonce, inbound_id,"
                " created, updated, agent) VALUES (?,?,?,?,?,?,?,?,?,?)",
                (
                    channel,
                    str(o.get("account") or "default"),
                    str(o.get("chat_id", "")),
                    kind,
                    payload,
                    nonce,
                    inbound_id,
                    now,
                    now,
                    agent,
                ),
            )
            made.append((int(cur.lastrowid or 0), payload, nonce))
        return made

    def add_outbox(
        self,
        channel: str,
        outs: list[dict],
        *,
        kind: str,
        inbound_id: int | None = None,
        agent: str = "",
    ) -> list[int]:
        """Queue outbound messages (OutboundMessage dicts) for ``channel``; their ids."""
        with self._tx():
            made = self._insert_outbox(channel, outs, kind, inbound_id, time.time(), agent)
        return [row_id for row_id, _, _ in made]

    def outbox_rows(self, ids: Iterable[int]) -> list[OutboxRow]:
        ids = list(ids)
        if not ids:
            return []
        marks = ",".join("?" * len(ids))
        rows = self.db.execute(
            "SELECT id, channel, kind, payload, nonce, state, attempts, created, updated FROM outbox"
            f" WHERE id IN ({marks}) ORDER BY id",
            ids,
        ).fetchall()
        return [OutboxRow(r[0], r[1], r[2], json.loads(r[3]), *r[4:]) for r in rows]

    def outbox_pending(self) -> list[OutboxRow]:
        """Rows not sent yet ('queued') or whose send was in flight ('sending'), oldest first."""
        rows = self.db.execute(
            "SELECT id, channel, kind, payload, nonce, state, attempts, created, updated FROM outbox"
            " WHERE state IN ('queued','sending') ORDER BY id"
        ).fetchall()
        return [OutboxRow(r[0], r[1], r[2], json.loads(r[3]), *r[4:]) for r in rows]

    def outbox_sending(self, row_id: int) -> None:
        """Written just before the platform call: from here on the outcome is unknown."""
        self.db.execute(
            "UPDATE outbox SET state='sending', attempts=attempts+1, updated=? WHERE id=?",
            (time.time(), row_id),
        )

    def outbox_done(
        self,
        row_id: int,
        state: str,
        *,
        sent_ids: list[str] | None = None,
        error: str | None = None,
    ) -> None:
        """The outcome of an attempt: 'sent', 'failed', or 'queued' again (to be retried)."""
        self.db.execute(
            "UPDATE outbox SET state=?, sent_ids=?, error=?, updated=? WHERE id=?",
            (
                state,
                json.dumps(sent_ids) if sent_ids is not None else None,
                error,
                time.time(),
                row_id,
            ),
        )

    def prune_outbox(self, older_than: float) -> int:
        """Forget the rows that are over (sent, failed, or discarded from the Inbox) last
        touched before ``older_than`` (unix time); rows still to send stay."""
        return self.db.execute(
            "DELETE FROM outbox WHERE state IN (?,?,?) AND updated<?", (*OUTBOX_OVER, older_than)
        ).rowcount

    def outbox_counts(self) -> dict[str, int]:
        return {
            r[0]: r[1] for r in self.db.execute("SELECT state, COUNT(*) FROM outbox GROUP BY state")
        }

    def outbox_items(self, state: str | None) -> list[dict]:
        """The rows the Control UI's Inbox lists: one state, or every row not
        yet sent, newest first, each with the first line of its text."""
        q = "SELECT id, channel, chat_id, kind, payload, state, error, attempts, created FROM outbox"
        args: list[str] = []
        if state:
            q += " WHERE state=?"
            args.append(state)
        else:
            q += " WHERE state IN ('queued','sending','failed')"
        items = []
        for rid, channel, chat, kind, payload, st, error, attempts, created in self.db.execute(
            q + " ORDER BY id DESC LIMIT 500", args
        ):
            text = str(json.loads(payload).get("text") or "")
            items.append(
                {
                    "id": rid,
                    "channel": channel,
                    "chat": chat,
                    "kind": kind,
                    "preview": text.strip().split("\n", 1)[0][:200],
                    "state": st,
                    "error": error,
                    "attempts": attempts,
                    "created": created,
                }
            )
        return items

    def outbox_state(self, row_id: int) -> str | None:
        row = self.db.execute("SELECT state FROM outbox WHERE id=?", (row_id,)).fetchone()
        return row[0] if row else None

    def outbox_requeue(self, row_id: int, now: float) -> bool:
        """A failed row back to 'queued' (a fresh start for ``delivery.max_age``)."""
        cur = self.db.execute(
            "UPDATE outbox SET state='queued', error=NULL, created=?, updated=? WHERE id=? AND"
            " state='failed'",
            (now, now, row_id),
        )
        return cur.rowcount == 1

    def outbox_discard(self, row_id: int, now: float) -> bool:
        """A failed row set aside for good (the Inbox's Discard)."""
        cur = self.db.execute(
            "UPDATE outbox SET state='discarded', updated=? WHERE id=? AND state='failed'",
            (now, row_id),
        )
        return cur.rowcount == 1

    def _migrate_delivering(self) -> None:
        """Databases from before the outbox kept a reply to deliver on its inbound row
        ('delivering'): move those replies to the outbox."""
        rows = self.db.execute(
            "SELECT id, channel, outbound FROM inbound WHERE status='delivering'"
        ).fetchall()
        if not rows:
            return
        with self._tx():
            for inbound_id, channel, outbound in rows:
                outs = json.loads(outbound) if outbound else []
                if outs:
                    self._insert_outbox(channel, outs, "reply", inbound_id, time.time())
                self.db.execute(
                    "UPDATE inbound SET status='done', outbound=NULL WHERE id=?", (inbound_id,)
                )
