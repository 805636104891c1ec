"""``chela run``: the daemon, with every enabled channel."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys

from bot.cli.common import (
    add_common,
    add_log_file,
    daemon_stopped,
    load,
    setup_logging,
)
from bot.config import ConfigError

log = logging.getLogger("chela.run")


def add_parser(sub) -> None:
    add_common(sub.add_parser("run", help="run the daemon"), log=True).set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    cfg = load(args)
    from bot.cli.validate import validate
    from bot.app.daemon import Daemon
    from bot.app.lock import LockHeld

    setup_logging(cfg, args.log_level or "INFO")
    try:
        add_log_file(cfg)  # stderr and <state_dir>/logs/chela.log (`chela logs`)
    except OSError as e:  # the state dir is a file, read-only, full: say where, no traceback
        print(
            f"chela: cannot write the log under {cfg.agent.state_dir} (agent.state_dir): "
            f"{e.strerror or e}",
            file=sys.stderr,
        )
        return 1
    verdict = validate(cfg)  # the same verdict as `chela check`: its errors, its warnings
    if verdict.errors:
        for problem in verdict.errors:
            print(f"chela: {problem}", file=sys.stderr)
        return 1
    for w in verdict.warnings:
        log.warning("%s", w)
    os.umask(0o077)  # whatever Chela or its commands create is private
    from bot.store import StoreError

    try:
        rc = asyncio.run(Daemon(cfg, config_check=validate).run())
    except (
        ConfigError,
        StoreError,
        LockHeld,
    ) as e:  # named and explained; never a traceback
        print(f"chela: {e}", file=sys.stderr)
        return 1
    daemon_stopped()
    return rc
