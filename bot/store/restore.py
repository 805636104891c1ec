"""Checking and restoring a backup archive (written by :mod:`bot.store.backup`).

:func:`unpack` reads the whole archive once, writing each member under a fresh directory
while it hashes it, then checks the manifest against what it read (every member listed,
each size and SHA-256 equal, nothing extra), that the gzip stream ends where it should
(a truncated archive fails), and that the database passes ``PRAGMA integrity_check``.
:func:`verify` is that into a temporary directory; :func:`restore` unpacks into a
directory beside the state dir, and only then renames each piece into place, keeping what
it replaced as ``<path>.before-restore-<time>``.  Holding the state dir's lock (no daemon
running) is the caller's job (``chela restore``).
"""

from __future__ import annotations

import contextlib
import errno
import gzip
import hashlib
import json
import os
import shutil
import sqlite3
import tarfile
import tempfile
import zlib
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath

from bot.fs import private_dir
from bot.store.backup import DB_MEMBER, MANIFEST
from bot.store.schema_version import SCHEMA_VERSION

TOPS = ("db", "config", "workspaces", "state")
CHUNK = 1 << 20


class ArchiveError(Exception):
    """The archive cannot be used; one line saying what is wrong.  Nothing was changed."""


@dataclass(frozen=True)
class Unpacked:
    root: Path
    manifest: dict
    schema: int


def _safe_name(name: str) -> PurePosixPath:
    path = PurePosixPath(name)
    if path.is_absolute() or ".." in path.parts or not path.parts:
        raise ArchiveError(f"member {name!r} points outside the archive: not a Chela backup")
    if name != MANIFEST and path.parts[0] not in TOPS:
        raise ArchiveError(f"unexpected member {name!r}: not a Chela backup")
    return path


def _write_member(tar: tarfile.TarFile, m: tarfile.TarInfo, dest: Path) -> dict:
    src = tar.extractfile(m)
    if src is None:
        raise ArchiveError(f"member {m.name!r} cannot be read")
    private_dir(dest.parent)
    mode = 0o700 if m.mode & 0o100 else 0o600
    sha = hashlib.sha256()
    size = 0
    fd = os.open(dest, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode)
    with os.fdopen(fd, "wb") as out:
        while chunk := src.read(CHUNK):
            sha.update(chunk)
            size += len(chunk)
            out.write(chunk)
    os.utime(dest, (m.mtime, m.mtime))
    return {"size": size, "sha256": sha.hexdigest()}


def _read_all(archive: Path, into: Path) -> dict[str, dict]:
    """Every member written under ``into``; name -> size and hash of what was read."""
    got: dict[str, dict] = {}
    with gzip.open(archive, "rb") as gz:
        with tarfile.open(fileobj=gz, mode="r|") as tar:
            for m in tar:
                path = _safe_name(m.name)
                if m.isdir():
                    continue
                if not m.isreg():
                    raise ArchiveError(
                        f"member {m.name!r} is not a regular file: not a Chela backup"
                    )
                if m.name in got:
                    raise ArchiveError(f"member {m.name!r} is in the archive twice")
                got[m.name] = _write_member(tar, m, into.joinpath(*path.parts))
        while gz.read(CHUNK):  # the rest of the stream: its length and CRC are checked
            pass
    return got


def _compare(listed: list, got: dict[str, dict]) -> None:
    names = set()
    for entry in listed:
        name = entry.get("name") if isinstance(entry, dict) else None
        if not isinstance(name, str):
            raise ArchiveError("manifest.json lists a member without a name")
        names.add(name)
        have = got.get(name)
        if have is None:
            raise ArchiveError(f"member {name} is listed in the manifest but missing")
        if have["size"] != entry.get("size") or have["sha256"] != entry.get("sha256"):
            raise ArchiveError(
                f"member {name} does not match the SHA-256 in the manifest: it was changed "
                "after the backup was taken"
            )
    extra = sorted(set(got) - names - {MANIFEST})
    if extra:
        raise ArchiveError(f"member {extra[0]} is not in the manifest: it was added afterwards")


