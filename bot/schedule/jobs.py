"""What a scheduled job is and when it is due: pure, no clock reads.

A job has exactly one of ``at`` (one ISO date-time), ``every`` (a duration, at least 10 s,
on a grid from a stored anchor), ``schedule`` (crontab in ``agent.timezone``) or, for the
heartbeat, ``every`` without the 10 s floor.  ``in`` exists only when a job is created: it
is resolved to an absolute ``at`` against the server clock by :func:`resolve_in`.  Times
are Unix seconds; zones are ``ZoneInfo`` (None: the host's zone)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from datetime import datetime, tzinfo
from typing import Any, Literal

from bot.config.durations import parse_duration

Kind = Literal["at", "every", "schedule"]
KINDS: tuple[Kind, ...] = ("at", "every", "schedule")
MIN_EVERY = 10.0  # seconds; the heartbeat (heartbeat.every) is not held to it
DEFAULT_CATCH_UP = 3600.0
HEARTBEAT = "heartbeat"  # the heartbeat's name in the ledger, the UI and chela status


@dataclass(frozen=True)
class Job:
    name: str
    kind: Kind
    spec: str  # the ISO time (at), the duration (every) or the crontab line (schedule)
    prompt: str = ""
    target: str = "last"
    to: str = ""
    catch_up: float = DEFAULT_CATCH_UP
    source: Literal["config", "tool", "heartbeat"] = "config"
    anchor: float = 0.0  # at: the time itself; every: the grid's origin; schedule: first seen
    route: dict[str, Any] = field(default_factory=dict)  # a tool job's chat of origin
    agent: str = ""  # the agent whose turn it runs; "" = the default agent

    @property
    def one_shot(self) -> bool:
        return self.kind == "at"

    @property
    def heartbeat(self) -> bool:
        return self.source == "heartbeat"

    def with_anchor(self, anchor: float) -> Job:
        return replace(self, anchor=anchor)


def parse_at(value: str, tz: tzinfo | None) -> float:
    """An ISO 8601 date-time as Unix seconds; without an offset it is in ``tz`` (the host's
    zone when None).  ValueError names the value."""
    try:
        when = datetime.fromisoformat(value.strip())
    except (ValueError, AttributeError):
        raise ValueError(
            f"bad time {value!r}: use an ISO 8601 date-time such as 2026-11-27T07:30"
        ) from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=tz) if tz is not None else when.astimezone()
    return when.timestamp()


def parse_every(value: str, *, floor: float = MIN_EVERY) -> float:
    seconds = parse_duration(value)
    if seconds < floor:
        raise ValueError(f"every = {value!r} is too short: at least {floor:g}s")
    return seconds


def check_crontab(value: str) -> str:
    from apscheduler.triggers.cron import CronTrigger

    try:
        CronTrigger.from_crontab(value)
    except ValueError as e:
        raise ValueError(f"bad crontab expression {value!r}: {e}") from None
    return value


def resolve_in(value: str, now: float) -> float:
    """``in``: a duration from now, as the absolute time it names."""
    seconds = parse_duration(value)
    if seconds <= 0:
        raise ValueError(f"in = {value!r}: use a duration such as '20m' or '2h'")
    return now + seconds


def check_spec(kind: str, spec: str, tz: tzinfo | None) -> None:
    """ValueError when ``spec`` is not a valid ``kind`` (the message names it)."""
    if kind == "at":
        parse_at(spec, tz)
    elif kind == "every":
        parse_every(spec)
    elif kind == "schedule":
        check_crontab(spec)
    else:
        raise ValueError(f"unknown kind {kind!r}; use at, in, every or schedule")


def _cron_next(spec: str, after: float, tz: tzinfo | None) -> float | None:
    from apscheduler.triggers.cron import CronTrigger

    trig = CronTrigger.from_crontab(spec, timezone=tz)
    start = datetime.fromtimestamp(after, trig.timezone)
    nxt = trig.get_next_fire_time(None, start)
    if nxt is not None and nxt.timestamp() <= after:  # the trigger may return `after` itself
        nxt = trig.get_next_fire_time(nxt, datetime.fromtimestamp(after + 1, trig.timezone))
    return nxt.timestamp() if nxt is not None else None


def every_seconds(job: Job) -> float:
    return parse_every(job.spec, floor=0.001 if job.heartbeat else MIN_EVERY)


def next_after(job: Job, after: float, tz: tzinfo | None) -> float | None:
    """The job's first occurrence strictly after ``after`` (None: no more)."""
    if job.kind == "at":
        at = parse_at(job.spec, tz)
        return at if at > after else None
    if job.kind == "every":
        step = every_seconds(job)
        k = max(1, math.floor((after - job.anchor) / step) + 1)
        due = job.anchor + k * step
        return due if due > after else due + step
    return _cron_next(job.spec, after, tz)


def due_between(
    job: Job, after: float, upto: float, tz: tzinfo | None, limit: int = 1000
) -> tuple[list[float], int]:
    """The occurrences in ``(after, upto]``, the latest ``limit`` of them, and how many
    earlier ones were left out (a long downtime of a frequent job)."""
    if job.kind == "every":
        step = every_seconds(job)
        first = next_after(job, after, tz)
        if first is None or first > upto:
            return [], 0
        count = math.floor((upto - first) / step) + 1
        start = max(0, count - limit)
        return [first + k * step for k in range(start, count)], start
    found: list[float] = []
    dropped = 0
    t = after
    while True:
        nxt = next_after(job, t, tz)
        if nxt is None or nxt > upto:
            break
        found.append(nxt)
        if len(found) > limit:
            found.pop(0)
            dropped += 1
        t = nxt
    return found, dropped


def describe(job: Job) -> str:
    """The schedule as ``chela status`` and the UI show it."""
    if job.kind == "schedule":
        return job.spec
    return f"{job.kind} {job.spec}"


def local(ts: float, tz: tzinfo | None, fmt: str = "%Y-%m-%d %H:%M %Z") -> str:
    return datetime.fromtimestamp(ts, tz).astimezone(tz).strftime(fmt)
