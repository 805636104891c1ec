"""Table-driven tests for bot.rules.heartbeat (SPEC §6)."""

from __future__ import annotations

from datetime import UTC, datetime, tzinfo
from zoneinfo import ZoneInfo

import pytest

from bot.rules.heartbeat import (
    HeartbeatDecision,
    decide,
    heartbeat_user_message,
    in_active_hours,
    is_duplicate_alert,
    is_effectively_empty,
    parse_duration,
    parse_hhmm,
)

PARIS = ZoneInfo("Europe/Paris")

# ---------------------------------------------------------------------------
# is_effectively_empty
# ---------------------------------------------------------------------------

EMPTY = {
    "empty string": "",
    "blank lines": "\n\n   \n\t\n",
    "crlf blanks": "\r\n\r\n",
    "headings only": "# Heartbeat\n\n## Checks\n###### deep\n#\n##   \n",
    "heading with closing hashes": "## Tasks ##\n",
    "indented heading": "   # Tasks\n",
    "empty dash item": "-\n- \n",
    "empty star and plus items": "*\n+\n",
    "empty ordered items": "1.\n2)\n10.\n",
    "empty checkboxes": "- [ ]\n- [x]\n- [X]\n* [ ]\n+ []\n1. [ ]\n",
    "nested empty checkbox": "- [ ]\n  - [ ]\n",
    "bare checkbox": "[ ]\n",
    "checkbox without space": "-[ ]\n",
    "fence lines only": "```\n```\n",
    "fence with info string": "```markdown\n```\n~~~python\n~~~\n",
    "long fences": "````\n````\n",
    "html comment": "<!-- add tasks here -->\n",
    "multi-line comment": "<!--\nKeep this file empty to skip heartbeats.\n- [ ] example task\n-->\n",
    "two comments on one line": "<!-- a --> <!-- b -->\n",
    "front matter": "---\ntitle: heartbeat\ntags: [a, b]\n---\n# Tasks\n",
    "front matter closed with dots": "---\nx: 1\n...\n",
    "bom then heading": "\ufeff# Tasks\n",
    "starter template": (
        "# HEARTBEAT.md\n\n<!-- Add short checklist items below. -->\n\n## Tasks\n\n- [ ]\n"
    ),
}

CONTENT = {
    "hash without space": "#TODO\n",
    "seven hashes": "####### too deep\n",
    "checkbox with text": "- [ ] water plants\n",
    "checked checkbox with text": "- [x] done already\n",
    "list item with text": "- check mail\n",
    "ordered item with text": "1. check mail\n",
    "plain sentence": "Check the build status and tell me if it failed.\n",
    "sentence after headings": "# Tasks\n\nRemind me to stretch.\n",
    "text inside fence": "```\ncurl example.org\n```\n",
    "text after comment": "<!-- note --> ping the server\n",
    "unclosed comment": "<!-- start\nwater plants\n",
    "text after front matter": "---\na: 1\n---\ncall mom\n",
    "unclosed front matter": "---\nreal task\n",
    "horizontal rule text": "***bold task***\n",
    "single word": "x",
}


@pytest.mark.parametrize("text", EMPTY.values(), ids=EMPTY.keys())
def test_effectively_empty(text):
    assert is_effectively_empty(text) is True


@pytest.mark.parametrize("text", CONTENT.values(), ids=CONTENT.keys())
def test_has_content(text):
    assert is_effectively_empty(text) is False


# ---------------------------------------------------------------------------
# parse_hhmm
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text,allow_24,minutes",
    [
        ("00:00", False, 0),
        ("08:00", False, 480),
        ("8:05", False, 485),
        ("23:59", False, 1439),
        (" 12:30 ", False, 750),
        ("24:00", True, 1440),
        ("23:59", True, 1439),
    ],
)
def test_parse_hhmm_ok(text, allow_24, minutes):
    assert parse_hhmm(text, allow_24=allow_24) == minutes


