"""``chela hooks list`` (each webhook and mail trigger: its route, scheme, agent, where it
delivers and its last event) and ``chela hooks log [NAME]`` (the event ledger, newest
first: time, source, delivery id, verdict, the turn's result, a one-line summary).
Read-only beside a running daemon."""

from __future__ import annotations

import argparse
import time

from bot.cli.common import add_common, load


def add_parser(sub) -> None:
    sp = add_common(sub.add_parser("hooks", help="webhooks and mail triggers, and their events"))
    sp.add_argument("action", choices=["list", "log"], help="list the triggers, or their events")
    sp.add_argument("name", nargs="?", help="with log: one hook's name, or mail:<name>")
    sp.add_argument("-n", "--limit", type=int, default=50, help="with log: at most this many rows")
    sp.set_defaults(func=run)


def _when(at: float | None) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(at)) if at else ""


def _last(rows: list[dict]) -> str:
    from bot.store.triggers import outcome

    return f"{_when(rows[0]['received'])} {outcome(rows[0])}" if rows else "never"


def run(args: argparse.Namespace) -> int:
    from bot.reports.tables import table
    from bot.store.triggers import read_log

    cfg = load(args)
    if args.action == "log":
        rows = read_log(cfg.db_path, args.name or None, max(1, args.limit))
        if not rows:
            print("no events yet" + (f" for {args.name}" if args.name else ""))
            return 0
        print(
            table(
                ["TIME", "SOURCE", "DELIVERY ID", "VERDICT", "RESULT", "SUMMARY"],
                [
                    [
                        _when(r["received"]),
                        r["source"],
                        r["delivery_id"],
                        r["verdict"],
                        r["result"] or (r["status"] if r["status"] != "done" else ""),
                        r["summary"],
                    ]
                    for r in rows
                ],
            )
        )
        return 0
    out = [
        [
            h.name,
            f"POST /hooks/{h.name}",
            h.scheme,
            h.agent or cfg.agent.id,
            h.deliver,
            _last(read_log(cfg.db_path, h.name, 1)),
        ]
        for h in cfg.hooks
    ]
    out += [
        [
            f"mail:{m.name}",
            f"{m.host}:{m.port}/{m.folder}",
            f"imap ({m.tls})",
            m.agent or cfg.agent.id,
            m.deliver,
            _last(read_log(cfg.db_path, f"mail:{m.name}", 1)),
        ]
        for m in cfg.mail
    ]
    if not out:
        print("no [[hooks]] or [[mail]] in the config")
        return 0
    print(table(["NAME", "ROUTE", "SCHEME", "AGENT", "DELIVER", "LAST EVENT"], out))
    return 0
