"""``chela sessions``: list the conversations, show or export one, reset one.

Reads the state database next to a running daemon (SQLite allows it); ``reset`` starts the
session afresh as ``/reset`` does in the chat: the old messages stay stored, out of view."""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

from bot.cli.common import add_common, load


def add_parser(sub) -> None:
    sp = add_common(
        sub.add_parser("sessions", help="list, show, export or reset the conversations")
    )
    verbs = sp.add_subparsers(
        dest="verb", required=True, metavar="VERB", help="list, show, export or reset"
    )
    verbs.add_parser("list", help="every session, most recently used first")
    show = verbs.add_parser("show", help="the transcript of one session")
    show.add_argument("key", help="the session key (see `chela sessions list`)")
    show.add_argument("--json", action="store_true", help="print the messages as JSON")
    export = verbs.add_parser("export", help="the transcript as Markdown or JSON")
    export.add_argument("key", help="the session key (see `chela sessions list`)")
    export.add_argument("--format", choices=["md", "json"], default="md", help="default md")
    reset = verbs.add_parser("reset", help="start the session afresh (as /reset does)")
    reset.add_argument("key", help="the session key (see `chela sessions list`)")
    sp.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from bot.store import Store

    cfg = load(args)
    if not cfg.db_path.exists():
        print("no sessions yet (nothing has been stored)", file=sys.stderr)
        return 0 if args.verb == "list" else 1
    store = Store(cfg.db_path)
    try:
        return VERBS[args.verb](store, args)
    finally:
        store.close()


def _list(store: Any, args: argparse.Namespace) -> int:
    from bot.reports.tables import table

    rows = [
        [s["key"], _when(s["updated"]), str(s["messages"]), f"{s['usage_in']}/{s['usage_out']}"]
        for s in store.sessions_list()
    ]
    if not rows:
        print("no sessions yet")
        return 0
    print(table(["session", "last used", "messages", "tokens in/out"], rows))
    return 0


def _known(store: Any, key: str) -> list[dict] | None:
    if not any(s["key"] == key for s in store.sessions_list()):
        print(f"chela: no session {key!r} (see `chela sessions list`)", file=sys.stderr)
        return None
    return store.transcript(key)


def _show(store: Any, args: argparse.Namespace) -> int:
    messages = _known(store, args.key)
    if messages is None:
        return 1
    print(json.dumps(messages, indent=2, ensure_ascii=False) if args.json else _text(messages))
    return 0


def _export(store: Any, args: argparse.Namespace) -> int:
    messages = _known(store, args.key)
    if messages is None:
        return 1
    if args.format == "json":
        print(json.dumps({"session": args.key, "messages": messages}, indent=2, ensure_ascii=False))
    else:
        print(f"# {args.key}\n\n{_markdown(messages)}")
    return 0


def _reset(store: Any, args: argparse.Namespace) -> int:
    if _known(store, args.key) is None:
        return 1
    store.reset_session(args.key)
    print(f"session {args.key} starts afresh (its old messages stay stored, out of view)")
    return 0


VERBS = {"list": _list, "show": _show, "export": _export, "reset": _reset}


def _when(t: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(t))


def _content(m: dict) -> str:
    c = m.get("content")
    if isinstance(c, list):  # parts: text and image references
        c = " ".join(p.get("text", f"[{p.get('type', 'part')}]") for p in c if isinstance(p, dict))
    text = c or ""
    calls = [tc.get("function", {}).get("name", "?") for tc in m.get("tool_calls") or []]
    if calls:
        text = (text + "\n" if text else "") + f"[calls {', '.join(calls)}]"
    return text


def _text(messages: list[dict]) -> str:
    return "\n".join(
        f"[{_when(m['created'])}] {m.get('role', '?')}: {_content(m)}" for m in messages
    )


def _markdown(messages: list[dict]) -> str:
    return "\n\n".join(
        f"**{m.get('role', '?')}** ({_when(m['created'])})\n\n{_content(m)}" for m in messages
    )