@pytest.mark.parametrize(
    "text,allow_24",
    [
        ("24:00", False),
        ("24:01", True),
        ("25:00", True),
        ("12:60", False),
        ("1200", False),
        ("12:5", False),
        ("noon", False),
        ("", False),
        ("-1:00", False),
        ("12:00:00", False),
    ],
)
def test_parse_hhmm_errors(text, allow_24):
    with pytest.raises(ValueError) as err:
        parse_hhmm(text, allow_24=allow_24)
    assert repr(text) in str(err.value)


def test_parse_hhmm_24_message_is_clear():
    with pytest.raises(ValueError, match="only allowed as the end"):
        parse_hhmm("24:00", allow_24=False)


# ---------------------------------------------------------------------------
# in_active_hours
# ---------------------------------------------------------------------------


def at(hh: int, mm: int, tz=UTC, second: int = 0) -> datetime:
    return datetime(2026, 11, 21, hh, mm, second, tzinfo=tz)


@pytest.mark.parametrize(
    "start,end,hh,mm,expected",
    [
        # plain window: start inclusive, end exclusive
        ("08:00", "22:00", 8, 0, True),
        ("08:00", "22:00", 7, 59, False),
        ("08:00", "22:00", 21, 59, True),
        ("08:00", "22:00", 22, 0, False),
        ("08:00", "22:00", 12, 0, True),
        ("08:00", "22:00", 0, 0, False),
        # wraps midnight
        ("22:00", "06:00", 23, 0, True),
        ("22:00", "06:00", 22, 0, True),
        ("22:00", "06:00", 21, 59, False),
        ("22:00", "06:00", 0, 0, True),
        ("22:00", "06:00", 5, 59, True),
        ("22:00", "06:00", 6, 0, False),
        ("22:00", "06:00", 12, 0, False),
        # 24:00 is the end of the day
        ("08:00", "24:00", 23, 59, True),
        ("08:00", "24:00", 0, 0, False),
        ("08:00", "24:00", 7, 59, False),
        ("00:00", "24:00", 0, 0, True),
        ("00:00", "24:00", 23, 59, True),
        # start == end: never
        ("09:00", "09:00", 9, 0, False),
        ("09:00", "09:00", 12, 0, False),
        ("00:00", "00:00", 0, 0, False),
    ],
)
def test_in_active_hours_table(start, end, hh, mm, expected):
    assert in_active_hours(at(hh, mm), start, end, UTC) is expected


def test_end_minute_with_seconds_is_still_inside():
    assert in_active_hours(at(5, 59, second=59), "22:00", "06:00", UTC) is True


@pytest.mark.parametrize(
    "utc_hh,utc_mm,expected",
    [
        # 21 Nov 2026: Paris is UTC+1, so 08:00-22:00 Paris is 07:00-21:00 UTC
        (6, 59, False),
        (7, 0, True),
        (20, 59, True),
        (21, 0, False),
    ],
)
def test_timezone_conversion(utc_hh, utc_mm, expected):
    assert in_active_hours(at(utc_hh, utc_mm), "08:00", "22:00", PARIS) is expected


def test_timezone_conversion_summer_time():
    # July: Paris is UTC+2; 06:30 UTC is 08:30 Paris
    now = datetime(2026, 7, 1, 6, 30, tzinfo=UTC)
    assert in_active_hours(now, "08:00", "22:00", PARIS) is True
    assert in_active_hours(now, "08:00", "22:00", UTC) is False


def test_other_zone_input_is_converted():
    tokyo = at(16, 0, tz=ZoneInfo("Asia/Tokyo"))  # 07:00 UTC, 08:00 Paris
    assert in_active_hours(tokyo, "08:00", "22:00", PARIS) is True
    assert in_active_hours(tokyo, "08:01", "22:00", PARIS) is False


def test_naive_datetime_rejected():
    with pytest.raises(ValueError):
        in_active_hours(datetime(2026, 1, 1, 12, 0), "08:00", "22:00", UTC)


