"""Backups: one ``.tar.gz`` archive of everything needed to carry on elsewhere.

Members: ``db/chela.sqlite3`` (SQLite's online backup API, so the daemon may keep writing),
``workspaces/<agent id>/...`` (every agent's workspace), ``config/<name>`` (the config
file), ``state/...`` (channel state and the other files of the state dir, without logs,
caches, downloads, the browser profile, the HTTP API token or the backups themselves; media
only when asked) and ``manifest.json`` last: the Chela and schema versions, the time and
each member's size and SHA-256.  Secrets are not in it: they live in the environment.

The archive is written as a hidden ``.partial`` file beside its final name (0600) and
renamed into place once complete; a failure (a full disk) removes it.  Verifying and
restoring are :mod:`bot.store.restore`; pruning and the pre-migration backup are here.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import logging
import os
import re
import shutil
import secrets
import socket
import sqlite3
import tarfile
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from bot import __version__
from bot.config import Config
from bot.config.agents import agent_config, agent_ids
from bot import fs
from bot.fs import private_dir
from bot.store import schema_version
from bot.store.db import StoreError

log = logging.getLogger("chela.backup")

FORMAT = 1
MANIFEST = "manifest.json"
DB_MEMBER = "db/chela.sqlite3"
PRE_MIGRATE_DAYS = 30  # a pre-migration archive is kept this long, whatever ``keep`` says
COMPRESSLEVEL = 6  # gzip's default 9 costs twice the time for ~2% smaller archives

# top-level names of the state dir that are never archived: the database (archived through
# the backup API), the daemon's lock, the HTTP API token (a credential; a new one is made
# at start), logs, downloads and staging dirs, caches, the browser profile, the backups
STATE_SKIP = frozenset(
    {
        "chela.sqlite3",
        "chela.sqlite3-wal",
        "chela.sqlite3-shm",
        "chela.sqlite3-journal",
        "chela.pid",
        "http-token",
        "logs",
        "chat.log",
        "backups",
        "incoming",
        "outgoing",
        "dashboard",
        "cache",
        "caches",
        "browser",
        "tmp",
    }
)
MEDIA = "media"  # the owner's (state/media) and each guest's (state/guests/<id>/media)

ARCHIVE_RE = re.compile(
    r"^chela-backup-(?P<host>[A-Za-z0-9.-]*)-(?P<time>\d{8}T\d{6}Z)"
    r"(?:-pre-migrate-(?P<old>\d+)-(?P<new>\d+))?(?:\.(?P<n>\d+))?\.tar\.gz$"
)
TIME_FORMAT = "%Y%m%dT%H%M%SZ"


class BackupError(Exception):
    """A backup could not be written; the message is one line and says what to do."""


@dataclass(frozen=True)
class Written:
    path: Path
    size: int
    schema: int
    members: int
    seconds: float


def workspaces(cfg: Config) -> dict[str, Path]:
    """Every agent's workspace by agent id (``[agent]``, then each ``[agents.<id>]``)."""
    return {a: Path(agent_config(cfg, a).agent.workspace) for a in agent_ids(cfg)}


def backups_dir(cfg: Config) -> Path:
    return cfg.backup.directory(cfg.agent.state_dir)


def host_name() -> str:
    return re.sub(r"[^A-Za-z0-9.-]", "-", socket.gethostname())[:63] or "host"


def archive_name(when: float, reason: str = "", n: int = 0) -> str:
    stamp = datetime.fromtimestamp(when, UTC).strftime(TIME_FORMAT)
    tail = f"-{reason}" if reason.startswith("pre-migrate-") else ""
    return f"chela-backup-{host_name()}-{stamp}{tail}" + (f".{n}" if n else "") + ".tar.gz"


