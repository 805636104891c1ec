"""SPEC §9.4: what Chela writes is private (dirs 0700, files 0600) whatever the umask."""

from __future__ import annotations

import os
import stat
import time
from pathlib import Path

import pytest

from bot.fs import private_dir, private_file, prune_older_than, write_private
from bot.prompt.init import STATE_DIR, STATE_FILE, init_workspace
from bot.store import Store

DAY = 86400.0


@pytest.fixture(autouse=True)
def umask022():
    old = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(old)


def mode(p: Path) -> int:
    return stat.S_IMODE(os.lstat(p).st_mode)


# ------------------------------------------------------------------ store


def test_store_files_private(tmp_path):
    db = tmp_path / "state" / "chela.sqlite3"
    s = Store(db)
    try:
        s.add_inbound("telegram", "default", "1", "m1", "agent:main:main", {"text": "hi"})
        assert mode(tmp_path / "state") == 0o700
        for name in ("chela.sqlite3", "chela.sqlite3-wal", "chela.sqlite3-shm"):
            assert (tmp_path / "state" / name).exists(), name
            assert mode(tmp_path / "state" / name) == 0o600, name
    finally:
        s.close()


def test_store_tightens_existing_database(tmp_path):
    state = tmp_path / "state"
    state.mkdir(mode=0o755)
    s = Store(state / "db.sqlite3")
    s.close()
    os.chmod(state / "db.sqlite3", 0o644)
    os.chmod(state, 0o755)
    s = Store(state / "db.sqlite3")
    try:
        s.add_inbound("telegram", "default", "1", "m2", "agent:main:main", {"text": "again"})
        assert mode(state) == 0o700
        assert mode(state / "db.sqlite3") == 0o600
        assert mode(state / "db.sqlite3-wal") == 0o600
        assert mode(state / "db.sqlite3-shm") == 0o600
        # twin: the data is still there and usable
        assert [r.payload for r in s.unfinished_inbound()] == [{"text": "again"}]
    finally:
        s.close()


def test_store_in_memory_untouched(tmp_path):
    s = Store(":memory:")
    s.add_inbound("telegram", "default", "1", "m1", "k", {})
    s.close()


# ------------------------------------------------------------------ init_workspace


def test_init_workspace_private(tmp_path):
    ws = tmp_path / "home" / "ws"
    created = init_workspace(ws)
    assert created
    assert mode(tmp_path / "home") == 0o700  # created for it
    assert mode(ws) == 0o700
    for p in created:
        assert mode(p) == 0o600, p
    assert mode(ws / STATE_DIR) == 0o700
    assert mode(ws / STATE_DIR / STATE_FILE) == 0o600


