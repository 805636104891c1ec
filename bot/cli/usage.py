"""``chela usage``: tokens and cost of the model calls, per day and model."""

from __future__ import annotations

import argparse
import json
import sys

from bot.cli.common import add_common, load, positive_int


def add_parser(sub) -> None:
    sp = add_common(
        sub.add_parser("usage", help="tokens and cost of the model calls, per day and model")
    )
    sp.add_argument(
        "--days",
        type=positive_int,
        default=7,
        metavar="N",
        help="the last N days, today included (default 7)",
    )
    sp.add_argument("--agent", metavar="ID", help="only the model calls made for this agent")
    sp.add_argument("--json", action="store_true", help="print the report as JSON")
    sp.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from bot.store import Store
    from bot.reports.usage import usage_report, usage_table

    from bot.config import agent_ids

    cfg = load(args)
    if args.agent is not None and args.agent not in agent_ids(cfg):
        known = ", ".join(agent_ids(cfg))
        print(f"chela usage: unknown agent {args.agent!r} (agents: {known})", file=sys.stderr)
        return 2
    if not cfg.db_path.exists():  # nothing recorded yet; do not create a database for that
        report = usage_report(cfg, Store(":memory:"), args.days, args.agent)
    else:
        store = Store(cfg.db_path)
        try:
            report = usage_report(cfg, store, args.days, args.agent)
        finally:
            store.close()
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        whose = f" of agent {args.agent}" if args.agent is not None else ""
        days = f"{args.days} day{'s' if args.days != 1 else ''}"
        print(f"model calls{whose} since {report['since']} ({days})")
        print(usage_table(report))
    return 0
