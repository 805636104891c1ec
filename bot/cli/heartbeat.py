"""``chela heartbeat``: run one heartbeat now, through the channel it would deliver to."""

from __future__ import annotations

import argparse
import asyncio

from bot.cli.common import add_common, daemon_stopped, load, preload_litellm, setup_logging
from bot.config import Config


def add_parser(sub) -> None:
    sp = add_common(sub.add_parser("heartbeat", help="run one heartbeat now"), log=True)
    sp.add_argument(
        "--dry-run", action="store_true", help="print what would be sent without sending it"
    )
    sp.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    cfg = load(args)
    preload_litellm(cfg)
    setup_logging(cfg, args.log_level or "INFO")
    rc = asyncio.run(_heartbeat(cfg, args.dry_run))
    daemon_stopped()
    return rc


async def _heartbeat(cfg: Config, dry_run: bool) -> int:
    from bot.app.daemon import Daemon, build_channel
    from bot.schedule import resolve_target
    from bot.store import Store
    from channels.base import account_key

    # start only the channel the heartbeat would deliver to
    probe = Store(cfg.db_path)
    route = resolve_target(probe, cfg, cfg.heartbeat.target, cfg.heartbeat.to)
    probe.close()
    channels = {}
    if route and not dry_run:
        ch, account = route["channel"], route.get("account") or "default"  # the route's own bot
        channels[account_key(ch, account)] = build_channel(cfg, ch, account=account)
    # send-only: a running daemon keeps its updates and its stored messages
    daemon = Daemon(cfg, channels=channels, scheduler=False, receive=False)
    await daemon.start()
    if daemon.mcp is not None:  # the heartbeat's one turn gets the same tools as the daemon's
        await daemon.mcp.settled()
    try:
        assert daemon.scheduled is not None  # built by start()
        out = await daemon.scheduled.heartbeat(dry_run=dry_run)
    finally:
        await daemon.stop()
    print(out.describe())
    return 0 if out.status != "failed" else 1