def _check_db(path: Path) -> int:
    """``PRAGMA integrity_check`` of the unpacked database; its schema version."""
    try:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            result = [r[0] for r in conn.execute("PRAGMA integrity_check")]
            version = int(conn.execute("PRAGMA user_version").fetchone()[0])
        finally:
            conn.close()
    except sqlite3.Error as e:
        raise ArchiveError(f"the database in the archive cannot be read: {e}") from None
    if result != ["ok"]:
        raise ArchiveError(f"the database in the archive fails its integrity check: {result[0]}")
    return version


def _damaged(e: BaseException) -> str:
    if isinstance(e, OSError) and e.errno in (errno.ENOSPC, errno.EDQUOT):
        return "no space left to unpack the archive; free some space and try again"
    if isinstance(e, EOFError):
        return "the archive is truncated (it ends before its last member): not usable"
    return f"the archive is damaged ({e or type(e).__name__}): not usable"


def unpack(archive: Path, into: Path) -> Unpacked:
    """Every member of ``archive`` under ``into`` (which must be empty), checked; raises
    :class:`ArchiveError` with one line when anything is wrong."""
    archive = Path(archive)
    if not archive.is_file():
        raise ArchiveError(f"{archive}: no such file")
    try:
        got = _read_all(archive, into)
    except ArchiveError:
        raise
    except (OSError, EOFError, tarfile.TarError, zlib.error) as e:
        raise ArchiveError(_damaged(e)) from None
    if MANIFEST not in got:
        raise ArchiveError("the archive has no manifest.json: not a Chela backup")
    try:
        manifest = json.loads((into / MANIFEST).read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError):
        raise ArchiveError("manifest.json is not valid JSON") from None
    if not isinstance(manifest, dict) or not isinstance(manifest.get("members"), list):
        raise ArchiveError("manifest.json does not list the members")
    _compare(manifest["members"], got)
    if DB_MEMBER not in got:
        raise ArchiveError("the archive holds no database")
    schema = _check_db(into / DB_MEMBER)
    if schema != manifest.get("schema_version"):
        raise ArchiveError("the database's schema version differs from the manifest's")
    return Unpacked(into, manifest, schema)


def verify(archive: Path) -> Unpacked:
    """:func:`unpack` into a temporary directory (beside the archive when it can), removed
    afterwards."""
    archive = Path(archive).absolute()
    try:
        work = tempfile.mkdtemp(prefix=".chela-verify-", dir=archive.parent)
    except OSError:
        work = tempfile.mkdtemp(prefix="chela-verify-")
    try:
        return unpack(archive, Path(work))
    finally:
        shutil.rmtree(work, ignore_errors=True)


def refuse_newer(unpacked: Unpacked) -> None:
    if unpacked.schema > SCHEMA_VERSION:
        made_by = unpacked.manifest.get("chela_version") or "a newer version"
        raise ArchiveError(
            f"this backup's database has schema version {unpacked.schema}, newer than this "
            f"Chela knows (version {SCHEMA_VERSION}): install Chela {made_by} or newer to "
            "restore it; nothing was changed"
        )


# ---------------------------------------------------------------------- restoring
@dataclass(frozen=True)
class Targets:
    """Where each part goes: the state dir, each agent's workspace, and the config file
    (``config_beside``: put next to it as ``<name>.restored``, never over it)."""

    state_dir: Path
    workspaces: dict[str, Path]
    config: Path | None
    config_beside: bool


@dataclass
class Restored:
    placed: list[Path] = field(default_factory=list)
    kept: list[Path] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)


def _aside(path: Path, stamp: str) -> Path:
    return path.with_name(f"{path.name}.before-restore-{stamp}")


def _move(src: Path, target: Path) -> None:
    """Rename ``src`` to ``target``; across file systems, copy beside ``target`` first and
    rename that (each step that shows is one rename)."""
    try:
        os.rename(src, target)
        return
    except OSError as e:
        if e.errno != errno.EXDEV:
            raise
    beside = target.with_name(f".chela-restore-{target.name}")
    if src.is_dir():
        shutil.copytree(src, beside, symlinks=True)
    else:
        shutil.copy2(src, beside)
    os.rename(beside, target)


