"""``chela pairing list`` and ``chela pairing approve CHANNEL CODE``: the DM pairing requests
."""

from __future__ import annotations

import argparse
import sys

from bot.cli.common import add_common, load


def add_parser(sub) -> None:
    sp = add_common(sub.add_parser("pairing", help="DM pairing requests"))
    sp.add_argument(
        "action", choices=["list", "approve"], help="list pending requests, or approve one"
    )
    sp.add_argument("channel", nargs="?", help="with approve: the channel, e.g. telegram")
    sp.add_argument("code", nargs="?", help="with approve: the code the sender got")
    sp.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from bot.store import Store

    cfg = load(args)
    store = Store(cfg.db_path)
    try:
        if args.action == "list":
            return _list(store)
        return _approve(store, args)
    finally:
        store.close()


def _list(store) -> int:
    from bot.reports.tables import table

    rows = store.pairing_requests()
    if not rows:
        print("no pending pairing requests")
        return 0
    print(
        table(
            ["CHANNEL", "CODE", "SENDER ID", "NAME"],
            [[r["channel"], r["code"], r["sender_id"], r["sender_name"] or ""] for r in rows],
        )
    )
    print("approve one with: chela pairing approve CHANNEL CODE")
    return 0


def _approve(store, args: argparse.Namespace) -> int:
    from bot.conversation import pairing_requests as pairing

    if not args.channel or not args.code:
        print("usage: chela pairing approve CHANNEL CODE", file=sys.stderr)
        return 2
    try:
        sender = pairing.approve(store, args.channel, args.code)
    except pairing.PairingError as e:
        print(f"chela: {e}", file=sys.stderr)
        return 1
    print(
        f"approved {args.channel} sender {sender}: they can talk to the assistant now, as a guest. "
        "A running daemon tells them and answers the message that asked."
    )
    return 0