# ---------------------------------------------------------------------- what goes in
def _files(top: Path, skip: set[Path] | frozenset[Path] = frozenset()) -> Iterator[Path]:
    """Regular files under ``top``, sorted, no symbolic link followed; ``skip``: paths left
    out with everything under them."""
    skipped = {Path(p) for p in skip}
    for root, dirs, names in os.walk(top, followlinks=False):
        here = Path(root)
        dirs[:] = sorted(d for d in dirs if here / d not in skipped)
        for name in sorted(names):
            path = here / name
            if path not in skipped and path.is_file() and not path.is_symlink():
                yield path


def _leave_out(name: str) -> bool:
    return name in STATE_SKIP or ".before-restore-" in name or name.startswith(".chela-")


def state_files(cfg: Config, *, with_media: bool, also_skip: set[Path]) -> Iterator[Path]:
    """The state dir's files that belong in a backup (channel state, guests' files, ...)."""
    state = Path(cfg.agent.state_dir)
    if not state.is_dir():
        return
    skip = {*also_skip, *workspaces(cfg).values(), backups_dir(cfg)}
    if cfg.source is not None:
        skip.add(Path(cfg.source))
    if not with_media:
        skip.add(state / MEDIA)
        skip.update(p / MEDIA for p in (state / "guests").glob("*"))
    for entry in sorted(state.iterdir()):
        if _leave_out(entry.name) or entry in skip or entry.is_symlink():
            continue
        if entry.is_dir():
            yield from (p for p in _files(entry, skip) if not ARCHIVE_RE.match(p.name))
        elif entry.is_file() and not ARCHIVE_RE.match(entry.name):
            yield entry


Member = tuple[str, Path, Path]  # name in the archive, the root it is read under, the file


def members(cfg: Config, *, with_media: bool, also_skip: set[Path]) -> Iterator[Member]:
    """Everything but the database and the manifest."""
    if cfg.source is not None and Path(cfg.source).is_file():
        config = Path(cfg.source)
        yield f"config/{config.name}", config.parent, config
    for agent, ws in workspaces(cfg).items():
        if ws.is_dir():
            for path in _files(ws, also_skip):
                yield f"workspaces/{agent}/{path.relative_to(ws).as_posix()}", ws, path
    state = Path(cfg.agent.state_dir)
    for path in state_files(cfg, with_media=with_media, also_skip=also_skip):
        yield f"state/{path.relative_to(state).as_posix()}", state, path


# ---------------------------------------------------------------------- writing
class _Hashing:
    """A file read through SHA-256 (tarfile reads each member through it)."""

    def __init__(self, f) -> None:
        self.f = f
        self.sha = hashlib.sha256()
        self.size = 0

    def read(self, n: int = -1) -> bytes:
        data = self.f.read(n)
        self.sha.update(data)
        self.size += len(data)
        return data


def snapshot_db(src: Path, dst: Path) -> int:
    """A consistent copy of the database at ``src`` into ``dst`` (SQLite's online backup
    API in one step: in WAL mode the daemon's writes go on meanwhile); its schema version."""
    if not src.is_file():
        raise BackupError(
            f"no state database at {src}: nothing to back up (has `chela run` run with this config?)"
        )
    source = sqlite3.connect(f"file:{src}?mode=ro", uri=True)
    target = sqlite3.connect(dst)
    try:
        source.backup(target)
        target.execute("PRAGMA journal_mode=DELETE")  # one self-contained file
        return schema_version.version_of(target)
    finally:
        target.close()
        source.close()


def _add(tar: tarfile.TarFile, name: str, root: Path, path: Path) -> dict:
    # read through a handle on its root with no link followed at any component, even one
    # put in place after the walk saw a file (a guest's directory is written by somebody else)
    with fs.open_under(root, path) as f:
        info = tar.gettarinfo(arcname=name, fileobj=f)
        info.mode = 0o700 if info.mode & 0o100 else 0o600
        info.uid = info.gid = 0
        info.uname = info.gname = ""
        reader = _Hashing(f)
        tar.addfile(info, reader)
    return {"name": name, "size": reader.size, "sha256": reader.sha.hexdigest()}


