"""``chela context``: the size report of the system prompt."""

from __future__ import annotations

import argparse

from bot.cli.common import add_common, load, need_workspace
from bot.cli.prompt import CHANNEL_CHOICES, prompt_context


def add_parser(sub) -> None:
    sp = add_common(sub.add_parser("context", help="size report of the system prompt"))
    sp.add_argument(
        "kind",
        nargs="?",
        default="list",
        choices=["list", "detail", "json"],
        help="list (default), detail or json",
    )
    sp.add_argument("--channel", choices=CHANNEL_CHOICES, help="the channel the prompt is for")
    sp.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from bot.prompt.report import context_report

    cfg = load(args)
    need_workspace(cfg)
    args.session, args.mode = "main", None
    agent, ctx = prompt_context(args, cfg)
    print(context_report(agent.cache.get(ctx), ctx, args.kind))
    return 0
