"""Backup archives: what goes in (and what never does), the manifest, the checks that catch
a damaged or changed archive, and pruning."""

from __future__ import annotations

import hashlib
import io
import json
import os
import sqlite3
import stat
import tarfile
from pathlib import Path

import pytest

from bot import __version__
from bot.config import parse_config
from bot.store import Store, schema_version
from bot.store.backup import (
    DB_MEMBER,
    MANIFEST,
    PRE_MIGRATE_DAYS,
    BackupError,
    Kept,
    archive_name,
    archives,
    prune,
    take,
    to_prune,
)
from bot.store.restore import ArchiveError, verify


def config(tmp_path: Path, **sections):
    path = tmp_path / "config.toml"
    path.write_text('[agent]\nmodel = "openai/x"\n')
    data = {
        "agent": {"workspace": str(tmp_path / "ws"), "state_dir": str(tmp_path / "state")},
        **sections,
    }
    cfg = parse_config(data)
    return cfg.model_copy(update={"source": path})


def home(tmp_path: Path, **sections):
    """A state dir with a database, a workspace, channel state and the things left out."""
    cfg = config(tmp_path, **sections)
    state = cfg.agent.state_dir
    store = Store(cfg.db_path)
    store.put("note", "kept")
    store.close()
    files = {
        cfg.agent.workspace / "SOUL.md": "soul",
        cfg.agent.workspace / "notes" / "a.md": "a",
        state / "whatsapp" / "session.json": "session",
        state / "guests" / "g1" / "todo.txt": "guest file",
        state / "guests" / "g1" / "media" / "pic.jpg": "guest pic",
        state / "media" / "photo.jpg": "photo",
        state / "logs" / "chela.log": "log line",
        state / "incoming" / "x.bin": "incoming",
        state / "http-token": "the-http-token",
        state / "chela.pid": "{}",
    }
    for path, text in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return cfg


def names(path: Path) -> set[str]:
    with tarfile.open(path, "r:gz") as tar:
        return {m.name for m in tar.getmembers() if m.isfile()}


def read_manifest(path: Path) -> dict:
    with tarfile.open(path, "r:gz") as tar:
        f = tar.extractfile(MANIFEST)
        assert f is not None
        return json.load(f)


def test_an_archive_holds_the_database_workspace_config_and_channel_state(tmp_path):
    cfg = home(tmp_path)
    done = take(cfg)
    assert done.path.parent == cfg.agent.state_dir / "backups"
    assert stat.S_IMODE(done.path.stat().st_mode) == 0o600
    assert done.path.name.startswith("chela-backup-") and done.path.name.endswith(".tar.gz")
    assert names(done.path) == {
        DB_MEMBER,
        "config/config.toml",
        "workspaces/main/SOUL.md",
        "workspaces/main/notes/a.md",
        "state/whatsapp/session.json",
        "state/guests/g1/todo.txt",
        MANIFEST,
    }


def test_every_agents_workspace_is_archived_and_restored_to_its_own(tmp_path):
    from bot.store.restore import Targets, restore

    cfg = home(tmp_path, agents={"helper": {"workspace": str(tmp_path / "ws-helper")}})
    (tmp_path / "ws-helper").mkdir()
    (tmp_path / "ws-helper" / "SOUL.md").write_text("the helper's soul")
    done = take(cfg)
    assert {"workspaces/main/SOUL.md", "workspaces/helper/SOUL.md"} <= names(done.path)
    assert set(read_manifest(done.path)["agents"]) == {"main", "helper"}
    fresh = tmp_path / "fresh"
    spaces = {"main": fresh / "ws", "helper": fresh / "ws-helper"}
    restore(done.path, Targets(fresh / "state", spaces, cfg.source, True), 1_800_000_000)
    assert (fresh / "ws" / "SOUL.md").read_text() == "soul"
    assert (fresh / "ws-helper" / "SOUL.md").read_text() == "the helper's soul"


def test_media_only_when_asked(tmp_path):
    cfg = home(tmp_path)
    got = names(take(cfg, with_media=True).path)
    assert {"state/media/photo.jpg", "state/guests/g1/media/pic.jpg"} <= got
    assert "state/http-token" not in got and "state/logs/chela.log" not in got


def test_the_manifest_lists_versions_time_and_each_members_size_and_hash(tmp_path):
    cfg = home(tmp_path)
    done = take(cfg, now=1_800_000_000)
    m = read_manifest(done.path)
    assert m["chela_version"] == __version__
    assert m["schema_version"] == schema_version.SCHEMA_VERSION
    assert m["created"] == "2027-01-15T08:00:00Z"
    assert m["agents"] == {"main": str(cfg.agent.workspace)}
    listed = {e["name"]: e for e in m["members"]}
    assert set(listed) == names(done.path) - {MANIFEST}
    with tarfile.open(done.path, "r:gz") as tar:
        for name, entry in listed.items():
            f = tar.extractfile(name)
            assert f is not None
            data = f.read()
            assert entry["size"] == len(data)
            assert entry["sha256"] == hashlib.sha256(data).hexdigest()