def _add_bytes(tar: tarfile.TarFile, name: str, data: bytes, when: float) -> None:
    import io

    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mode = 0o600
    info.mtime = int(when)
    tar.addfile(info, io.BytesIO(data))


def manifest(cfg: Config, listed: list[dict], *, schema: int, when: float, reason: str) -> dict:
    return {
        "format": FORMAT,
        "chela_version": __version__,
        "schema_version": schema,
        "created": datetime.fromtimestamp(when, UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "host": host_name(),
        "reason": reason,
        "state_dir": str(cfg.agent.state_dir),
        "config": str(cfg.source) if cfg.source is not None else None,
        "agents": {agent: str(ws) for agent, ws in workspaces(cfg).items()},
        "members": listed,
    }


def _target(cfg: Config, out: Path | None, when: float, reason: str) -> Path:
    if out is not None:
        out = Path(out).expanduser().absolute()
        if out.is_dir():
            return out / archive_name(when, reason)
        return out
    folder = private_dir(backups_dir(cfg))
    n = 0
    while (folder / archive_name(when, reason, n)).exists():
        n += 1
    return folder / archive_name(when, reason, n)


def _write(
    cfg: Config, partial: Path, work: Path, *, with_media: bool, when: float, reason: str
) -> tuple[int, int]:
    """The archive into ``partial`` (made 0600 first); the database's schema version and the
    number of members."""
    copy = work / "chela.sqlite3"
    schema = snapshot_db(Path(cfg.db_path), copy)
    listed: list[dict] = []
    fs.write_private(partial, b"")
    with tarfile.open(partial, mode="w:gz", compresslevel=COMPRESSLEVEL) as tar:
        listed.append(_add(tar, DB_MEMBER, work, copy))
        copy.unlink()
        for name, root, path in members(cfg, with_media=with_media, also_skip={work}):
            try:
                listed.append(_add(tar, name, root, path))
            except (FileNotFoundError, IsADirectoryError, fs.LinkRefused, fs.NotRegularFile):
                continue  # removed, or replaced by a link, while the backup ran: left out
        text = manifest(cfg, listed, schema=schema, when=when, reason=reason)
        _add_bytes(tar, MANIFEST, json.dumps(text, indent=1).encode(), when)
    return schema, len(listed)


def _one_line(e: BaseException, where: Path) -> str:
    if isinstance(e, BackupError):
        return str(e)
    if isinstance(e, OSError) and e.errno in (errno.ENOSPC, errno.EDQUOT):
        return (
            f"no space left in {where}: the backup was not written (its partial file was "
            "removed); free some space there or choose another place (--out, [backup] dir)"
        )
    if isinstance(e, OSError):
        return f"cannot write the backup in {where}: {e.strerror or e}"
    return f"the backup failed: {type(e).__name__}: {e}"


def take(
    cfg: Config,
    *,
    out: Path | None = None,
    with_media: bool = False,
    reason: str = "manual",
    now: float | None = None,
) -> Written:
    """Write one archive and return where; :class:`BackupError` (one line) when it could
    not be written, with nothing left behind."""
    t0 = time.perf_counter()
    when = time.time() if now is None else now
    try:
        final = _target(cfg, out, when, reason)
    except OSError as e:
        raise BackupError(_one_line(e, backups_dir(cfg) if out is None else Path(out))) from None
    partial = final.with_name(f".{final.name}.{secrets.token_hex(4)}.partial")
    work: Path | None = None
    try:
        work = Path(tempfile.mkdtemp(prefix=".chela-backup-", dir=final.parent))
        schema, count = _write(cfg, partial, work, with_media=with_media, when=when, reason=reason)
        final = fs.move_in(partial, final.parent, final.name)
    except (OSError, sqlite3.Error, tarfile.TarError, BackupError) as e:
        with contextlib.suppress(OSError):
            partial.unlink()
        raise BackupError(_one_line(e, final.parent)) from None
    finally:
        if work is not None:
            shutil.rmtree(work, ignore_errors=True)
    return Written(final, final.stat().st_size, schema, count, time.perf_counter() - t0)


# ---------------------------------------------------------------------- pruning
@dataclass(frozen=True)
class Kept:
    path: Path
    time: float
    pre_migrate: bool


def archives(folder: Path) -> list[Kept]:
    """The archives in ``folder`` named as Chela names them, oldest first."""
    found = []
    with contextlib.suppress(OSError):
        for path in folder.iterdir():
            m = ARCHIVE_RE.match(path.name)
            if m is None or not path.is_file():
                continue
            stamp = datetime.strptime(m["time"], TIME_FORMAT).replace(tzinfo=UTC).timestamp()
            found.append(Kept(path, stamp, m["old"] is not None))
    return sorted(found, key=lambda k: (k.time, k.path.name))


def to_prune(found: list[Kept], keep: int, now: float) -> list[Path]:
    """The archives beyond the newest ``keep`` (pre-migration ones do not count and go once
    older than 30 days)."""
    regular = [k for k in found if not k.pre_migrate]
    old = regular[: max(0, len(regular) - keep)]
    expired = [k for k in found if k.pre_migrate and now - k.time > PRE_MIGRATE_DAYS * 86400]
    return [k.path for k in sorted([*old, *expired], key=lambda k: k.time)]


STALE = 86400.0  # a partial archive or work dir this old was left by a backup that died


def prune(folder: Path, keep: int, now: float | None = None) -> list[Path]:
    """The archives beyond ``keep`` removed (:func:`to_prune`), and what a backup killed
    mid-way left behind; the archives removed."""
    now = time.time() if now is None else now
    gone = []
    for path in to_prune(archives(folder), keep, now):
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
            gone.append(path)
    with contextlib.suppress(OSError):
        for left in folder.glob(".chela-backup-*"):
            if now - left.lstat().st_mtime > STALE:
                if left.is_dir() and not left.is_symlink():
                    shutil.rmtree(left, ignore_errors=True)
                else:
                    left.unlink()
    return gone


def last_backup(cfg: Config) -> Kept | None:
    found = archives(backups_dir(cfg))
    return found[-1] if found else None


# ---------------------------------------------------------------------- upgrades
def pre_migrate_archive(cfg: Config, found: int) -> Path | None:
    """The newest pre-migration archive that takes a database of schema ``found`` back to
    one this code knows."""
    for kept in reversed(archives(backups_dir(cfg))):
        m = ARCHIVE_RE.match(kept.path.name)
        known = schema_version.SCHEMA_VERSION
        if m and m["old"] is not None and int(m["new"]) == found and int(m["old"]) <= known:
            return kept.path
    return None


def before_migration(cfg: Config) -> Path | None:
    """Before the store opens the database: refuse one newer than the code (StoreError
    naming both versions and the backup to restore), and back up one that is about to be
    migrated (``pre-migrate-<old>-<new>``, its path logged).  The path, or None."""
    try:
        seen = schema_version.read(Path(cfg.db_path))
    except sqlite3.Error:
        return None  # not a database: the store says so, with what to do
    if seen is None:
        return None
    found, tables, by = seen
    new = schema_version.SCHEMA_VERSION
    if found > new:
        restore = pre_migrate_archive(cfg, found)
        raise StoreError(
            str(schema_version.NewerSchema(str(cfg.db_path), found, by, str(restore or "")))
        )
    if found == new or not tables:
        return None
    try:
        done = take(cfg, reason=f"pre-migrate-{found}-{new}")
    except BackupError as e:
        raise StoreError(
            f"the state database needs a migration from schema {found} to {new}, and the "
            f"backup taken first failed: {e}"
        ) from None
    log.info(
        "backed up the state database before migrating it from schema %d to %d: %s",
        found,
        new,
        done.path,
    )
    return done.path
