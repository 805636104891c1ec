"""Restoring an archive, and the schema versions: a newer database is never written, an older
one is backed up before it is migrated."""

from __future__ import annotations

import hashlib
import logging
import sqlite3
from pathlib import Path

import pytest

from bot.store import Store, StoreError, schema_version
from bot.store.backup import archives, backups_dir, before_migration, take
from bot.store.restore import ArchiveError, Targets, restore
from tests.unit.store.test_backup import home

NOW = 1_800_000_000.0


def tree(root: Path) -> dict[str, str]:
    """Every file under ``root`` with a hash of its bytes."""
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def targets(cfg, *, elsewhere: Path | None = None) -> Targets:
    if elsewhere is None:
        return Targets(cfg.agent.state_dir, {"main": cfg.agent.workspace}, cfg.source, False)
    return Targets(elsewhere / "state", {"main": elsewhere / "ws"}, cfg.source, True)


def kv(db: Path, key: str):
    conn = sqlite3.connect(db)
    try:
        row = conn.execute("SELECT value FROM kv WHERE key=?", (key,)).fetchone()
        return row[0] if row else None
    finally:
        conn.close()


def test_restore_in_place_puts_back_and_keeps_what_it_replaced(tmp_path):
    cfg = home(tmp_path)
    archive = take(cfg, out=tmp_path / "b.tar.gz").path
    (cfg.agent.workspace / "SOUL.md").write_text("changed since")
    store = Store(cfg.db_path)
    store.put("note", "changed since")
    store.close()
    cfg.source.write_text("# edited\n")

    unpacked, done = restore(archive, targets(cfg), NOW)

    assert (cfg.agent.workspace / "SOUL.md").read_text() == "soul"
    assert kv(cfg.db_path, "note") == '"kept"'
    assert cfg.source.read_text().startswith("[agent]")
    stamp = "20270115T080000Z"
    assert (tmp_path / f"ws.before-restore-{stamp}" / "SOUL.md").read_text() == "changed since"
    kept_db = cfg.agent.state_dir / f"chela.sqlite3.before-restore-{stamp}"
    assert kv(kept_db, "note") == '"changed since"'
    assert (tmp_path / f"config.toml.before-restore-{stamp}").read_text() == "# edited\n"
    assert unpacked.schema == schema_version.SCHEMA_VERSION
    # left alone: what the archive does not hold
    assert (cfg.agent.state_dir / "logs" / "chela.log").read_text() == "log line"
    assert (cfg.agent.state_dir / "http-token").read_text() == "the-http-token"
    assert not list(cfg.agent.state_dir.glob(".chela-restore-*"))
    assert kept_db in done.kept


def test_restore_elsewhere_never_writes_over_the_config_in_use(tmp_path):
    cfg = home(tmp_path)
    archive = take(cfg, out=tmp_path / "b.tar.gz").path
    cfg.source.write_text("# the config in use\n")
    fresh = tmp_path / "fresh"
    restore(archive, targets(cfg, elsewhere=fresh), NOW)
    assert cfg.source.read_text() == "# the config in use\n"
    assert (tmp_path / "config.toml.restored").read_text().startswith("[agent]")
    assert (fresh / "ws" / "notes" / "a.md").read_text() == "a"
    assert (fresh / "state" / "whatsapp" / "session.json").read_text() == "session"
    assert kv(fresh / "state" / "chela.sqlite3", "note") == '"kept"'


def test_a_damaged_archive_changes_nothing(tmp_path):
    cfg = home(tmp_path)
    archive = take(cfg, out=tmp_path / "b.tar.gz").path
    data = archive.read_bytes()
    cut = tmp_path / "cut.tar.gz"
    cut.write_bytes(data[: len(data) - 10])
    before = tree(tmp_path)
    with pytest.raises(ArchiveError, match="truncated"):
        restore(cut, targets(cfg), NOW)
    assert tree(tmp_path) == before


def newer(cfg) -> None:
    conn = sqlite3.connect(cfg.db_path)
    conn.execute(f"PRAGMA user_version={schema_version.SCHEMA_VERSION + 1}")
    conn.close()