def test_the_archived_database_is_a_consistent_copy(tmp_path):
    cfg = home(tmp_path)
    writer = Store(cfg.db_path)  # the daemon's connection, open and writing meanwhile
    writer.put("during", 1)
    done = take(cfg)
    writer.put("after", 2)
    writer.close()
    work = tmp_path / "x"
    with tarfile.open(done.path, "r:gz") as tar:
        tar.extract(DB_MEMBER, work, filter="data")
    db = sqlite3.connect(work / DB_MEMBER)
    keys = {r[0] for r in db.execute("SELECT key FROM kv")}
    assert {"note", "during"} <= keys and "after" not in keys


def test_out_names_the_file(tmp_path):
    cfg = home(tmp_path)
    done = take(cfg, out=tmp_path / "mine.tar.gz")
    assert done.path == tmp_path / "mine.tar.gz"
    assert verify(done.path).schema == schema_version.SCHEMA_VERSION


def test_without_a_database_nothing_is_written(tmp_path):
    cfg = config(tmp_path)
    with pytest.raises(BackupError, match="no state database"):
        take(cfg, out=tmp_path / "x.tar.gz")
    assert list(tmp_path.glob("*x.tar.gz*")) == []


# ---------------------------------------------------------------------- verify
def rewrite(src: Path, dst: Path, change) -> None:
    """Copy an archive member by member; ``change(name, data)`` returns the new bytes (None:
    leave the member out)."""
    with tarfile.open(src, "r:gz") as tin, tarfile.open(dst, "w:gz") as tout:
        for m in tin.getmembers():
            f = tin.extractfile(m)
            data = change(m.name, f.read() if f else b"")
            if data is None:
                continue
            m.size = len(data)
            tout.addfile(m, io.BytesIO(data))


def flip(data: bytes, at: int = 0) -> bytes:
    return data[:at] + bytes([data[at] ^ 0x01]) + data[at + 1 :]


def test_verify_passes_an_intact_archive(tmp_path):
    done = take(home(tmp_path))
    assert verify(done.path).manifest["host"]


def test_a_member_changed_after_the_backup_is_named(tmp_path):
    done = take(home(tmp_path))
    bad = tmp_path / "bad.tar.gz"
    rewrite(done.path, bad, lambda n, d: flip(d) if n == "workspaces/main/SOUL.md" else d)
    with pytest.raises(ArchiveError, match="workspaces/main/SOUL.md does not match the SHA-256"):
        verify(bad)