def test_init_workspace_keeps_existing_files(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir(mode=0o755)
    (ws / "SOUL.md").write_text("mine")
    os.chmod(ws / "SOUL.md", 0o644)
    created = init_workspace(ws)
    assert ws / "SOUL.md" not in created
    assert (ws / "SOUL.md").read_text() == "mine" and mode(ws / "SOUL.md") == 0o644
    assert mode(ws) == 0o700
    assert all(mode(p) == 0o600 for p in created)


def test_init_workspace_does_not_write_through_planted_link(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    outside = tmp_path / "outside.md"
    outside.write_text("keep")
    os.symlink(outside, ws / "AGENTS.md")
    created = init_workspace(ws)
    assert ws / "AGENTS.md" not in created
    assert outside.read_text() == "keep"


# ------------------------------------------------------------------ helpers


def test_private_dir_modes(tmp_path):
    existing = tmp_path / "existing"
    existing.mkdir(mode=0o755)
    os.chmod(existing, 0o755)
    d = private_dir(existing / "a" / "b")
    assert d == existing / "a" / "b"
    assert mode(existing / "a") == 0o700 and mode(existing / "a" / "b") == 0o700
    assert mode(existing) == 0o755  # an existing parent keeps its mode
    # the given dir itself is tightened even when it already exists; idempotent
    os.chmod(d, 0o755)
    assert private_dir(d) == d and mode(d) == 0o700
    (tmp_path / "file").write_text("x")
    with pytest.raises(OSError):
        private_dir(tmp_path / "file")


def test_write_private_modes_and_replace(tmp_path):
    target = tmp_path / "new" / "token"
    write_private(target, b"secret-1")
    assert target.read_bytes() == b"secret-1"
    assert mode(target) == 0o600 and mode(tmp_path / "new") == 0o700
    os.chmod(target, 0o644)
    write_private(target, b"secret-2")
    assert target.read_bytes() == b"secret-2" and mode(target) == 0o600
    assert sorted(os.listdir(tmp_path / "new")) == ["token"]  # no temp left


def test_write_private_replaces_symlink_not_target(tmp_path):
    outside = tmp_path / "outside"
    outside.write_text("keep")
    d = tmp_path / "d"
    d.mkdir()
    os.symlink(outside, d / "token")
    write_private(d / "token", b"fresh")
    assert outside.read_text() == "keep"
    assert not (d / "token").is_symlink() and (d / "token").read_bytes() == b"fresh"
    assert mode(d / "token") == 0o600


def test_private_file(tmp_path):
    f = tmp_path / "f"
    f.write_text("x")
    os.chmod(f, 0o644)
    private_file(f)
    assert mode(f) == 0o600
    target = tmp_path / "target"
    target.write_text("x")
    os.chmod(target, 0o644)
    os.symlink(target, tmp_path / "link")
    with pytest.raises(OSError):
        private_file(tmp_path / "link")
    assert mode(target) == 0o644


# ------------------------------------------------------------------ prune


def _age(p: Path, days: float, now: float) -> None:
    t = now - days * DAY
    os.utime(p, (t, t), follow_symlinks=False)


def test_prune_older_than(tmp_path):
    now = time.time()
    media = tmp_path / "media"
    (media / "old_only").mkdir(parents=True)
    (media / "mixed").mkdir()
    (media / "empty_already").mkdir()
    files = {
        "old.jpg": 40,
        "new.jpg": 1,
        "old_only/a.ogg": 31,
        "old_only/b.ogg": 90,
        "mixed/old.pdf": 45,
        "mixed/new.pdf": 2,
    }
    for rel, age in files.items():
        (media / rel).write_bytes(b"x")
        _age(media / rel, age, now)

    assert prune_older_than(media, 30, now=now) == 4
    assert (media / "new.jpg").exists() and (media / "mixed" / "new.pdf").exists()
    assert not (media / "old.jpg").exists() and not (media / "mixed" / "old.pdf").exists()
    assert not (media / "old_only").exists()  # emptied by the prune, removed
    assert (media / "empty_already").is_dir()  # nothing pruned there, left alone
    assert media.is_dir()
    assert prune_older_than(media, 30, now=now) == 0
    assert prune_older_than(tmp_path / "missing", 30) == 0


def test_prune_does_not_follow_symlinks(tmp_path):
    now = time.time()
    media = tmp_path / "media"
    media.mkdir()
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "precious.txt").write_text("keep")
    _age(outside / "precious.txt", 400, now)
    (outside / "precious2.txt").write_text("keep")
    _age(outside / "precious2.txt", 400, now)
    os.symlink(outside, media / "dirlink")
    os.symlink(outside / "precious2.txt", media / "filelink")
    _age(media / "filelink", 400, now)
    (media / "old.bin").write_bytes(b"x")
    _age(media / "old.bin", 400, now)

    assert prune_older_than(media, 7, now=now) == 1
    assert not (media / "old.bin").exists()  # twin: the real old file goes
    assert (outside / "precious.txt").read_text() == "keep"
    assert (outside / "precious2.txt").read_text() == "keep"
    assert (media / "dirlink").is_symlink() and (media / "filelink").is_symlink()
