"""``chela restore FILE``: put a backup archive back (bot/store/restore.py), refused while a
daemon holds the state dir; checked first, so a bad archive changes nothing."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from bot.cli.common import add_common, load


def add_parser(sub) -> None:
    sp = add_common(
        sub.add_parser("restore", help="restore a backup archive (the daemon must be stopped)")
    )
    sp.add_argument("file", metavar="FILE", type=Path, help="the archive (chela-backup-*.tar.gz)")
    sp.add_argument(
        "--state-dir",
        metavar="DIR",
        type=Path,
        help="restore the state here instead of agent.state_dir (the config in use is then "
        "left alone: the archived one is put beside it as config.toml.restored)",
    )
    sp.add_argument(
        "--workspace",
        metavar="DIR",
        type=Path,
        help="restore the workspace here instead of agent.workspace (as --state-dir, the "
        "config in use is left alone)",
    )
    sp.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    cfg = load(args)
    from bot.app.lock import LockHeld, StateLock
    from bot.fs import private_dir
    from bot.store.backup import workspaces
    from bot.store.restore import ArchiveError, Targets, restore

    elsewhere = args.state_dir is not None or args.workspace is not None
    state_dir = (args.state_dir or cfg.agent.state_dir).expanduser().absolute()
    spaces = workspaces(cfg)
    if args.workspace is not None:
        spaces[cfg.agent.id] = args.workspace.expanduser().absolute()
    source = Path(cfg.source).absolute() if cfg.source is not None else None
    to = Targets(state_dir, spaces, source, config_beside=elsewhere)
    lock = StateLock(private_dir(state_dir))
    try:
        lock.acquire()
    except LockHeld as e:
        who = f"pid {e.pid}" if e.pid else "another process"
        print(
            f"chela: a Chela daemon ({who}) is running on the state dir {state_dir}: stop it "
            "first, then restore; nothing was changed",
            file=sys.stderr,
        )
        return 1
    try:
        unpacked, done = restore(args.file, to, time.time())
    except ArchiveError as e:
        print(f"chela: {args.file}: {e}", file=sys.stderr)
        return 1
    finally:
        lock.release()
    m = unpacked.manifest
    print(
        f"restored {args.file} (taken on {m.get('host')} at {m.get('created')}, Chela "
        f"{m.get('chela_version')}, schema {unpacked.schema})"
    )
    for path in done.placed:
        print(f"  restored {path}")
    for path in done.kept:
        print(f"  kept what it replaced as {path}")
    for what in done.skipped:
        print(f"  not restored: {what}")
    return 0
