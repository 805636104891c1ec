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
import shutil
import sqlite3
import tarfile
import tempfile
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath

from bot import fs
from bot.fs import private_dir
from bot.store.backup import DB_MEMBER, MANIFEST
from bot.store.schema_version import SCHEMA_VERSION

TOPS = ("db", "config", "workspaces", "state")
CHUNK = 1 << 20
MANIFEST_MAX = 64 << 20


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


Where = Callable[[str], Path]  # a member's name -> the directory it is unpacked under


def _hash(root: Path, name: str) -> dict:
    sha = hashlib.sha256()
    size = 0
    with fs.open_under(root, name) as f:
        while chunk := f.read(CHUNK):
            sha.update(chunk)
            size += len(chunk)
    return {"size": size, "sha256": sha.hexdigest(), "root": root}


def _read_all(archive: Path, where: Where) -> dict[str, dict]:
    """Every member unpacked under ``where(name)``; name -> size, hash and that directory."""
    got: dict[str, dict] = {}
    with gzip.open(archive, "rb") as gz:
        with tarfile.open(fileobj=gz, mode="r|") as tar:
            for m in tar:
                _safe_name(m.name)
                if m.isdir():
                    continue
                if not m.isreg():
                    raise ArchiveError(
                        f"member {m.name!r} is not a regular file: not a Chela backup"
                    )
                if m.name in got:
                    raise ArchiveError(f"member {m.name!r} is in the archive twice")
                root = where(m.name)
                tar.extract(m, root, filter="data")
                got[m.name] = _hash(root, m.name)
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


def unpack(archive: Path, into: Path, where: Where | None = None) -> Unpacked:
    """Every member of ``archive`` unpacked (under ``where(name)``, else ``into``; the
    manifest and the database always under ``into``) and checked; raises
    :class:`ArchiveError` with one line when anything is wrong."""
    archive = Path(archive)
    if not archive.is_file():
        raise ArchiveError(f"{archive}: no such file")
    try:
        got = _read_all(archive, where or (lambda name: into))
    except ArchiveError:
        raise
    except (OSError, EOFError, tarfile.TarError, zlib.error) as e:
        raise ArchiveError(_damaged(e)) from None
    if MANIFEST not in got:
        raise ArchiveError("the archive has no manifest.json: not a Chela backup")
    try:
        manifest = json.loads(fs.read_in(into / MANIFEST, MANIFEST_MAX, into))
    except (ValueError, UnicodeDecodeError, fs.FileTooLarge):
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


def _rename(src: Path, target: Path) -> Path:
    """``src`` renamed to ``target`` (a free name in the same directory)."""
    return fs.move_in(src, target.parent, target.name)


class _Staging:
    """Where each member is unpacked: in a directory beside the place it goes, so that
    putting it there is one rename on one file system."""

    def __init__(self, to: Targets) -> None:
        self.to = to
        self.dirs: dict[Path, Path] = {}  # a target's parent -> the staging dir in it
        self.agents: dict[str, Path] = {}  # archived agent id -> the workspace it goes to
        self.state = self.beside(to.state_dir / "chela.sqlite3")

    def beside(self, place: Path) -> Path:
        parent = place.parent
        if parent not in self.dirs:
            if not parent.is_dir():  # a new place; an existing parent is left as it is
                private_dir(parent)
            self.dirs[parent] = Path(tempfile.mkdtemp(prefix=".chela-restore-", dir=parent))
        return self.dirs[parent]

    def workspace(self, agent: str) -> Path | None:
        """The workspace for an archived agent: the one of the same id, or the only one
        configured (for the first archived agent without a match)."""
        wanted = self.to.workspaces
        if agent not in self.agents:
            if agent in wanted:
                self.agents[agent] = wanted[agent]
            elif len(wanted) == 1 and not self.agents:
                self.agents[agent] = next(iter(wanted.values()))
        return self.agents.get(agent)

    def config(self, name: str) -> Path:
        to = self.to
        if to.config is None:
            return to.state_dir / f"{name}.restored"
        if to.config_beside:
            return to.config.with_name(f"{to.config.name}.restored")
        return to.config

    def where(self, member: str) -> Path:
        parts = PurePosixPath(member).parts
        if parts[0] == "workspaces" and len(parts) > 2:
            ws = self.workspace(parts[1])
            return self.state if ws is None else self.beside(ws)
        if parts[0] == "config" and len(parts) == 2:
            return self.beside(self.config(parts[1]))
        return self.state

    def cleanup(self) -> None:
        for d in self.dirs.values():
            shutil.rmtree(d, ignore_errors=True)


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
            kept = _rename(target, _aside(target, self.stamp))
        self.done.append((target, kept))
        placed = _rename(src, target)
        if placed.is_dir() and not placed.is_symlink():
            private_dir(placed)  # 0700, like the directory it replaces
        self.result.placed.append(placed)
        if kept is not None:
            self.result.kept.append(kept)

    def put_db(self, src: Path, target: Path) -> None:
        # the old database's WAL and index go aside with it (same name + suffix: a
        # database opened from the kept copy finds its WAL)
        for suffix in ("-wal", "-shm", "-journal"):
            side = Path(f"{target}{suffix}")
            if side.exists():
                self.done.append(
                    (side, _rename(side, Path(f"{_aside(target, self.stamp)}{suffix}")))
                )
        self.put(src, target)

    def undo(self) -> None:
        for target, kept in reversed(self.done):
            with contextlib.suppress(OSError):
                if target.is_dir() and not target.is_symlink():
                    shutil.rmtree(target)
                elif target.exists() or target.is_symlink():
                    target.unlink()
                if kept is not None:
                    _rename(kept, target)


def _plan(staging: _Staging, swaps: _Swaps) -> list[tuple[Path, Path]]:
    to = staging.to
    plan: list[tuple[Path, Path]] = []
    state = staging.state / "state"
    if state.is_dir():
        plan += [(entry, to.state_dir / entry.name) for entry in sorted(state.iterdir())]
    for agent, ws in sorted(staging.agents.items()):
        plan.append((staging.beside(ws) / "workspaces" / agent, ws))
    left = staging.state / "workspaces"
    for agent in sorted(p.name for p in left.iterdir()) if left.is_dir() else []:
        swaps.result.skipped.append(f"agent {agent}'s workspace (no such agent in this config)")
    for parent, staged in staging.dirs.items():
        for archived in sorted((staged / "config").glob("*")):
            target = staging.config(archived.name)
            if target.parent == parent:
                plan.append((archived, target))
    return plan


def restore(archive: Path, to: Targets, now: float) -> tuple[Unpacked, Restored]:
    """Verify ``archive`` by unpacking it beside each place it goes, then put each piece
    there; ArchiveError (nothing changed) when the archive is not usable or newer."""
    stamp = datetime.fromtimestamp(now, UTC).strftime("%Y%m%dT%H%M%SZ")
    private_dir(to.state_dir)
    staging = _Staging(to)
    try:
        unpacked = unpack(Path(archive), staging.state, staging.where)
        refuse_newer(unpacked)
        swaps = _Swaps(stamp)
        plan = _plan(staging, swaps)
        try:
            swaps.put_db(staging.state / DB_MEMBER, to.state_dir / "chela.sqlite3")
            for src, target in plan:
                swaps.put(src, target)
        except OSError as e:
            swaps.undo()
            raise ArchiveError(
                f"restoring failed ({e.strerror or e}); what was already put back was undone"
            ) from None
        return unpacked, swaps.result
    finally:
        staging.cleanup()
