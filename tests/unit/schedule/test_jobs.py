"""The job model (SPEC §17.5), pure: times in agent.timezone, the every floor, occurrences of
each kind, and [[cron]]'s keys (``in`` refused, saying to use ``at``)."""

from __future__ import annotations

from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import pytest

from bot.config import ConfigError, parse_config
from bot.schedule.jobs import Job, due_between, next_after, parse_at, parse_every, resolve_in

BERLIN = ZoneInfo("Europe/Berlin")
T = datetime(2026, 11, 27, 6, 0, tzinfo=UTC).timestamp()  # 07:00 in Berlin


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2026-11-27T07:00", T),  # no offset: agent.timezone
        ("2026-11-27T07:00+01:00", T),
        ("2026-11-27T06:00Z", T),
    ],
)
def test_at_without_an_offset_is_in_the_agents_zone(text, expected):
    assert parse_at(text, BERLIN) == expected


def test_a_bad_at_names_the_value():
    with pytest.raises(ValueError, match="'tomorrow'"):
        parse_at("tomorrow", BERLIN)


def test_every_is_at_least_ten_seconds_and_in_is_from_now():
    assert parse_every("10s") == 10
    with pytest.raises(ValueError, match="at least 10s"):
        parse_every("9s")
    assert resolve_in("1h30m", T) == T + 5400
    with pytest.raises(ValueError):
        resolve_in("0s", T)


def test_occurrences_of_each_kind():
    every = Job("e", "every", "1h", anchor=T)
    assert next_after(every, T, None) == T + 3600
    assert next_after(every, T + 3600, None) == T + 7200  # strictly after
    assert due_between(every, T, T + 3 * 3600 + 5, None) == ([T + 3600, T + 7200, T + 10800], 0)
    cron = Job("c", "schedule", "0 7 * * *", anchor=T - 60)
    assert next_after(cron, T - 60, BERLIN) == T
    assert next_after(cron, T, BERLIN) == T + 86400
    at = Job("a", "at", "2026-11-27T07:00", anchor=T - 600)
    assert next_after(at, T - 600, BERLIN) == T and next_after(at, T, BERLIN) is None


def test_a_long_downtime_keeps_the_latest_occurrences_and_counts_the_rest():
    job = Job("e", "every", "10s", anchor=T)
    dues, dropped = due_between(job, T, T + 100_000, None, limit=1000)
    assert len(dues) == 1000 and dropped == 9000 and dues[-1] == T + 100_000


def test_cron_config_takes_at_every_schedule_and_refuses_in():
    base = {"name": "j", "prompt": "p"}
    cfg = parse_config({"cron": [{**base, "at": "2026-11-27T07:00", "catch_up": "0s"}]})
    assert (cfg.cron[0].kind, cfg.cron[0].catch_up_seconds) == ("at", 0)
    with pytest.raises(ConfigError, match="'in' is not accepted.*use at"):
        parse_config({"cron": [{**base, "in": "20m"}]})
    with pytest.raises(ConfigError, match="exactly one of at, every or schedule"):
        parse_config({"cron": [{**base, "every": "1h", "schedule": "0 9 * * *"}]})
