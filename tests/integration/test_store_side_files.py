"""Another process using the database next to a running daemon (``chela status``, a test's
reader) must never bring the daemon down.

SQLite holds its WAL index (``-shm``) with POSIX record locks, and closing ANY descriptor of
a file drops every such lock the process holds on it.  The store used to open and close
``-wal``/``-shm`` (to make them 0600) right after connecting: when they already existed (another
process had the database open), the daemon silently lost its lock on ``-shm``.  The next
process to open the database then believed it was the first user and reset the index under
the daemon's mapping: the daemon died of SIGBUS (exit -7) — the "heartbeat hang" of the
kill -9 tests, where the test polls the database while the daemon starts."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from bot.store import Store

ROOT = Path(__file__).resolve().parents[2]
HOLD = "import sqlite3, sys; c = sqlite3.connect(sys.argv[1]); c.execute('SELECT 1 FROM kv').fetchall(); print('open', flush=True); sys.stdin.readline()"


def _locks_held(path: str) -> int:
    """POSIX locks this process holds on ``path`` (Linux /proc/locks)."""
    ino = os.stat(path).st_ino
    with open("/proc/locks") as f:
        return sum(1 for line in f if f":{ino} " in line and f" {os.getpid()} " in line)


def test_the_store_keeps_its_lock_on_the_wal_index_when_another_process_has_it_open(tmp_path):
    db = str(tmp_path / "chela.sqlite3")
    Store(db).close()  # the schema exists
    reader = subprocess.Popen(  # another process has the database open: -wal and -shm exist
        [sys.executable, "-c", HOLD, db], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert reader.stdout is not None and reader.stdout.readline().strip() == "open"
        store = Store(db)
        store.put("k", {"n": 1})
        held = _locks_held(db + "-shm")  # before the fix: 0 (dropped by the chmod's close)
        store.close()
    finally:
        reader.communicate("\n", timeout=10)
    assert held >= 1


def test_the_side_files_are_still_private(tmp_path):
    """The twin: the -wal and -shm files keep mode 0600 (SPEC §9.4), also when an older run
    left them looser."""
    db = tmp_path / "chela.sqlite3"
    Store(db).close()
    for suffix in ("-wal", "-shm"):
        side = Path(str(db) + suffix)
        side.touch()
        side.chmod(0o644)
    store = Store(db)
    store.put("k", {"n": 1})
    modes = {s: Path(str(db) + s).stat().st_mode & 0o777 for s in ("", "-wal", "-shm")}
    store.close()
    assert modes == {"": 0o600, "-wal": 0o600, "-shm": 0o600}
