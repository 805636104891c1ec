"""``chela backup``: one archive of the state database, every agent's workspace, the config
and channel state (bot/store/backup.py); ``--verify FILE`` checks one."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from bot.cli.common import add_common, load
from bot.config import Config


def add_parser(sub) -> None:
    sp = add_common(
        sub.add_parser(
            "backup",
            help="write a backup archive (database, workspaces, config, channel state)",
        )
    )
    sp.add_argument(
        "--out",
        metavar="FILE",
        type=Path,
        help="where to write it (default: <state_dir>/backups/chela-backup-<host>-<time>.tar.gz)",
    )
    sp.add_argument(
        "--with-media",
        action="store_true",
        help="also archive downloaded media (left out by default)",
    )
    sp.add_argument(
        "--verify",
        metavar="FILE",
        type=Path,
        help="check an archive instead (manifest hashes, database integrity): prints OK or what is wrong",
    )
    sp.set_defaults(func=run)


def size_text(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GB"


def verify(path: Path) -> int:
    from bot.store.restore import ArchiveError
    from bot.store.restore import verify as check

    try:
        check(path)
    except ArchiveError as e:
        print(f"chela: {path}: {e}", file=sys.stderr)
        return 1
    print("OK")
    return 0


def run(args: argparse.Namespace) -> int:
    if args.verify is not None:
        return verify(args.verify)
    cfg = load(args)
    from bot.store.backup import BackupError, take

    try:
        done = take(cfg, out=args.out, with_media=args.with_media)
    except BackupError as e:
        print(f"chela: {e}", file=sys.stderr)
        return 1
    print(
        f"wrote {done.path} ({size_text(done.size)}, {done.members} files, schema "
        f"{done.schema}) in {done.seconds:.1f}s"
    )
    return 0


def status_lines(cfg: Config, now: float | None = None) -> list[str]:
    """``chela status``: the database's schema version and the last backup."""
    import sqlite3

    from bot.store import schema_version
    from bot.store.backup import backups_dir, last_backup

    now = time.time() if now is None else now
    known = schema_version.SCHEMA_VERSION
    try:
        seen = schema_version.read(cfg.db_path)
    except sqlite3.Error:
        seen = None
    if seen is None:
        schema = f"schema: none yet (this Chela writes version {known})"
    elif seen[0] > known:
        schema = f"schema: version {seen[0]}, NEWER than this Chela knows ({known})"
    else:
        schema = f"schema: version {seen[0]}" + (
            f" (migrated to {known} at start)" if seen[0] < known else ""
        )
    last = last_backup(cfg)
    if last is None:
        every = cfg.backup.every if cfg.backup.every_seconds > 0 else "off"
        backup = f"last backup: none in {backups_dir(cfg)} (scheduled: {every}; `chela backup` takes one)"
    else:
        hours = max(0.0, now - last.time) / 3600
        backup = f"last backup: {last.path} ({hours:.1f} h ago)"
    return [schema, backup]
