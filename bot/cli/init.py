"""``chela init``: a workspace with starter files; ``--write-examples`` copies the example
config and systemd units."""

from __future__ import annotations

import argparse
from pathlib import Path

from bot.cli.common import add_common, load


def add_parser(sub) -> None:
    sp = add_common(sub.add_parser("init", help="create a workspace with starter files"))
    sp.add_argument(
        "--workspace", metavar="DIR", help="the workspace to create (default: agent.workspace)"
    )
    sp.add_argument(
        "--write-examples",
        metavar="DIR",
        help="also copy config.example.toml and the systemd units into DIR (never overwrites)",
    )
    sp.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from bot.prompt.init import init_workspace

    if args.write_examples:
        from bot.cli.onboard import write_examples

        dest = Path(args.write_examples).expanduser()
        written = write_examples(dest)
        for p in written:
            print(f"wrote {p}")
        if not written:
            print(f"{dest}: the examples are already there (existing files are never overwritten)")
        if not args.workspace:
            return 0
    ws = Path(args.workspace).expanduser() if args.workspace else load(args).agent.workspace
    created = init_workspace(ws)
    for p in created:
        print(f"created {p}")
    if not created:
        print(f"{ws}: nothing to do (existing files are never overwritten)")
    return 0
