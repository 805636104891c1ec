"""``chela dashboard``: a one-time link that logs a browser into the Control UI (SPEC §16.2).

The login code goes into the state database (as its hash), where the daemon finds it when
the page posts it; so this works whether or not the daemon runs, and only for the account
that can read the state dir.  ``--revoke-all`` ends every browser session and unused code.
"""

from __future__ import annotations

import argparse
import sys

from bot.cli.common import add_common, load
from bot.config import Config


def add_parser(sub) -> None:
    sp = add_common(
        sub.add_parser(
            "dashboard",
            help="open the Control UI in a browser with a one-time login link",
            description="Create a one-time login code (valid 2 minutes) and open "
            "http://HOST:PORT/ui/#login=<code> in a browser.",
        )
    )
    sp.add_argument("--print-url", action="store_true", help="print only the link on stdout")
    sp.add_argument("--no-open", action="store_true", help="do not start a browser")
    sp.add_argument(
        "--revoke-all",
        action="store_true",
        help="end every browser session and unused login code instead",
    )
    sp.set_defaults(func=run)


def login_url(cfg: Config) -> str:
    """A new login code in the state database, as the link that uses it.  Raises
    ``StoreError`` when the state database cannot be opened."""
    from bot.store import Store
    from bot.ui.where import ui_base
    from bot.ui.auth import mint_code

    store = Store(cfg.db_path)
    try:
        return f"{ui_base(cfg)}#login={mint_code(store)}"
    finally:
        store.close()


def revoke_all(cfg: Config) -> tuple[int, int]:
    from bot.store import Store

    store = Store(cfg.db_path)
    try:
        return store.revoke_ui_all()
    finally:
        store.close()


def _refusal(cfg: Config) -> str:
    from bot.ui.where import not_served_reason

    reason = not_served_reason(cfg)
    return f"chela: the Control UI is not served: {reason}" if reason else ""


def run(args: argparse.Namespace) -> int:
    from bot.store import StoreError

    cfg = load(args)
    try:
        if args.revoke_all:
            sessions, codes = revoke_all(cfg)
            print(f"ended {sessions} browser session(s) and {codes} unused login code(s)")
            return 0
        refused = _refusal(cfg)
        if refused:
            print(refused, file=sys.stderr)
            return 1
        url = login_url(cfg)
    except StoreError as e:
        print(f"chela: {e}", file=sys.stderr)
        return 1
    _notes(cfg, printed_only=args.print_url)
    print(url)
    if not args.no_open:
        import webbrowser

        webbrowser.open(url)
    return 0


def _notes(cfg: Config, *, printed_only: bool) -> None:
    from bot.app.lock import running_daemon

    if running_daemon(cfg.agent.state_dir) is None:
        print(
            "chela: no daemon is running; start it with `chela run` before opening the link",
            file=sys.stderr,
        )
    if not printed_only:
        print("the link works once, within 2 minutes:", file=sys.stderr)
