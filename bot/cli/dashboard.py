"""``chela dashboard``: a one-time link that logs a browser into the Control UI.

The login code goes into the state database (as its hash), where the daemon finds it when
the page posts it; so this works whether or not the daemon runs, and only for the account
that can read the state dir.  ``--revoke-all`` ends every browser session and unused code.

The browser is never given the link itself: a command line is readable by every local user
(``ps``, ``/proc/<pid>/cmdline``) and the code in it would work for them until used.  It is
given a file instead, 0600 in a 0700 directory of the state dir, whose script goes on to the
link (the fragment kept); files older than a code's life are removed at the next run.
"""

from __future__ import annotations

import argparse
import html
import json
import secrets
import sys
import time
from pathlib import Path

from bot.cli.common import add_common, load
from bot.config import Config

OPENER_DIR = "dashboard"  # under the state dir, 0700
OPENER_KEEP = 120.0  # seconds: a login code's life; older opener files are removed


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

        webbrowser.open(opener_file(cfg, url).as_uri())
    return 0


def opener_file(cfg: Config, url: str) -> Path:
    """A new private HTML file whose script goes on to ``url`` (what the browser is given in
    place of the link, so that the code is never on its command line)."""
    from bot import fs

    folder = fs.private_dir(Path(cfg.agent.state_dir) / OPENER_DIR)
    _sweep(folder)
    path = folder / f"login-{secrets.token_hex(8)}.html"
    fs.write_private(path, _opener_html(url).encode())  # 0600, no link followed
    return path


def _opener_html(url: str) -> str:
    # location.replace keeps the fragment (the code) and leaves no history entry; "</" is
    # escaped so the URL cannot end the script element
    target = json.dumps(url).replace("</", "<\\/")
    return (
        '<!doctype html>\n<meta charset="utf-8">\n<meta name="referrer" content="no-referrer">\n'
        "<title>Chela</title>\n"
        f"<script>location.replace({target});</script>\n"
        f'<p><a href="{html.escape(url, quote=True)}">Open the Control UI</a></p>\n'
    )


def _sweep(folder: Path) -> None:
    """Remove opener files whose code has expired (a browser may still be reading newer ones)."""
    now = time.time()
    for old in folder.glob("login-*.html"):
        try:
            if now - old.lstat().st_mtime > OPENER_KEEP:
                old.unlink()
        except OSError:
            pass


def _notes(cfg: Config, *, printed_only: bool) -> None:
    from bot.app.lock import running_daemon

    if running_daemon(cfg.agent.state_dir) is None:
        print(
            "chela: no daemon is running; start it with `chela run` before opening the link",
            file=sys.stderr,
        )
    if not printed_only:
        print("the link works once, within 2 minutes:", file=sys.stderr)