def test_bad_window_raises():
    with pytest.raises(ValueError):
        in_active_hours(at(12, 0), "8am", "22:00", UTC)
    with pytest.raises(ValueError):
        in_active_hours(at(12, 0), "24:00", "06:00", UTC)


# ---------------------------------------------------------------------------
# decide
# ---------------------------------------------------------------------------

WINDOW = ("08:00", "22:00", UTC)
TASKS = "- [ ] water plants\n"
EMPTY_MD = "# Heartbeat\n\n- [ ]\n"


@pytest.mark.parametrize(
    "md,hh,window,busy,run,reason",
    [
        (TASKS, 12, WINDOW, False, True, None),
        (None, 12, WINDOW, False, True, None),
        (None, 12, None, False, True, None),
        (TASKS, 12, None, False, True, None),
        (EMPTY_MD, 12, WINDOW, False, False, "HEARTBEAT.md is empty"),
        ("", 12, None, False, False, "HEARTBEAT.md is empty"),
        (TASKS, 12, WINDOW, True, False, "main session busy"),
        (None, 12, WINDOW, True, False, "main session busy"),
        (TASKS, 23, WINDOW, False, False, "outside active hours"),
        (None, 3, WINDOW, False, False, "outside active hours"),
        # order: active hours first, then emptiness, then busy
        (EMPTY_MD, 23, WINDOW, True, False, "outside active hours"),
        (EMPTY_MD, 12, WINDOW, True, False, "HEARTBEAT.md is empty"),
        # start == end never runs
        (TASKS, 12, ("09:00", "09:00", UTC), False, False, "outside active hours"),
    ],
)
def test_decide_table(md, hh, window, busy, run, reason):
    d = decide(heartbeat_md=md, now=at(hh, 0), active_hours=window, main_session_busy=busy)
    assert isinstance(d, HeartbeatDecision)
    assert d.run is run
    if reason is not None:
        assert d.reason == reason
    else:
        assert isinstance(d.reason, str) and d.reason


def test_decide_missing_file_runs():
    d = decide(heartbeat_md=None, now=at(12, 0), active_hours=None, main_session_busy=False)
    assert d == HeartbeatDecision(True, d.reason)
    assert d.run


def test_busy_defers_then_runs_when_free():
    kwargs = dict(heartbeat_md=TASKS, now=at(12, 0), active_hours=WINDOW)
    assert decide(**kwargs, main_session_busy=True).run is False
    assert decide(**kwargs, main_session_busy=False).run is True


def test_decide_requires_keywords():
    with pytest.raises(TypeError):
        decide(TASKS, at(12, 0), None, False)  # type: ignore[misc]


# ---------------------------------------------------------------------------
# parse_duration
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text,seconds",
    [
        ("30m", 1800.0),
        ("1h", 3600.0),
        ("90s", 90.0),
        ("1h30m", 5400.0),
        ("0m", 0.0),
        ("0s", 0.0),
        ("250ms", 0.25),
        ("1s500ms", 1.5),
        ("1d", 86400.0),
        ("1d2h3m4s", 86400 + 7200 + 180 + 4.0),
        ("1.5h", 5400.0),
        (" 30m ", 1800.0),
    ],
)
def test_parse_duration_ok(text, seconds):
    assert parse_duration(text) == pytest.approx(seconds)
    assert isinstance(parse_duration(text), float)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "   ",
        "30",
        "m",
        "30x",
        "-5m",
        "1h-30m",
        "30m1h",
        "1m1m",
        "1 h",
        "1H",
        "5mins",
        "ms250",
        "1.h",
        "abc",
    ],
)
def test_parse_duration_errors(text):
    with pytest.raises(ValueError) as err:
        parse_duration(text)
    assert repr(text) in str(err.value)


def test_parse_duration_non_string():
    with pytest.raises(ValueError):
        parse_duration(30)  # type: ignore[arg-type]