def test_a_truncated_archive_fails(tmp_path):
    done = take(home(tmp_path))
    data = done.path.read_bytes()
    for keep in (len(data) - 4, len(data) // 2, 100):
        cut = tmp_path / f"cut{keep}.tar.gz"
        cut.write_bytes(data[:keep])
        with pytest.raises(ArchiveError, match="truncated|damaged"):
            verify(cut)


def test_a_flipped_byte_in_the_compressed_stream_fails(tmp_path):
    done = take(home(tmp_path))
    data = done.path.read_bytes()
    bad = tmp_path / "flip.tar.gz"
    bad.write_bytes(flip(data, len(data) // 2))
    with pytest.raises(ArchiveError):
        verify(bad)


def test_missing_manifest_added_member_and_missing_member(tmp_path):
    done = take(home(tmp_path))
    cases = {
        "no manifest": (lambda n, d: None if n == MANIFEST else d, "no manifest.json"),
        "missing": (lambda n, d: None if n.endswith("SOUL.md") else d, "listed .* but missing"),
    }
    for label, (change, message) in cases.items():
        bad = tmp_path / f"{label}.tar.gz"
        rewrite(done.path, bad, change)
        with pytest.raises(ArchiveError, match=message):
            verify(bad)
    extra = tmp_path / "extra.tar.gz"
    with tarfile.open(done.path, "r:gz") as tin, tarfile.open(extra, "w:gz") as tout:
        for m in tin.getmembers():
            tout.addfile(m, tin.extractfile(m))
        info = tarfile.TarInfo("workspaces/main/planted.md")
        info.size = 3
        tout.addfile(info, io.BytesIO(b"bad"))
    with pytest.raises(ArchiveError, match="planted.md is not in the manifest"):
        verify(extra)


def test_a_member_outside_the_archive_is_refused(tmp_path):
    done = take(home(tmp_path))
    bad = tmp_path / "escape.tar.gz"
    with tarfile.open(done.path, "r:gz") as tin, tarfile.open(bad, "w:gz") as tout:
        info = tarfile.TarInfo("../escape.txt")
        info.size = 1
        tout.addfile(info, io.BytesIO(b"x"))
        for m in tin.getmembers():
            tout.addfile(m, tin.extractfile(m))
    with pytest.raises(ArchiveError, match="outside the archive"):
        verify(bad)
    assert not (tmp_path / "escape.txt").exists()


def test_a_database_that_fails_its_integrity_check(tmp_path):
    done = take(home(tmp_path))
    manifest = read_manifest(done.path)

    def corrupt(name: str, data: bytes) -> bytes:
        if name != DB_MEMBER:
            return data
        # a page of an index overwritten: the file still opens, integrity_check fails
        page = 4096
        return data[: 3 * page] + b"\x0d" * page + data[4 * page :]

    with tarfile.open(done.path, "r:gz") as tar:
        f = tar.extractfile(DB_MEMBER)
        assert f is not None
        bad_db = corrupt(DB_MEMBER, f.read())
    for entry in manifest["members"]:
        if entry["name"] == DB_MEMBER:
            entry["sha256"] = hashlib.sha256(bad_db).hexdigest()
            entry["size"] = len(bad_db)
    bad = tmp_path / "db.tar.gz"
    rewrite(
        done.path,
        bad,
        lambda n, d: (
            bad_db if n == DB_MEMBER else json.dumps(manifest).encode() if n == MANIFEST else d
        ),
    )
    with pytest.raises(ArchiveError, match="database in the archive"):
        verify(bad)


# ---------------------------------------------------------------------- pruning
DAY = 86400.0


def test_pruning_keeps_the_newest_and_pre_migration_archives_for_30_days():
    now = 100 * DAY
    found = [Kept(Path(f"r{i}"), now - (10 - i) * DAY, False) for i in range(10)]
    young = Kept(Path("pm-young"), now - (PRE_MIGRATE_DAYS - 1) * DAY, True)
    old = Kept(Path("pm-old"), now - (PRE_MIGRATE_DAYS + 1) * DAY, True)
    gone = to_prune(sorted([*found, young, old], key=lambda k: k.time), keep=7, now=now)
    assert gone == [Path("pm-old"), Path("r0"), Path("r1"), Path("r2")]
    assert to_prune(found[:3], keep=7, now=now) == []


def test_prune_removes_files_by_the_time_in_their_names(tmp_path):
    t0 = 1_800_000_000.0
    for i in range(5):
        (tmp_path / archive_name(t0 + i * DAY)).write_text("x")
    (tmp_path / archive_name(t0, "pre-migrate-0-1")).write_text("x")
    (tmp_path / "unrelated.tar.gz").write_text("x")
    gone = prune(tmp_path, keep=2, now=t0 + 5 * DAY)
    assert [p.name for p in gone] == [archive_name(t0 + i * DAY) for i in range(3)]
    left = sorted(p.name for p in tmp_path.iterdir())
    assert "unrelated.tar.gz" in left and archive_name(t0, "pre-migrate-0-1") in left
    assert [k.path.name for k in archives(tmp_path) if not k.pre_migrate] == [
        archive_name(t0 + 3 * DAY),
        archive_name(t0 + 4 * DAY),
    ]


def test_prune_removes_what_a_killed_backup_left_a_day_ago(tmp_path):
    t0 = 1_800_000_000.0
    old_partial = tmp_path / f".{archive_name(t0)}.ab12.partial"
    old_work = tmp_path / ".chela-backup-x1"
    fresh_partial = tmp_path / f".{archive_name(t0 + DAY)}.cd34.partial"
    old_partial.write_text("x")
    old_work.mkdir()
    fresh_partial.write_text("x")  # perhaps a backup still running
    for p in (old_partial, old_work):
        os.utime(p, (t0, t0))
    os.utime(fresh_partial, (t0 + 1.5 * DAY, t0 + 1.5 * DAY))
    prune(tmp_path, keep=7, now=t0 + 1.5 * DAY)
    assert [p.name for p in tmp_path.iterdir()] == [fresh_partial.name]


def test_two_backups_in_one_second_get_two_names(tmp_path):
    cfg = home(tmp_path)
    a = take(cfg, now=1_800_000_000)
    b = take(cfg, now=1_800_000_000)
    assert a.path != b.path and a.path.is_file() and b.path.is_file()
    assert len(archives(a.path.parent)) == 2


def test_a_failed_write_leaves_nothing(tmp_path):
    cfg = home(tmp_path)
    with pytest.raises(BackupError, match="cannot write the backup in .*nowhere"):
        take(cfg, out=tmp_path / "nowhere" / "x.tar.gz")
    assert not (tmp_path / "nowhere").exists()
    assert not (cfg.agent.state_dir / "backups").exists()