class _Swaps:
    """Each piece renamed into place, what it replaces renamed aside first; undone in
    reverse if a later one fails."""

    def __init__(self, stamp: str) -> None:
        self.stamp = stamp
        self.done: list[tuple[Path, Path | None]] = []
        self.result = Restored()

    def put(self, src: Path, target: Path) -> None:
        kept = None
        if target.exists() or target.is_symlink():
            kept = _aside(target, self.stamp)
            os.rename(target, kept)
        self.done.append((target, kept))
        if not target.parent.is_dir():  # a new place; an existing parent is left as it is
            private_dir(target.parent)
        _move(src, target)
        self.result.placed.append(target)
        if kept is not None:
            self.result.kept.append(kept)

    def put_db(self, src: Path, target: Path) -> None:
        # the old database's WAL and index go aside with it (same name + suffix: a
        # database opened from the kept copy finds its WAL)
        for suffix in ("-wal", "-shm", "-journal"):
            side = Path(f"{target}{suffix}")
            if side.exists():
                kept = Path(f"{_aside(target, self.stamp)}{suffix}")
                os.rename(side, kept)
                self.done.append((side, kept))
        self.put(src, target)

    def undo(self) -> None:
        for target, kept in reversed(self.done):
            with contextlib.suppress(OSError):
                if target.is_dir() and not target.is_symlink():
                    shutil.rmtree(target)
                elif target.exists():
                    target.unlink()
                if kept is not None:
                    os.rename(kept, target)


def _agent_map(unpacked: Unpacked, wanted: dict[str, Path]) -> dict[str, Path]:
    """Archived agent id -> workspace to restore it to.  One archived agent and one
    configured agent are paired whatever their ids."""
    root = unpacked.root / "workspaces"
    have = sorted(p.name for p in root.iterdir()) if root.is_dir() else []
    if len(have) == 1 and len(wanted) == 1:
        return {have[0]: next(iter(wanted.values()))}
    return {agent: wanted[agent] for agent in have if agent in wanted}


def _plan(unpacked: Unpacked, to: Targets, swaps: _Swaps) -> list[tuple[Path, Path]]:
    root = unpacked.root
    plan: list[tuple[Path, Path]] = []
    state = root / "state"
    if state.is_dir():
        plan += [(entry, to.state_dir / entry.name) for entry in sorted(state.iterdir())]
    mapped = _agent_map(unpacked, to.workspaces)
    ws_root = root / "workspaces"
    for agent in sorted(p.name for p in ws_root.iterdir()) if ws_root.is_dir() else []:
        if agent in mapped:
            plan.append((ws_root / agent, mapped[agent]))
        else:
            swaps.result.skipped.append(f"agent {agent}'s workspace (no such agent in this config)")
    configs = sorted((root / "config").glob("*")) if (root / "config").is_dir() else []
    if configs:
        archived = configs[0]
        if to.config is None:
            plan.append((archived, to.state_dir / f"{archived.name}.restored"))
        elif to.config_beside:
            plan.append((archived, to.config.with_name(f"{to.config.name}.restored")))
        else:
            plan.append((archived, to.config))
    return plan


def restore(archive: Path, to: Targets, now: float) -> tuple[Unpacked, Restored]:
    """Verify ``archive`` by unpacking it beside the state dir, then put each piece in
    place; ArchiveError (nothing changed) when the archive is not usable or newer."""
    stamp = datetime.fromtimestamp(now, UTC).strftime("%Y%m%dT%H%M%SZ")
    private_dir(to.state_dir)
    staging = Path(tempfile.mkdtemp(prefix=".chela-restore-", dir=to.state_dir))
    try:
        unpacked = unpack(Path(archive), staging)
        refuse_newer(unpacked)
        swaps = _Swaps(stamp)
        plan = _plan(unpacked, to, swaps)
        try:
            swaps.put_db(staging / DB_MEMBER, to.state_dir / "chela.sqlite3")
            for src, target in plan:
                swaps.put(src, target)
        except OSError as e:
            swaps.undo()
            raise ArchiveError(
                f"restoring failed ({e.strerror or e}); what was already put back was undone"
            ) from None
        return unpacked, swaps.result
    finally:
        shutil.rmtree(staging, ignore_errors=True)
