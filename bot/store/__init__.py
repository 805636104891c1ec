"""Persistence: one SQLite database under ``state_dir``.

Everything that must survive a restart lives here: inbound messages (stored before the
platform is acknowledged), conversation history (including tool calls and results),
sessions (last route, activation), DM pairing, heartbeat state, cron jobs and the outbox
of every message to send (bot/outbox.py).

The daemon is a single asyncio process and SQLite calls on a local file take tens of
microseconds, so the store is used synchronously from the event loop; WAL mode keeps
readers and the writer out of each other's way.
"""

from __future__ import annotations

import json
import os
import secrets
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from collections.abc import Callable, Iterable

from bot.private import private_dir, private_file
import contextlib

SCHEMA = """
CREATE TABLE IF NOT EXISTS inbound (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    channel     TEXT NOT NULL,
    account     TEXT NOT NULL,
    chat_id     TEXT NOT NULL,
    message_id  TEXT NOT NULL,
    session_key TEXT NOT NULL,
    payload     TEXT NOT NULL,
    status      TEXT NOT NULL DEFAULT 'pending',   -- pending | done | skipped | history | pairing | failed
    outbound    TEXT,                              -- unused (replies live in the outbox)
    created     REAL NOT NULL,
    UNIQUE (channel, account, chat_id, message_id)
);
CREATE INDEX IF NOT EXISTS inbound_status ON inbound(status, id);
CREATE INDEX IF NOT EXISTS inbound_session ON inbound(session_key, status, id);

CREATE TABLE IF NOT EXISTS messages (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    session_key TEXT NOT NULL,
    epoch       INTEGER NOT NULL DEFAULT 0,        -- bumped by /new and /reset
    turn        TEXT NOT NULL DEFAULT '',          -- groups the messages of one turn
    kind        TEXT NOT NULL DEFAULT 'chat',      -- chat | heartbeat | cron
    role        TEXT NOT NULL,
    data        TEXT NOT NULL,                     -- the OpenAI-format message dict
    chars       INTEGER NOT NULL,
    created     REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS messages_session ON messages(session_key, epoch, id);

-- compaction (SPEC §10): a summary replaces a session's messages up to upto_id; those
-- messages stay (summary_id set) for audit, out of the model's view
CREATE TABLE IF NOT EXISTS summaries (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    session_key TEXT NOT NULL,
    epoch       INTEGER NOT NULL,
    upto_id     INTEGER NOT NULL,                  -- last message id the summary covers
    text        TEXT NOT NULL,
    tokens      INTEGER NOT NULL,
    source      TEXT NOT NULL DEFAULT 'model',     -- model | fallback
    reason      TEXT NOT NULL DEFAULT '',
    created     REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS summaries_session ON summaries(session_key, epoch, id);

CREATE TABLE IF NOT EXISTS sessions (
    key         TEXT PRIMARY KEY,
    epoch       INTEGER NOT NULL DEFAULT 0,
    activation  TEXT,                              -- NULL | mention | always
    intro_done  INTEGER NOT NULL DEFAULT 0,        -- group activation line shown
    usage_in    INTEGER NOT NULL DEFAULT 0,
    usage_out   INTEGER NOT NULL DEFAULT 0,
    created     REAL NOT NULL,
    updated     REAL NOT NULL
);

CREATE TABLE IF NOT EXISTS group_history (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    session_key TEXT NOT NULL,
    sender      TEXT NOT NULL,
    text        TEXT NOT NULL,
    ts          REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS group_history_session ON group_history(session_key, id);

CREATE TABLE IF NOT EXISTS pairing_requests (
    channel     TEXT NOT NULL,
    sender_id   TEXT NOT NULL,
    sender_name TEXT NOT NULL DEFAULT '',
    code        TEXT NOT NULL,
    created     REAL NOT NULL,
    notified    REAL NOT NULL,
    PRIMARY KEY (channel, sender_id)
);
CREATE TABLE IF NOT EXISTS approved_senders (
    channel     TEXT NOT NULL,
    sender_id   TEXT NOT NULL,
    approved    REAL NOT NULL,
    PRIMARY KEY (channel, sender_id)
);

-- approvals the daemon has not acted on yet (the CLI writes, the daemon tells the sender)
CREATE TABLE IF NOT EXISTS pairing_welcome (
    channel     TEXT NOT NULL,
    sender_id   TEXT NOT NULL,
    PRIMARY KEY (channel, sender_id)
);

-- every outbound message (replies, command answers, heartbeats, cron, the message tool,
-- pairing and approval notes): queued -> sending (written just before the platform call)
-- -> sent (with the platform's ids) | failed.  After a crash 'queued' and 'sending' rows
-- are sent again; only 'sending' ones can have reached the user already.
CREATE TABLE IF NOT EXISTS outbox (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    channel     TEXT NOT NULL,
    account     TEXT NOT NULL,
    chat_id     TEXT NOT NULL,
    kind        TEXT NOT NULL,                     -- reply | heartbeat | cron | message | pairing | ...
    payload     TEXT NOT NULL,                     -- the OutboundMessage as JSON
    nonce       TEXT NOT NULL,                     -- idempotency key (Discord nonce)
    inbound_id  INTEGER,                           -- the message it answers, if any
    state       TEXT NOT NULL DEFAULT 'queued',    -- queued | sending | sent | failed
    attempts    INTEGER NOT NULL DEFAULT 0,
    error       TEXT,
    sent_ids    TEXT,                              -- JSON list of platform message ids
    created     REAL NOT NULL,
    updated     REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS outbox_state ON outbox(state, id);

CREATE TABLE IF NOT EXISTS kv (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);

CREATE TABLE IF NOT EXISTS cron_jobs (
    name     TEXT PRIMARY KEY,
    schedule TEXT NOT NULL,
    prompt   TEXT NOT NULL,
    target   TEXT NOT NULL DEFAULT 'last',
    to_      TEXT NOT NULL DEFAULT '',
    created  REAL NOT NULL
);
"""


