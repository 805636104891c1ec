"""How jobs and their last ledger rows are shown: the Control UI's schedule list
, ``/cron list`` and ``chela status``."""

from __future__ import annotations

from datetime import datetime, tzinfo
from typing import Any

from bot.schedule.jobs import Job, describe, local

ScheduleService = Any  # the service (bot.schedule.service), not imported: it imports this module


def ui_status(row: dict[str, Any]) -> str:
    """delivered | ack | silent | skipped | failed | running, from a ledger row."""
    if row["status"] in ("running", "skipped"):
        return str(row["status"])
    if row["status"] == "missed":
        return "skipped"
    first = (row.get("detail") or "").split(" ")[0]
    if first in ("delivered", "ack", "silent"):
        return first
    if first in ("queued", "duplicate", "no-target", "dry-run"):
        return "delivered" if first == "queued" else "silent"
    return "failed"


def result_text(row: dict[str, Any] | None, tz: tzinfo | None) -> str:
    """``ran HH:MM``, ``skipped HH:MM (paused)``, ``missed HH:MM``."""
    if row is None:
        return "-"
    at = local(row["due"], tz, "%H:%M")
    marks = [m for m, on in (("manual", row["manual"]), ("catch-up", row["catch_up"])) if on]
    why = row["reason"] if row["status"] != "ran" else row["detail"]
    extra = ", ".join([*marks, why] if why else marks)
    return f"{row['status']} {at}" + (f" ({extra})" if extra else "")


def ui_job(svc: ScheduleService, job: Job) -> dict[str, Any]:
    last = svc.store.ledger_last(job.name)
    nxt = None if svc.paused(job.name) else svc.next_run(job)
    return {
        "name": job.name,
        "kind": "heartbeat" if job.heartbeat else "cron",
        "schedule": describe(job),
        "target": job.target + (f":{job.to}" if job.to else ""),
        "paused": svc.paused(job.name),
        "source": job.source,  # heartbeat | config | tool: only tool jobs are edited
        "spec": {"kind": job.kind, "when": job.spec},
        "prompt": job.prompt if job.source == "tool" else "",
        "next_run": nxt,
        "last_run": last["due"] if last else None,
        "last_result": {"status": ui_status(last), "detail": last["reason"] or last["detail"]}
        if last
        else None,
    }


def heartbeat_off(svc: ScheduleService) -> dict[str, Any]:
    """The heartbeat's row while ``heartbeat.every`` is 0 (off): listed, never due."""
    hb = svc.cfg.heartbeat
    last = svc.store.ledger_last("heartbeat")
    return {
        "name": "heartbeat",
        "kind": "heartbeat",
        "schedule": "off",
        "target": hb.target + (f":{hb.to}" if hb.to else ""),
        "paused": True,
        "source": "heartbeat",
        "spec": {"kind": "every", "when": hb.every},
        "prompt": "",
        "next_run": None,
        "last_run": last["due"] if last else None,
        "last_result": {"status": ui_status(last), "detail": last["reason"] or last["detail"]}
        if last
        else None,
    }


def listing(svc: ScheduleService) -> str:
    """One line per job (``/cron list``, the cron tool's ``list``)."""
    lines = []
    for job in svc.registry.jobs():
        state = "paused" if svc.paused(job.name) else "active"
        nxt = svc.next_run(job)
        when = local(nxt, svc.tz) if nxt is not None and state == "active" else "-"
        last = result_text(svc.store.ledger_last(job.name), svc.tz)
        lines.append(
            f"- {job.name} [{describe(job)}] {job.source}, {state}; next {when}; last {last}"
        )
    return "\n".join(lines) if lines else "No scheduled jobs."


def fmt_local(ts: float, tz: tzinfo | None) -> str:
    when = datetime.fromtimestamp(ts, tz).astimezone(tz)
    zone = getattr(tz, "key", "") or when.tzname() or ""
    return f"{when:%Y-%m-%d %H:%M} {when.tzname()}" + (
        f" ({zone})" if zone and zone != when.tzname() else ""
    )
