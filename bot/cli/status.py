"""``chela status``: is a daemon running on this state dir, and what is it doing.

Read-only: the database is opened with ``mode=ro`` and the lock file is only probed, so
running it next to a live daemon changes nothing.
"""

from __future__ import annotations

import argparse
import time
from datetime import datetime

from bot.cli.common import add_common, load
from bot.config import Config
from bot.reports.tables import table
from bot.store import pending, readonly


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


def next_heartbeat(cfg: Config, daemon: dict | None, now: float) -> str:
    """The heartbeat's line: its next run as the jobs table (and the schedule) has it."""
    from bot.agent.turn import zone
    from bot.app.daemon import heartbeat_schedule
    from bot.schedule.registry import heartbeat_job

    job = heartbeat_job(cfg)
    if job is None:
        return "heartbeat: off"
    kept = readonly.schedule_states(cfg.db_path).get(job.name, (0, None, None))
    row = readonly.last_ledger_rows(cfg.db_path).get(job.name)
    if kept[0]:
        return f"heartbeat: {heartbeat_schedule(cfg)}; paused"
    nxt = _next_run(job, kept, row, now, zone(cfg))
    running = daemon and daemon.get("started")
    return f"heartbeat: {heartbeat_schedule(cfg)}; next run {nxt}" + (
        "" if running else ", when the daemon runs"
    )


def _known_jobs(cfg: Config) -> list:
    from bot.schedule.registry import config_jobs, heartbeat_job
    from bot.schedule.jobs import Job

    jobs = [j for j in (heartbeat_job(cfg), *config_jobs(cfg)) if j is not None]
    for name, kind, spec, target, to, anchor in readonly.tool_jobs(cfg.db_path):
        jobs.append(Job(name, kind, spec, target=target, to=to, source="tool", anchor=anchor))
    return jobs


def _job_row(job, kept: tuple, row: dict | None, now: float, tz) -> list[str]:
    from bot.schedule.jobs import describe
    from bot.schedule.views import result_text

    paused = kept[0]
    nxt_s = "-" if paused else _next_run(job, kept, row, now, tz)
    state = "paused" if paused else "active"
    return [job.name, describe(job), job.source, state, nxt_s, result_text(row, tz)]


def _next_run(job, kept: tuple, row: dict | None, now: float, tz) -> str:
    """When the job runs next, counted as the schedule counts it: from its stored anchor
    and after its last ledger row (the table's and the header's one answer)."""
    from bot.schedule.jobs import next_after

    anchor = kept[1]
    anchored = job.with_anchor(anchor if anchor is not None else now)
    try:
        nxt = next_after(anchored, max(now, (row or {}).get("due") or 0), tz)
    except ValueError as e:
        return f"bad schedule: {e}"
    return when(nxt, now) if nxt else "never"


def cron_rows(cfg: Config, now: float) -> list[list[str]]:
    """Every job: schedule, source, state, next run and its last ledger result; one-shot
    jobs that ended in the last 24 h with their result."""
    from bot.agent.turn import zone
    from bot.schedule.views import result_text

    tz = zone(cfg)
    state = readonly.schedule_states(cfg.db_path)
    last = readonly.last_ledger_rows(cfg.db_path)
    out = [
        _job_row(job, state.get(job.name, (0, None, None)), last.get(job.name), now, tz)
        for job in _known_jobs(cfg)
        if not state.get(job.name, (0, None, None))[2]
    ]
    for name, (_, _, ended) in state.items():
        if ended and now - ended < 86400 and name in last:
            out.append([name, "one-shot", "-", "ended", "-", result_text(last[name], tz)])
    return out


def status_text(cfg: Config, now: float | None = None) -> str:
    from bot.app.channels import enabled_labels
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
        out.append(f"channels enabled in the config: {', '.join(enabled_labels(cfg)) or 'none'}")
    from bot.cli.backup import status_lines

    out += status_lines(cfg, now)  # the schema version and the last backup
    out.append(pending.describe(pending.read_view(cfg.db_path), now))  # a model outage
    out.append(next_heartbeat(cfg, daemon, now))
    crons = cron_rows(cfg, now)
    out.append("")
    if crons:
        out.append("cron jobs:")
        out.append(table(["NAME", "SCHEDULE", "SOURCE", "STATE", "NEXT RUN", "LAST"], crons))
    else:
        out.append("cron jobs: none")
    sessions = readonly.sessions_by_activity(cfg.db_path)
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
