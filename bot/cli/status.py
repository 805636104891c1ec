"""``chela status``: is a daemon running on this state dir, and what is it doing.

Read-only: the database is opened with ``mode=ro`` and the lock file is only probed, so
running it next to a live daemon changes nothing.
"""

from __future__ import annotations

import argparse
import math
import sqlite3
import time
from datetime import datetime, UTC

from bot.cli.common import add_common, load
from bot.config import Config
from bot.reports.tables import table


def add_parser(sub) -> None:
    add_common(
        sub.add_parser(
            "status",
            help="the running daemon, its channels, sessions, next heartbeat and cron runs",
        )
    ).set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    print(status_text(load(args)))
    return 0


def ago(ts: float, now: float) -> str:
    d = max(0.0, now - ts)
    if d < 90:
        return f"{d:.0f}s ago"
    if d < 90 * 60:
        return f"{d / 60:.0f}m ago"
    if d < 36 * 3600:
        return f"{d / 3600:.1f}h ago"
    return f"{d / 86400:.1f}d ago"


def when(ts: float, now: float) -> str:
    local = datetime.fromtimestamp(ts).astimezone()
    d = max(0.0, ts - now)
    rel = (
        f"in {d:.0f}s" if d < 90 else f"in {d / 60:.0f}m" if d < 90 * 60 else f"in {d / 3600:.1f}h"
    )
    return f"{local:%Y-%m-%d %H:%M:%S} ({rel})"


def _rows(cfg: Config, sql: str) -> list[tuple] | None:
    db = cfg.db_path
    if not db.is_file():
        return None
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return conn.execute(sql).fetchall()
    except sqlite3.Error:
        return None
    finally:
        conn.close()


def next_heartbeat(cfg: Config, daemon: dict | None, now: float) -> str:
    from bot.app.daemon import heartbeat_schedule

    every = cfg.heartbeat.every_seconds
    sched = heartbeat_schedule(cfg)
    if every <= 0:
        return "heartbeat: off"
    if not daemon or not daemon.get("started"):
        return f"heartbeat: {sched}; next run when the daemon runs"
    # APScheduler's interval trigger fires at start + k * every
    started = float(daemon["started"])
    k = max(1, math.ceil((now - started) / every))
    return f"heartbeat: {sched}; next run {when(started + k * every, now)}"


def cron_rows(cfg: Config, now: float) -> list[list[str]]:
    from apscheduler.triggers.cron import CronTrigger

    from bot.agent.turn import zone

    jobs = [(j.name, j.schedule, "config") for j in cfg.cron]
    jobs += [
        (r[0], r[1], "tool")
        for r in (_rows(cfg, "SELECT name, schedule FROM cron_jobs ORDER BY name") or [])
    ]
    tz = zone(cfg)
    out = []
    for name, schedule, source in jobs:
        try:
            trig = CronTrigger.from_crontab(schedule, timezone=tz or None)
            nxt = trig.get_next_fire_time(
                None, datetime.fromtimestamp(now, UTC).astimezone(trig.timezone)
            )
            nxt_s = when(nxt.timestamp(), now) if nxt else "never"
        except ValueError as e:
            nxt_s = f"bad schedule: {e}"
        out.append([name, schedule, source, nxt_s])
    return out


def status_text(cfg: Config, now: float | None = None) -> str:
    from bot.app.channels import enabled_channels
    from bot.app.lock import running_daemon

    now = time.time() if now is None else now
    daemon = running_daemon(cfg.agent.state_dir)
    out = [
        f"config: {cfg.source or '(no config file; defaults)'}",
        f"state dir: {cfg.agent.state_dir}",
    ]
    if daemon:
        since = (
            f", up since {datetime.fromtimestamp(daemon['started']).astimezone():%Y-%m-%d %H:%M:%S}"
            if daemon.get("started")
            else ""
        )
        starting = (
            " (starting)" if not daemon.get("started") or daemon.get("ready") is False else ""
        )
        out.append(f"daemon: running (pid {daemon.get('pid')}{since}){starting}")
        chans = daemon.get("channels")  # the channels up now, written as each one starts
        out.append(f"channels: {', '.join(chans) if chans else 'none'}")
        if daemon.get("http"):
            out.append(f"HTTP API: http://{daemon['http']}")
    else:
        out.append("daemon: not running (start it with `chela run`)")
        out.append(f"channels enabled in the config: {', '.join(enabled_channels(cfg)) or 'none'}")
    out.append(next_heartbeat(cfg, daemon, now))
    crons = cron_rows(cfg, now)
    out.append("")
    if crons:
        out.append("cron jobs:")
        out.append(table(["NAME", "SCHEDULE", "SOURCE", "NEXT RUN"], crons))
    else:
        out.append("cron jobs: none")
    sessions = _rows(
        cfg, "SELECT key, updated, usage_in, usage_out FROM sessions ORDER BY updated DESC"
    )
    out.append("")
    if not sessions:
        out.append("sessions: none yet")
    else:
        out.append("sessions:")
        out.append(
            table(
                ["SESSION", "LAST ACTIVITY", "TOKENS IN", "TOKENS OUT"],
                [[k, ago(u, now), f"{i:,}", f"{o:,}"] for k, u, i, o in sessions],
            )
        )
    return "\n".join(out)