def test_an_archive_from_a_newer_schema_is_refused(tmp_path):
    cfg = home(tmp_path)
    newer(cfg)
    archive = take(cfg, out=tmp_path / "b.tar.gz").path  # a newer database backs up fine
    fresh = tmp_path / "fresh"
    newer_version = schema_version.SCHEMA_VERSION + 1
    with pytest.raises(ArchiveError, match=f"schema version {newer_version}, newer than this"):
        restore(archive, targets(cfg, elsewhere=fresh), NOW)
    assert [p.name for p in (fresh / "state").iterdir()] == []


def test_twin_an_archive_of_this_schema_restores(tmp_path):
    cfg = home(tmp_path)
    archive = take(cfg, out=tmp_path / "b.tar.gz").path
    fresh = tmp_path / "fresh"
    unpacked, _ = restore(archive, targets(cfg, elsewhere=fresh), NOW)
    assert unpacked.schema == schema_version.SCHEMA_VERSION
    Store(fresh / "state" / "chela.sqlite3").close()  # and the store opens it


# ---------------------------------------------------------------------- schema versions
def test_the_store_records_its_schema_version(tmp_path):
    Store(tmp_path / "db").close()
    assert schema_version.read(tmp_path / "db")[0] == schema_version.SCHEMA_VERSION


def test_a_newer_database_is_not_opened_for_writing(tmp_path):
    cfg = home(tmp_path)
    newer(cfg)
    before = cfg.db_path.read_bytes()
    known = schema_version.SCHEMA_VERSION
    with pytest.raises(
        StoreError, match=rf"version {known + 1}, newer than this Chela knows \(version {known}\)"
    ):
        Store(cfg.db_path)
    assert cfg.db_path.read_bytes() == before


def test_a_newer_database_names_the_backup_to_restore(tmp_path):
    cfg = home(tmp_path)
    new = schema_version.SCHEMA_VERSION + 1
    folder = backups_dir(cfg)
    folder.mkdir()
    kept = folder / f"chela-backup-vm-20270101T000000Z-pre-migrate-{new - 1}-{new}.tar.gz"
    kept.write_text("x")
    newer(cfg)
    with pytest.raises(StoreError) as e:
        before_migration(cfg)
    line = str(e.value)
    assert f"schema version {new}" in line and f"(version {new - 1})" in line
    assert f"chela restore {kept}" in line and "\n" not in line


def test_an_older_database_is_backed_up_before_its_migration(tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="chela.backup")
    cfg = home(tmp_path)
    conn = sqlite3.connect(cfg.db_path)
    conn.execute("PRAGMA user_version=0")  # written by a Chela from before versions
    conn.close()
    path = before_migration(cfg)
    v = schema_version.SCHEMA_VERSION
    assert path is not None and path.name.endswith(f"-pre-migrate-0-{v}.tar.gz")
    assert [k.pre_migrate for k in archives(backups_dir(cfg))] == [True]
    assert str(path) in caplog.text
    Store(cfg.db_path).close()
    assert schema_version.read(cfg.db_path)[0] == schema_version.SCHEMA_VERSION


def test_twin_a_current_or_new_database_takes_no_backup(tmp_path):
    cfg = home(tmp_path)
    assert before_migration(cfg) is None
    cfg.db_path.unlink()
    assert before_migration(cfg) is None
    assert not backups_dir(cfg).exists()


def test_chela_status_shows_the_schema_version_and_the_last_backup(tmp_path):
    from bot.cli.status import status_text

    cfg = home(tmp_path)
    text = status_text(cfg, now=NOW)
    assert f"schema: version {schema_version.SCHEMA_VERSION}" in text
    assert "last backup: none" in text
    done = take(cfg, now=NOW - 7200)
    text = status_text(cfg, now=NOW)
    assert f"last backup: {done.path} (2.0 h ago)" in text
    newer(cfg)
    assert "NEWER than this Chela knows" in status_text(cfg, now=NOW)