# SPEC §12: one row per model call (tokens and cost), for /usage, `chela usage` and the
# daily cost limits
USAGE_SCHEMA = """
CREATE TABLE IF NOT EXISTS usage (
    id                INTEGER PRIMARY KEY AUTOINCREMENT,
    session_key       TEXT NOT NULL,
    turn              TEXT NOT NULL DEFAULT '',
    kind              TEXT NOT NULL DEFAULT 'chat',   -- chat | heartbeat | cron | subagent | ...
    trust             TEXT NOT NULL DEFAULT 'owner',  -- owner | guest
    model             TEXT NOT NULL,
    prompt_tokens     INTEGER NOT NULL DEFAULT 0,
    completion_tokens INTEGER NOT NULL DEFAULT 0,
    cached_tokens     INTEGER NOT NULL DEFAULT 0,
    cost_usd          REAL NOT NULL DEFAULT 0,
    created           REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS usage_created ON usage(created);
CREATE INDEX IF NOT EXISTS usage_session ON usage(session_key, created);
"""

_USAGE_TOTALS = (
    "SELECT COUNT(*), COALESCE(SUM(prompt_tokens),0), COALESCE(SUM(completion_tokens),0),"
    " COALESCE(SUM(cached_tokens),0), COALESCE(SUM(cost_usd),0) FROM usage WHERE created>=?"
)


@dataclass
class InboundRow:
    id: int
    session_key: str
    payload: dict
    status: str
    outbound: list | None


@dataclass
class OutboxRow:
    id: int
    channel: str
    kind: str
    payload: dict  # the OutboundMessage as JSON
    nonce: str
    state: str
    attempts: int
    created: float
    updated: float = 0.0


OUTBOX_PENDING = ("queued", "sending")


def storage_full(e: BaseException) -> bool:
    """A write failed for lack of space (a full disk, or the database's page limit) or
    because the file system refused it: worth retrying once space is back."""
    if not isinstance(e, sqlite3.OperationalError):
        return False
    code = getattr(e, "sqlite_errorcode", None)
    if code is not None:
        return code & 0xFF in (sqlite3.SQLITE_FULL, sqlite3.SQLITE_IOERR)
    text = str(e).lower()
    return "disk is full" in text or "disk i/o error" in text


def _new_nonce() -> str:
    return secrets.token_hex(8)


def _unusable(path: str, e: BaseException) -> str:
    """Why the database at ``path`` cannot be used, and what to do about it."""
    what = getattr(e, "strerror", None) or str(e)
    if isinstance(e, sqlite3.DatabaseError) and "not a database" in str(e):
        return (
            f"{path} is not a Chela database (SQLite says: {e}). Move it away, or point "
            "agent.state_dir at another directory; Chela creates a new database there."
        )
    if (
        isinstance(e, PermissionError)
        or "readonly" in str(e).lower()
        or "read-only" in str(e).lower()
    ):
        return (
            f"cannot write the state database {path}: {what}. Chela needs a writable state directory "
            "(agent.state_dir); fix its owner or mode, or choose another directory."
        )
    return (
        f"cannot open the state database {path}: {what}. Check that agent.state_dir is a directory "
        "Chela can create and write."
    )


