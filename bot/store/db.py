"""The database itself: the schema, opening (private files, pragmas, column migrations),
the one transaction helper and the full-disk test.

Data migrations that move rows between tables live with their table group and are run
by the Store facade (bot/store/__init__.py) right after the schema is in place.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import sqlite3
from collections.abc import Callable
from pathlib import Path

from bot.fs import private_dir, private_file
from bot.store.schema_version import NewerSchema, refuse_newer
from bot.store.disk import DiskAlarm, Publish, disk_full
from bot.store.memory_index import MEMORY_SCHEMA

log = logging.getLogger("chela.store")

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
    agent       TEXT NOT NULL DEFAULT '',          -- the agent its binding chose at intake
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

-- compaction: a summary replaces a session's messages up to upto_id; those
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
    updated     REAL NOT NULL,
    agent       TEXT NOT NULL DEFAULT ''           -- the agent whose turn wrote it ('' unknown)
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

-- the Control UI: login codes and browser sessions, only as SHA-256 hashes
CREATE TABLE IF NOT EXISTS ui_login_codes (
    hash     TEXT PRIMARY KEY,
    created  REAL NOT NULL,
    expires  REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS ui_sessions (
    id          TEXT PRIMARY KEY,                  -- public id (System page, DELETE route)
    cookie_hash TEXT NOT NULL UNIQUE,
    csrf_hash   TEXT NOT NULL,
    created     REAL NOT NULL,
    last_seen   REAL NOT NULL,
    user_agent  TEXT NOT NULL DEFAULT ''
);

-- schedules: tool jobs, each job's kept state, and the ledger of occurrences
CREATE TABLE IF NOT EXISTS schedule_jobs (
    name     TEXT PRIMARY KEY,
    kind     TEXT NOT NULL,                        -- at | every | schedule
    spec     TEXT NOT NULL,
    prompt   TEXT NOT NULL,
    target   TEXT NOT NULL DEFAULT 'last',
    to_      TEXT NOT NULL DEFAULT '',
    catch_up REAL NOT NULL DEFAULT 3600,
    anchor   REAL NOT NULL DEFAULT 0,
    route    TEXT NOT NULL DEFAULT '{}',           -- the chat a tool job was created from
    created  REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS schedule_state (
    name   TEXT PRIMARY KEY,
    paused INTEGER NOT NULL DEFAULT 0,
    anchor REAL NOT NULL DEFAULT 0,
    spec   TEXT NOT NULL DEFAULT '',
    ended  REAL
);
CREATE TABLE IF NOT EXISTS schedule_ledger (
    id       INTEGER PRIMARY KEY AUTOINCREMENT,
    job      TEXT NOT NULL,
    due      REAL NOT NULL,
    status   TEXT NOT NULL,                        -- running | ran | skipped | missed
    reason   TEXT NOT NULL DEFAULT '',
    detail   TEXT NOT NULL DEFAULT '',             -- a run's delivery result
    manual   INTEGER NOT NULL DEFAULT 0,
    catch_up INTEGER NOT NULL DEFAULT 0,
    run_id   TEXT NOT NULL DEFAULT '',
    started  REAL,
    ended    REAL
);
CREATE UNIQUE INDEX IF NOT EXISTS schedule_ledger_once ON schedule_ledger(job, due) WHERE manual = 0;
CREATE INDEX IF NOT EXISTS schedule_ledger_job ON schedule_ledger(job, id);
"""


