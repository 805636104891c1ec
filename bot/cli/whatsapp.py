"""``chela whatsapp login|logout|status``: link WhatsApp as a device of a phone (the
``linked_device`` transport, extra ``chela[whatsapp]``), unlink it, or say how it stands.

``login`` shows the QR code in the terminal, a new one each time WhatsApp rotates it, or with
``--phone +NUMBER`` a pairing code to type on that phone; it is refused while a running Chela
holds the account's session (one process per session)."""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

from bot.cli.common import add_common, load

LOGIN_TIMEOUT = 180.0  # seconds to scan the code or type the pairing code
CHANNEL = __name__.rpartition(".")[2]  # a channel's subcommand module is named after it


def add_parser(sub) -> None:
    sp = sub.add_parser(CHANNEL, help="link WhatsApp as a linked device (login, logout)")
    wsub = sp.add_subparsers(dest="whatsapp_cmd", required=True, help="what to do")
    login = _account(add_common(wsub.add_parser("login", help="link this Chela to a phone")))
    login.add_argument(
        "--phone", default=None, help="show a pairing code for this number (+...) instead of a QR"
    )
    login.add_argument(
        "--timeout", type=float, default=LOGIN_TIMEOUT, help="seconds to wait for the link"
    )
    login.set_defaults(func=run_login)
    logout = _account(add_common(wsub.add_parser("logout", help="unlink and forget the session")))
    logout.set_defaults(func=run_logout)
    status = _account(add_common(wsub.add_parser("status", help="is a device linked?")))
    status.set_defaults(func=run_status)


def _account(sp: argparse.ArgumentParser) -> argparse.ArgumentParser:
    sp.add_argument("--account", default="default", help="the WhatsApp account (default: default)")
    return sp


def _session(args: argparse.Namespace) -> Path:
    from channels.whatsapp.linked.session import session_path

    cfg = load(args)
    return session_path(Path(cfg.agent.state_dir).expanduser(), args.account)


def _lock(db: Path):
    """The session's lock, the one the daemon takes (bot/app/lock.py)."""
    from bot.app.lock import StateLock
    from channels.whatsapp.linked.session import lock_name

    return StateLock(db.parent, lock_name(db))


def _holder(db: Path) -> str:
    """The pid of the process using the session, "" when none does."""
    from bot.app.lock import LockHeld

    if not db.parent.is_dir():
        return ""
    lock = _lock(db)
    try:
        lock.acquire()
    except LockHeld as e:
        return str(e.pid or "another process")
    lock.release()
    return ""


def _show_qr(payload: str) -> None:
    import segno

    print("\nScan with WhatsApp > Settings > Linked devices > Link a device:")
    segno.make(payload).terminal(compact=True)
    sys.stdout.flush()


def _show_code(code: str) -> None:
    print(
        f"\nOn the phone: WhatsApp > Settings > Linked devices > Link a device > "
        f"Link with phone number instead, and type: {code}"
    )
    sys.stdout.flush()


def run_login(args: argparse.Namespace) -> int:
    from channels.base import ChannelError
    from channels.whatsapp.linked import session

    db = _session(args)
    print(
        "WhatsApp as a linked device is unofficial: WhatsApp may restrict or ban the number. "
        "Use a dedicated number."
    )
    try:
        jid = asyncio.run(
            session.login(
                db,
                phone=args.phone,
                on_qr=_show_qr,
                on_code=_show_code,
                timeout=args.timeout,
                lock=_lock(db),
            )
        )
    except ChannelError as e:
        print(f"chela: {e}", file=sys.stderr)
        return 1
    print(f"Linked as {jid} (session {db}).")
    return 0


def run_logout(args: argparse.Namespace) -> int:
    from channels.base import ChannelError
    from channels.whatsapp.linked import session

    db = _session(args)
    try:
        asyncio.run(session.logout(db, lock=_lock(db)))
    except ChannelError as e:
        print(f"chela: {e}", file=sys.stderr)
        return 1
    print(f"Unlinked; the session {db} is removed.")
    return 0


def run_status(args: argparse.Namespace) -> int:
    from channels.base import ChannelError
    from channels.whatsapp.linked import session

    db = _session(args)
    try:
        st = session.status(db)
    except ChannelError as e:  # neonize is missing
        print(f"chela: {e}", file=sys.stderr)
        return 1
    if not st["exists"]:
        print(f"whatsapp[{args.account}]: not linked (no session at {db})")
        return 1
    linked = f"linked as {st['jid']}" if st["paired"] else "not linked yet"
    holder = _holder(db)
    used = f"; in use by pid {holder}" if holder else ""
    print(f"whatsapp[{args.account}]: {linked} (session {db}{used})")
    return 0 if st["paired"] else 1