def _is_tool_result(data: str) -> bool:
    """A text-protocol turn carries tool results back as a user message."""
    content = json.loads(data).get("content")
    return isinstance(content, str) and content.lstrip().startswith("<tool_result")


def estimate_tokens(message: dict) -> int:
    """A rough count (4 characters a token) for when no tokenizer is at hand."""
    return len(json.dumps(message, ensure_ascii=False)) // 4 + 4


@dataclass
class WindowRow:
    id: int
    role: str
    message: dict
    tokens: int


def _tool_result_content(message: dict) -> bool:
    content = message.get("content")
    return isinstance(content, str) and content.lstrip().startswith("<tool_result")


class StoreError(Exception):
    """The state database cannot be used; the message names the path and what to do."""


class Store:
    def __init__(self, path: Path | str):
        self.path = str(path)
        try:
            self._open()
        except (OSError, sqlite3.Error) as e:
            raise StoreError(_unusable(self.path, e)) from None

    def _open(self) -> None:
        on_disk = self.path not in (":memory:", "") and not self.path.startswith("file:")
        if on_disk:
            # SPEC §9.4: the state dir 0700, the database 0600.  SQLite gives the -wal,
            # -shm and -journal files the mode of the database file, so creating (or
            # fixing) the database as 0600 before connecting keeps them private too.
            private_dir(Path(self.path).parent)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
            try:
                os.fchmod(fd, 0o600)
            finally:
                os.close(fd)
        self.db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        self.db.execute("PRAGMA journal_mode=WAL")
        if on_disk:
            # side files left by an older run (possibly created under a looser mode)
            for suffix in ("-wal", "-shm", "-journal"):
                with contextlib.suppress(FileNotFoundError):
                    private_file(self.path + suffix)
        self.db.execute("PRAGMA synchronous=NORMAL")
        self.db.execute("PRAGMA busy_timeout=5000")
        self.db.executescript(SCHEMA)
        self.db.executescript(USAGE_SCHEMA)
        cols = {r[1] for r in self.db.execute("PRAGMA table_info(messages)")}
        # databases from before compaction: the token count (cached once per message) and
        # the summary that replaced a message
        if "tokens" not in cols:
            self.db.execute("ALTER TABLE messages ADD COLUMN tokens INTEGER")
        if "summary_id" not in cols:
            self.db.execute("ALTER TABLE messages ADD COLUMN summary_id INTEGER")
        # how a message's tokens are counted; the agent installs litellm's counter
        self.token_counter: Callable[[dict], int] = estimate_tokens
        self._migrate_delivering()

    def close(self) -> None:
        self.db.close()

    # -------------------------------------------------------------------------- inbound
    def add_inbound(
        self,
        channel: str,
        account: str,
        chat_id: str,
        message_id: str,
        session_key: str,
        payload: dict,
    ) -> int | None:
        """Persist an inbound message; None when the same platform message was stored before."""
        cur = self.db.execute(
            "INSERT OR IGNORE INTO inbound(channel, account, chat_id, message_id, session_key, payload, created)"
            " VALUES (?,?,?,?,?,?,?)",
            (channel, account, chat_id, message_id, session_key, json.dumps(payload), time.time()),
        )
        return cur.lastrowid if cur.rowcount else None

    def set_inbound_status(self, inbound_id: int, status: str) -> None:
        self.db.execute(
            "UPDATE inbound SET status=?, outbound=NULL WHERE id=?", (status, inbound_id)
        )

    def unfinished_inbound(self) -> list[InboundRow]:
        rows = self.db.execute(
            "SELECT id, session_key, payload, status, outbound FROM inbound"
            " WHERE status='pending' ORDER BY id"
        ).fetchall()
        return [
            InboundRow(r[0], r[1], json.loads(r[2]), r[3], json.loads(r[4]) if r[4] else None)
            for r in rows
        ]

    def inbound_with_status(
        self, status: str, *, channel: str | None = None, session_key: str | None = None
    ) -> list[InboundRow]:
        q = "SELECT id, session_key, payload, status, outbound FROM inbound WHERE status=?"
        args: list = [status]
        if channel is not None:
            q += " AND channel=?"
            args.append(channel)
        if session_key is not None:
            q += " AND session_key=?"
            args.append(session_key)
        rows = self.db.execute(q + " ORDER BY id", args).fetchall()
        return [
            InboundRow(r[0], r[1], json.loads(r[2]), r[3], json.loads(r[4]) if r[4] else None)
            for r in rows
        ]

    def hold_for_pairing(self, inbound_id: int, session_key: str) -> None:
        """Keep this message of an unknown sender for after their pairing is approved, and
        forget their older held ones (only the newest is answered)."""
        with self._tx():
            self.db.execute("UPDATE inbound SET status='pairing' WHERE id=?", (inbound_id,))
            self.db.execute(
                "DELETE FROM inbound WHERE session_key=? AND status='pairing' AND id<?",
                (session_key, inbound_id),
            )

    def requeue_inbound(self, inbound_id: int, session_key: str) -> None:
        """Make a held message pending again (e.g. after its sender's pairing was approved)."""
        self.db.execute(
            "UPDATE inbound SET status='pending', session_key=?, outbound=NULL WHERE id=?",
            (session_key, inbound_id),
        )

    # ------------------------------------------------------------------------- sessions
    def _ensure_session(self, key: str) -> None:
        now = time.time()
        self.db.execute(
            "INSERT OR IGNORE INTO sessions(key, created, updated) VALUES (?,?,?)", (key, now, now)
        )

    def session(self, key: str) -> dict:
        self._ensure_session(key)
        r = self.db.execute(
            "SELECT epoch, activation, intro_done, usage_in, usage_out, created, updated FROM sessions WHERE key=?",
            (key,),
        ).fetchone()
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

    # ------------------------------------------------------------------------- messages
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

    def message_count(self, key: str) -> int:
        epoch = self.session(key)["epoch"]
        return self.db.execute(
            "SELECT COUNT(*) FROM messages WHERE session_key=? AND epoch=?", (key, epoch)
        ).fetchone()[0]

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
    ) -> list[int]:
        """Store a whole turn atomically; with ``inbound_id`` the inbound row becomes
        'done' and the reply (``outbound``: OutboundMessage dicts) is queued in the outbox
        in the same transaction.  Returns the new outbox row ids."""
        now = time.time()
        epoch = self.session(key)["epoch"]
        rows = [
            (key, epoch, turn, kind, m.get("role", ""), s, len(s), self._count(m), now)
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
            if inbound_id is not None:
                if outbound:
                    channel = self.db.execute(
                        "SELECT channel FROM inbound WHERE id=?", (inbound_id,)
                    ).fetchone()
                    if channel is not None:
                        out_ids = self._insert_outbox(
                            channel[0], outbound, outbox_kind, inbound_id, now
                        )
                self.db.execute(
                    "UPDATE inbound SET status='done', outbound=NULL WHERE id=?", (inbound_id,)
                )
        return out_ids

    # --------------------------------------------------------------------------- outbox
    def _insert_outbox(
        self, channel: str, outs: list[dict], kind: str, inbound_id: int | None, now: float
    ) -> list[int]:
        ids = []
        for o in outs:
            cur = self.db.execute(
                "INSERT INTO outbox(channel, account, chat_id, kind, payload, nonce, inbound_id,"
                " created, updated) VALUES (?,?,?,?,?,?,?,?,?)",
                (
                    channel,
                    str(o.get("account") or "default"),
                    str(o.get("chat_id", "")),
                    kind,
                    json.dumps(o, ensure_ascii=False),
                    _new_nonce(),
                    inbound_id,
                    now,
                    now,
                ),
            )
            ids.append(int(cur.lastrowid or 0))
        return ids

    def add_outbox(
        self, channel: str, outs: list[dict], *, kind: str, inbound_id: int | None = None
    ) -> list[int]:
        """Queue outbound messages (OutboundMessage dicts) for ``channel``; their ids."""
        with self._tx():
            return self._insert_outbox(channel, outs, kind, inbound_id, time.time())

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
        """Forget sent and failed rows last touched before ``older_than`` (unix time)."""
        return self.db.execute(
            "DELETE FROM outbox WHERE state IN ('sent','failed') AND updated<?", (older_than,)
        ).rowcount

    def outbox_counts(self) -> dict[str, int]:
        return {
            r[0]: r[1] for r in self.db.execute("SELECT state, COUNT(*) FROM outbox GROUP BY state")
        }

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

    def _count(self, message: dict) -> int:
        try:
            return int(self.token_counter(message))
        except Exception:
            return estimate_tokens(message)

    # ------------------------------------------------------------------- compaction
    def summary(self, key: str) -> dict | None:
        """The session's current summary (of its current epoch), or None."""
        epoch = self.session(key)["epoch"]
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

    def window(self, key: str, *, limit: int) -> list[WindowRow]:
        """The messages in the model's view: those after the current summary, newest
        ``limit`` of them, oldest first, never starting with a tool result.  The query
        reads only rows after the summary, so its cost does not grow with the session."""
        epoch = self.session(key)["epoch"]
        s = self.summary(key)
        after = s["upto_id"] if s else 0
        rows = self.db.execute(
            "SELECT id, role, data, tokens FROM messages WHERE session_key=? AND epoch=? AND id>?"
            " ORDER BY id DESC LIMIT ?",
            (key, epoch, after, limit),
        ).fetchall()
        out: list[WindowRow] = []
        missing: list[tuple[int, int]] = []
        for mid, role, data, stored_tokens in reversed(rows):
            msg = json.loads(data)
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

    def _tx(self):
        db = self.db

        class _Tx:
            def __enter__(self):
                db.execute("BEGIN IMMEDIATE")

            def __exit__(self, exc_type, exc, tb):
                if not exc_type:
                    db.execute("COMMIT")
                elif db.in_transaction:  # SQLite may have rolled back already (SQLITE_FULL)
                    with contextlib.suppress(sqlite3.Error):
                        db.execute("ROLLBACK")
                return False

        return _Tx()

    # -------------------------------------------------------------------- group history
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

    # -------------------------------------------------------------------------- pairing
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

    # ------------------------------------------------------------------------------- kv
    def get(self, key: str, default: Any = None) -> Any:
        row = self.db.execute("SELECT value FROM kv WHERE key=?", (key,)).fetchone()
        return json.loads(row[0]) if row else default

    def put(self, key: str, value: Any) -> None:
        self.db.execute(
            "INSERT OR REPLACE INTO kv(key, value) VALUES (?,?)", (key, json.dumps(value))
        )

    # ---------------------------------------------------------------------------- cron
    def cron_jobs(self) -> list[dict]:
        return [
            dict(zip(("name", "schedule", "prompt", "target", "to"), r, strict=True))
            for r in self.db.execute(
                "SELECT name, schedule, prompt, target, to_ FROM cron_jobs ORDER BY name"
            )
        ]

    def add_cron_job(self, name: str, schedule: str, prompt: str, target: str, to: str) -> None:
        self.db.execute(
            "INSERT OR REPLACE INTO cron_jobs(name, schedule, prompt, target, to_, created) VALUES (?,?,?,?,?,?)",
            (name, schedule, prompt, target, to, time.time()),
        )

    def remove_cron_job(self, name: str) -> bool:
        return self.db.execute("DELETE FROM cron_jobs WHERE name=?", (name,)).rowcount > 0

    # --------------------------------------------------------------------------- usage
    def add_usage(
        self,
        session_key: str,
        turn: str,
        model: str,
        *,
        prompt_tokens: int = 0,
        completion_tokens: int = 0,
        cached_tokens: int = 0,
        cost_usd: float = 0.0,
        kind: str = "chat",
        trust: str = "owner",
        created: float | None = None,
    ) -> None:
        """Record one model call (SPEC §12)."""
        self.db.execute(
            "INSERT INTO usage(session_key, turn, kind, trust, model, prompt_tokens,"
            " completion_tokens, cached_tokens, cost_usd, created) VALUES (?,?,?,?,?,?,?,?,?,?)",
            (
                session_key,
                turn,
                kind,
                trust,
                model,
                int(prompt_tokens),
                int(completion_tokens),
                int(cached_tokens),
                float(cost_usd),
                time.time() if created is None else created,
            ),
        )

    def usage_totals(
        self, since: float, *, session_key: str | None = None, trust: str | None = None
    ) -> dict[str, Any]:
        """Calls, tokens and cost since ``since`` (epoch seconds), optionally of one
        session or one trust level."""
        q = _USAGE_TOTALS
        args: list[Any] = [since]
        if session_key is not None:
            q += " AND session_key=?"
            args.append(session_key)
        if trust is not None:
            q += " AND trust=?"
            args.append(trust)
        r = self.db.execute(q, args).fetchone()
        return {
            "calls": r[0],
            "prompt_tokens": r[1],
            "completion_tokens": r[2],
            "cached_tokens": r[3],
            "cost_usd": r[4],
        }

    def usage_rows(self, since: float) -> list[dict[str, Any]]:
        """Every model call since ``since``, oldest first."""
        cols = (
            "session_key",
            "turn",
            "kind",
            "trust",
            "model",
            "prompt_tokens",
            "completion_tokens",
            "cached_tokens",
            "cost_usd",
            "created",
        )
        rows = self.db.execute(
            f"SELECT {', '.join(cols)} FROM usage WHERE created>=? ORDER BY id", (since,)
        )
        return [dict(zip(cols, r, strict=True)) for r in rows]
