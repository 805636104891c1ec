"""``chela logs``: the daemon's log file (``<state_dir>/logs/chela.log``, written by
``chela run`` beside stderr), optionally followed and filtered by level."""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections import deque
from pathlib import Path

from bot.cli.common import add_common, load, log_file, positive_int

LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


def add_parser(sub) -> None:
    sp = add_common(
        sub.add_parser("logs", help="show the daemon's log (<state_dir>/logs/chela.log)")
    )
    sp.add_argument("-f", "--follow", action="store_true", help="keep printing new lines")
    sp.add_argument(
        "--level",
        type=str.upper,
        choices=LEVELS,
        default="DEBUG",
        help="only lines at this level or above (default: all)",
    )
    sp.add_argument(
        "-n",
        "--lines",
        type=positive_int,
        default=100,
        help="how many last lines (default 100)",
    )
    sp.set_defaults(func=run)


def level_of(line: str) -> int | None:
    """The level of a log line (``date time LEVEL name: message``); None for a continuation."""
    parts = line.split(" ", 3)
    return LEVELS.index(parts[2]) if len(parts) > 2 and parts[2] in LEVELS else None


class LevelFilter:
    """Keeps lines at ``level`` or above; a traceback's lines follow their record's fate."""

    def __init__(self, level: str) -> None:
        self.min = LEVELS.index(level)
        self.keep = True

    def __call__(self, line: str) -> bool:
        lv = level_of(line)
        if lv is not None:
            self.keep = lv >= self.min
        return self.keep


def run(args: argparse.Namespace) -> int:
    cfg = load(args)
    path = log_file(cfg)
    if not path.exists():
        print(
            f"chela: no log at {path} yet (`chela run` writes it; under systemd also "
            "`journalctl --user -u chela`)",
            file=sys.stderr,
        )
        return 1
    keep = LevelFilter(args.level)
    with path.open(encoding="utf-8", errors="replace") as f:
        for line in deque((ln for ln in f if keep(ln)), maxlen=args.lines):
            sys.stdout.write(line)
        sys.stdout.flush()
        if args.follow:
            follow(path, f, keep)
    return 0


def follow(path: Path, f, keep: LevelFilter, interval: float = 0.25) -> None:
    """Print what is appended, reopening the file when it is rotated; until Ctrl-C."""
    inode = os.fstat(f.fileno()).st_ino
    while True:
        line = f.readline()
        if line:
            if keep(line):
                sys.stdout.write(line)
                sys.stdout.flush()
            continue
        try:
            rotated = path.stat().st_ino != inode
        except FileNotFoundError:
            rotated = False
        if rotated:
            f.close()
            f = path.open(encoding="utf-8", errors="replace")
            inode = os.fstat(f.fileno()).st_ino
            continue
        time.sleep(interval)