# ---------------------------------------------------------------------------
# is_duplicate_alert
# ---------------------------------------------------------------------------

T0 = 1_800_000_000.0
DAY = 86400.0


@pytest.mark.parametrize(
    "text,last_text,last_at,now,expected",
    [
        ("Disk almost full", "Disk almost full", T0, T0 + 60, True),
        ("Disk almost full", "Disk almost full", T0, T0 + DAY - 1, True),
        ("Disk almost full", "Disk almost full", T0, T0 + DAY, False),
        ("Disk almost full", "Disk almost full", T0, T0 + DAY + 1, False),
        ("  Disk   almost\nfull \n", "Disk almost full", T0, T0 + 60, True),
        ("Disk almost full", "Disk is full", T0, T0 + 60, False),
        ("disk almost full", "Disk almost full", T0, T0 + 60, False),
        ("Disk almost full", None, None, T0, False),
        ("Disk almost full", "Disk almost full", None, T0, False),
        ("Disk almost full", None, T0, T0, False),
        ("   ", "", T0, T0 + 1, False),
        # clock moved back: still treated as recent
        ("Disk almost full", "Disk almost full", T0, T0 - 30, True),
    ],
)
def test_duplicate_alert_table(text, last_text, last_at, now, expected):
    assert is_duplicate_alert(text, last_text, last_at, now) is expected


def test_duplicate_alert_custom_window():
    assert is_duplicate_alert("x", "x", T0, T0 + 59, window=60) is True
    assert is_duplicate_alert("x", "x", T0, T0 + 60, window=60) is False


# ---------------------------------------------------------------------------
# heartbeat_user_message
# ---------------------------------------------------------------------------


def test_user_message_appends_local_time():
    now = datetime(2026, 11, 21, 8, 30, tzinfo=UTC)
    msg = heartbeat_user_message("Read HEARTBEAT.md.", now, "Europe/Paris")
    assert msg.startswith("Read HEARTBEAT.md.")
    assert msg.splitlines()[-1] == "Current time: 2026-11-21 09:30 (Europe/Paris)"


def test_user_message_time_on_its_own_line():
    now = datetime(2026, 11, 21, 8, 30, tzinfo=UTC)
    msg = heartbeat_user_message("Check things.\n\n", now, "UTC")
    assert msg == "Check things.\n\nCurrent time: 2026-11-21 08:30 (UTC)"


def test_user_message_crosses_date_line():
    now = datetime(2026, 11, 21, 23, 30, tzinfo=UTC)
    msg = heartbeat_user_message("p", now, "Asia/Tokyo")
    assert msg.endswith("Current time: 2026-11-22 08:30 (Asia/Tokyo)")


def test_user_message_empty_prompt():
    now = datetime(2026, 11, 21, 8, 30, tzinfo=UTC)
    assert heartbeat_user_message("", now, "UTC") == "Current time: 2026-11-21 08:30 (UTC)"


# ---------------------------------------------------------------------------
# Edges pinned by a mutation test (bash .ci/mutation)
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text,empty",
    [
        # front matter must start on the first line: a rule after a task is not front matter
        ("call mom\n---\n", False),
        ("call mom\n---\n# Tasks\n---\n", False),
        # an empty front-matter block (closer on the second line)
        ("---\n---\n# Tasks\n", True),
        ("---\n---\ncall mom\n", False),
        # old Mac line endings are line breaks too
        ("- [ ]\r- [ ]\r", True),
        ("# Tasks\r- [ ] water plants\r", False),
        ("# Tasks\r\n- [ ]\r\n", True),
    ],
)
def test_emptiness_edges(text, empty):
    assert is_effectively_empty(text) is empty


