"""``chela pairing list`` and ``chela pairing approve CHANNEL[:ACCOUNT] CODE``: the DM pairing
requests.  A code belongs to the channel account it was made on (no account: ``default``)."""

from __future__ import annotations

import argparse
import sys

from bot.cli.common import add_common, load
from bot.config import Config


def add_parser(sub) -> None:
    sp = add_common(sub.add_parser("pairing", help="DM pairing requests"))
    sp.add_argument(
        "action", choices=["list", "approve"], help="list pending requests, or approve one"
    )
    sp.add_argument(
        "channel",
        nargs="?",
        help="with approve: the channel, e.g. telegram, or one of its accounts, e.g. telegram:work",
    )
    sp.add_argument("code", nargs="?", help="with approve: the code the sender got")
    sp.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from bot.store import Store

    cfg = load(args)
    store = Store(cfg.db_path)
    try:
        if args.action == "list":
            return _list(store)
        return _approve(cfg, store, args)
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
    print("approve one with: chela pairing approve CHANNEL[:ACCOUNT] CODE")
    return 0


def account_of(cfg: Config, target: str) -> str | None:
    """``CHANNEL[:ACCOUNT]`` as the pairing key of an account the config has (``telegram``,
    ``telegram:work``); None (after saying why on stderr) when it names none."""
    from bot.config import MESSAGING, channel_accounts
    from channels.base import account_key, split_account_key

    channel, account = split_account_key(target.strip().lower())
    if channel not in MESSAGING:
        print(
            f"chela: unknown channel {channel!r} (channels: {', '.join(MESSAGING)})",
            file=sys.stderr,
        )
        return None
    have = channel_accounts(cfg, channel)
    if account != "default" and account not in have:
        names = ", ".join(f"{channel}:{a}" for a in have) or "none enabled"
        print(f"chela: {channel} has no account {account!r} (accounts: {names})", file=sys.stderr)
        return None
    return account_key(channel, account)


def _approve(cfg: Config, store, args: argparse.Namespace) -> int:
    from bot.conversation import pairing_requests as pairing

    if not args.channel or not args.code:
        print("usage: chela pairing approve CHANNEL[:ACCOUNT] CODE", file=sys.stderr)
        return 2
    where = account_of(cfg, args.channel)
    if where is None:
        return 2
    try:
        sender = pairing.approve(store, where, args.code)
    except pairing.PairingError as e:
        print(f"chela: {e}", file=sys.stderr)
        return 1
    print(
        f"approved {where} sender {sender}: they can talk to the assistant now, as a guest. "
        "A running daemon tells them and answers the message that asked."
    )
    return 0
