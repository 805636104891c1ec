"""The state database's schema version: which one this code writes, which one a database
file holds, and the refusal to write a database newer than the code.

The version lives in SQLite's own header field (``PRAGMA user_version``); 0 is a database
from before versions were recorded.  Whenever the version is raised, the kv row
``schema.written_by`` records which Chela did it, so an older Chela can name the one to
install.  The backup taken before a migration is :func:`bot.store.backup.before_migration`.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

# Raise this, and add the migration, whenever the schema changes in a way an older Chela
# could not read or write correctly.  Versions: 1 the first recorded; 2 the ``agent`` column
# of the outbox and usage tables (several agents); 3 the memory index tables (memory_files,
# memory_chunks, memory_fts, memory_vectors, memory_state: bot/store/memory_index.py); 4 the
# triggers' tables (trigger_events, trigger_deliveries, mail_cursor: bot/store/triggers.py).
SCHEMA_VERSION = 4
WRITTEN_BY = "schema.written_by"


class NewerSchema(Exception):
    """The database was written by a newer Chela: it is not opened for writing."""

    def __init__(self, path: str, found: int, written_by: str = "", restore: str = ""):
        self.path = path
        self.found = found
        self.written_by = written_by
        self.restore = restore
        if restore:
            fix = f"restore the backup taken before that upgrade: chela restore {restore}"
        else:
            fix = "no backup from before that upgrade was found; restore an older backup"
        install = f"install Chela {written_by} or newer" if written_by else "install a newer Chela"
        super().__init__(
            f"the state database {path} has schema version {found}, newer than this Chela "
            f"knows (version {SCHEMA_VERSION}); it was not opened. {install}, or {fix}"
        )


def version_of(conn: sqlite3.Connection) -> int:
    return int(conn.execute("PRAGMA user_version").fetchone()[0])


def has_tables(conn: sqlite3.Connection) -> bool:
    row = conn.execute("SELECT COUNT(*) FROM sqlite_master WHERE type='table'").fetchone()
    return bool(row[0])


def written_by(conn: sqlite3.Connection) -> str:
    """The Chela version that last raised the schema version ("" when unknown)."""
    try:
        row = conn.execute("SELECT value FROM kv WHERE key=?", (WRITTEN_BY,)).fetchone()
    except sqlite3.Error:
        return ""
    if row is None:
        return ""
    try:
        value = json.loads(row[0])
    except ValueError:
        return ""
    return value if isinstance(value, str) else ""


def read(path: Path) -> tuple[int, bool, str] | None:
    """(version, has tables, written by) of the database file at ``path``, read without
    writing anything; None when there is no file."""
    if not Path(path).is_file():
        return None
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return version_of(conn), has_tables(conn), written_by(conn)
    finally:
        conn.close()


def refuse_newer(conn: sqlite3.Connection, path: str) -> None:
    """Raise :class:`NewerSchema` before anything is written to a newer database."""
    found = version_of(conn)
    if found > SCHEMA_VERSION:
        raise NewerSchema(path, found, written_by(conn))


def stamp(conn: sqlite3.Connection, chela_version: str) -> None:
    """Record that the database now has this code's schema (after its migrations ran)."""
    if version_of(conn) >= SCHEMA_VERSION:
        return
    conn.execute(
        "INSERT OR REPLACE INTO kv(key, value) VALUES (?,?)",
        (WRITTEN_BY, json.dumps(chela_version)),
    )
    conn.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