@pytest.mark.parametrize(
    "text,allow_24,hint",
    [
        ("25:00", True, "00:00-24:00"),
        ("25:00", False, "00:00-23:59"),
        ("12:60", False, "00:00-23:59"),
    ],
)
def test_parse_hhmm_error_names_the_allowed_range(text, allow_24, hint):
    with pytest.raises(ValueError) as err:
        parse_hhmm(text, allow_24=allow_24)
    assert str(err.value) == f"invalid time {text!r}: must be between {hint}"


def test_parse_hhmm_non_string_is_named():
    with pytest.raises(ValueError, match=r"invalid time 800: expected a string in HH:MM form"):
        parse_hhmm(800, allow_24=False)  # type: ignore[arg-type]


class _NoOffset(tzinfo):
    """A tzinfo that does not know its offset: such a datetime is naive in Python's terms."""

    def utcoffset(self, dt):
        return None

    def dst(self, dt):
        return None


def test_aware_means_a_known_offset():
    with pytest.raises(ValueError, match="^in_active_hours needs a timezone-aware datetime$"):
        in_active_hours(datetime(2026, 1, 1, 12, 0, tzinfo=_NoOffset()), "08:00", "22:00", UTC)
    # the twin: a real zone works
    assert in_active_hours(datetime(2026, 1, 1, 12, 0, tzinfo=PARIS), "08:00", "22:00", UTC)


@pytest.mark.parametrize(
    "zone,start,end",
    [
        # 12:00 UTC is 21:00 in Tokyo and 07:00 in New York: inside these windows only in
        # the given zone, whatever zone the host runs in
        ("Asia/Tokyo", "20:00", "22:00"),
        ("America/New_York", "06:00", "08:00"),
    ],
)
def test_decide_uses_the_window_zone(zone, start, end):
    window = (start, end, ZoneInfo(zone))
    d = decide(heartbeat_md=TASKS, now=at(12, 0), active_hours=window, main_session_busy=False)
    assert d == HeartbeatDecision(True, "due")
    d = decide(heartbeat_md=TASKS, now=at(23, 0), active_hours=window, main_session_busy=False)
    assert d == HeartbeatDecision(False, "outside active hours")


def test_decide_reasons_are_stable():
    d = decide(heartbeat_md=None, now=at(12, 0), active_hours=WINDOW, main_session_busy=False)
    assert d == HeartbeatDecision(True, "HEARTBEAT.md missing")
    d = decide(heartbeat_md=TASKS, now=at(12, 0), active_hours=WINDOW, main_session_busy=False)
    assert d == HeartbeatDecision(True, "due")


def test_parse_duration_errors_name_value_and_units():
    with pytest.raises(ValueError, match=r"invalid duration 30: expected a string such as '30m'"):
        parse_duration(30)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"with units d, h, m, s, ms \(e\.g\. '30m'"):
        parse_duration("5mins")


def test_user_message_naive_time_is_taken_as_local():
    naive = datetime(2026, 11, 21, 8, 30)
    assert (
        heartbeat_user_message("p", naive, "Europe/Paris")
        == "p\n\nCurrent time: 2026-11-21 08:30 (Europe/Paris)"
    )
    assert heartbeat_user_message("p", naive, "") == "p\n\nCurrent time: 2026-11-21 08:30 (local)"


def test_user_message_label_without_a_configured_zone():
    # no zone configured: the time as given, labelled with its own zone name
    now = datetime(2026, 11, 21, 8, 30, tzinfo=PARIS)
    assert heartbeat_user_message("p", now, "") == "p\n\nCurrent time: 2026-11-21 08:30 (CET)"
    now = datetime(2026, 11, 21, 8, 30, tzinfo=UTC)
    assert heartbeat_user_message("p", now, "") == "p\n\nCurrent time: 2026-11-21 08:30 (UTC)"


def test_user_message_unknown_zone_keeps_the_time():
    now = datetime(2026, 11, 21, 8, 30, tzinfo=UTC)
    assert (
        heartbeat_user_message("p", now, "Nowhere/Atlantis")
        == "p\n\nCurrent time: 2026-11-21 08:30 (Nowhere/Atlantis)"
    )