# one row per model call (tokens and cost), for /usage, `chela usage` and the
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
    created           REAL NOT NULL,
    agent             TEXT NOT NULL DEFAULT ''        -- the agent the call was made for
);
CREATE INDEX IF NOT EXISTS usage_created ON usage(created);
CREATE INDEX IF NOT EXISTS usage_session ON usage(session_key, created);
"""


# the id in ``agent:<id>:...``, for rows from before the agent column (once, migrating)
_AGENT_FROM_KEY = (
    "UPDATE {table} SET agent = substr(session_key, 7, instr(substr(session_key, 7), ':') - 1)"
    " WHERE session_key LIKE 'agent:%:%'"
)


def storage_full(e: BaseException) -> bool:
    """A write failed for lack of space (:func:`bot.store.disk.disk_full`: a full disk, or the
    database's page limit) or because the file system refused it: worth retrying once space
    is back."""
    if disk_full(e):
        return True
    if not isinstance(e, sqlite3.OperationalError):
        return False
    code = getattr(e, "sqlite_errorcode", None)
    if code is not None:
        return code & 0xFF == sqlite3.SQLITE_IOERR
    return "disk i/o error" in str(e).lower()


WAL_CHECKPOINT_PAGES = 4000

_WRITES = ("INSERT", "UPDATE", "DELETE", "REPLACE", "COMMIT")


def _is_write(sql: str) -> bool:
    return sql.lstrip()[:7].upper().startswith(_WRITES)


_execute = sqlite3.Connection.execute
_executemany = sqlite3.Connection.executemany


class _Connection(sqlite3.Connection):
    """A connection that tells its :class:`DiskAlarm` when a write fails for lack of space
    and when a write is durable again (autocommit, or a COMMIT).  The two methods call the
    base class directly (no closure, no ``super()``): they run for every statement."""

    alarm: DiskAlarm | None = None

    def _failed(self, e: sqlite3.OperationalError) -> None:
        if self.alarm is not None and storage_full(e):
            self.alarm.failed(e)

    def _durable(self, sql: str) -> None:
        alarm = self.alarm
        if alarm is not None and alarm.full and not self.in_transaction and _is_write(sql):
            alarm.ok()

    def execute(self, sql: str, parameters=(), /) -> sqlite3.Cursor:
        try:
            cur = _execute(self, sql, parameters)
        except sqlite3.OperationalError as e:
            self._failed(e)
            raise
        if self.alarm is not None and self.alarm.full:
            self._durable(sql)
        return cur

    def executemany(self, sql: str, parameters, /) -> sqlite3.Cursor:
        try:
            cur = _executemany(self, sql, parameters)
        except sqlite3.OperationalError as e:
            self._failed(e)
            raise
        if self.alarm is not None and self.alarm.full:
            self._durable(sql)
        return cur


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


def estimate_tokens(message: dict) -> int:
    """A rough count (4 characters a token) for when no tokenizer is at hand."""
    return len(json.dumps(message, ensure_ascii=False)) // 4 + 4


class StoreError(Exception):
    """The state database cannot be used; the message names the path and what to do."""


class Database:
    """The connection and what every table group shares: ``db``, ``_tx`` and ``_count``.
    Every method reads ``self.db`` when it runs (a test may swap the connection)."""

    db: sqlite3.Connection

    def __init__(
        self,
        path: Path | str,
        token_counter: Callable[[dict], int] = estimate_tokens,
        *,
        publish: Publish | None = None,
    ):
        self.path = str(path)
        self.publish = publish  # the owner's notices (storage.full / storage.ok)
        # how a message's tokens are counted (cached per message): the app passes the
        # model's tokenizer (``bot.agent.compaction.message_counter``), else the estimate
        self.token_counter = token_counter
        try:
            self._open()
        except (OSError, sqlite3.Error) as e:
            raise StoreError(_unusable(self.path, e)) from None
        except NewerSchema as e:  # never opened for writing (bot/store/schema_version.py)
            self.db.close()
            raise StoreError(str(e)) from None

    def _open(self) -> None:
        on_disk = self.path not in (":memory:", "") and not self.path.startswith("file:")
        if on_disk:
            # the state dir 0700, the database 0600.  SQLite gives the -wal,
            # -shm and -journal files the mode of the database file, so creating (or
            # fixing) the database as 0600 before connecting keeps them private too.
            private_dir(Path(self.path).parent)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
            try:
                os.fchmod(fd, 0o600)
            finally:
                os.close(fd)
            # side files left by an older run (possibly created under a looser mode), made
            # private BEFORE connecting: closing any descriptor of a file drops every POSIX
            # lock this process holds on it, and SQLite's lock on -shm is what tells the
            # next process the WAL index is in use (without it that process resets the
            # index under our mapping and this one dies of SIGBUS)
            for suffix in ("-wal", "-shm", "-journal"):
                with contextlib.suppress(FileNotFoundError):
                    private_file(self.path + suffix)
        self.db = sqlite3.connect(
            self.path, isolation_level=None, check_same_thread=False, factory=_Connection
        )
        refuse_newer(self.db, self.path)  # before the first write
        where = str(Path(self.path).parent) if on_disk else self.path
        self.disk = DiskAlarm(where, self.publish)  # the one disk-full alarm
        self.db.alarm = self.disk
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=NORMAL")
        # a checkpoint (copying the WAL into the database, with an fsync) every 4,000 pages
        # instead of SQLite's 1,000: the same few pages change at every message, so a
        # rarer checkpoint copies far fewer of them (durability is the WAL's, unchanged)
        self.db.execute(f"PRAGMA wal_autocheckpoint={WAL_CHECKPOINT_PAGES}")
        self.db.execute("PRAGMA busy_timeout=5000")
        self.db.executescript(SCHEMA)
        self.db.executescript(USAGE_SCHEMA)
        self.db.executescript(MEMORY_SCHEMA)  # the memory index (schema version 3)
        cols = {r[1] for r in self.db.execute("PRAGMA table_info(messages)")}
        # databases from before compaction: the token count (cached once per message) and
        # the summary that replaced a message
        if "tokens" not in cols:
            self.db.execute("ALTER TABLE messages ADD COLUMN tokens INTEGER")
        if "summary_id" not in cols:
            self.db.execute("ALTER TABLE messages ADD COLUMN summary_id INTEGER")
        self._add_agent_columns()

    def _add_agent_columns(self) -> None:
        """Schema version 2 (several agents): the agent of each inbound, outbox and usage
        row.  Inbound and usage rows written before it get the agent named in their session
        key (every key was ``agent:<id>:...``); older outbox rows keep '' (unknown)."""
        for table in ("inbound", "outbox", "usage"):
            cols = {r[1] for r in self.db.execute(f"PRAGMA table_info({table})")}
            if "agent" not in cols:
                self.db.execute(f"ALTER TABLE {table} ADD COLUMN agent TEXT NOT NULL DEFAULT ''")
                if table != "outbox":
                    self.db.execute(_AGENT_FROM_KEY.format(table=table))
        self.db.execute("CREATE INDEX IF NOT EXISTS usage_agent ON usage(agent, created)")

    def close(self) -> None:
        self.db.close()

    def _count(self, message: dict) -> int:
        try:
            return int(self.token_counter(message))
        except Exception:
            return estimate_tokens(message)

    def _tx(self) -> _Tx:
        return _Tx(self.db)


class _Tx:
    """``with store._tx():`` one IMMEDIATE transaction, committed when the block ends
    normally and rolled back when it raises (a plain class: one per transaction, cheap)."""

    __slots__ = ("db",)

    def __init__(self, db: sqlite3.Connection) -> None:
        self.db = db

    def __enter__(self) -> None:
        self.db.execute("BEGIN IMMEDIATE")

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        db = self.db
        if not exc_type:
            db.execute("COMMIT")
        elif db.in_transaction:  # SQLite may have rolled back already (SQLITE_FULL)
            with contextlib.suppress(sqlite3.Error):
                db.execute("ROLLBACK")
