"""Pure decision rules for heartbeats.

Nothing in this module touches the file system, the clock or the network:
callers pass in the HEARTBEAT.md text, the current time and the session
state, and get back plain values. That keeps the scheduler, the
``chela heartbeat`` command and the tests on exactly the same logic.

Public API:

* :func:`is_effectively_empty` -- does HEARTBEAT.md contain anything to act on?
* :func:`parse_hhmm` / :func:`in_active_hours` -- the ``active_hours`` window.
* :class:`HeartbeatDecision` / :func:`decide` -- run now, or skip and why.
* :func:`parse_duration` -- ``"30m"``, ``"1h30m"``, ``"250ms"`` ... to seconds
  (defined with the config that validates every duration key: ``bot.config.durations``).
* :func:`is_duplicate_alert` -- the 24 h "same alert again" suppression.
* :func:`heartbeat_user_message` -- the user message of a heartbeat turn.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from zoneinfo import ZoneInfo

from bot.config.durations import parse_duration

__all__ = [
    "DUPLICATE_ALERT_WINDOW",
    "REASON_BUSY",
    "REASON_DUE",
    "REASON_EMPTY",
    "REASON_MISSING",
    "REASON_OUTSIDE_HOURS",
    "HeartbeatDecision",
    "decide",
    "heartbeat_user_message",
    "in_active_hours",
    "is_duplicate_alert",
    "is_effectively_empty",
    "parse_duration",
    "parse_hhmm",
]

# --------------------------------------------------------------------------
# HEARTBEAT.md emptiness
# --------------------------------------------------------------------------

# ATX heading: one to six '#' followed by whitespace or the end of the line.
# "#TODO" (no space) and "####### x" (seven) are not headings.
_HEADING = re.compile(r"#{1,6}(?:\s.*)?")
# A list marker ("-", "*", "+", "1.", "1)") optionally followed by a task
# checkbox ("[ ]", "[x]", "[X]") and nothing else.
_EMPTY_LIST_ITEM = re.compile(r"(?:[-*+]|\d{1,9}[.)])(?:\s*\[[ xX]?\])?")
# A bare checkbox without a list marker, e.g. "[ ]".
_BARE_CHECKBOX = re.compile(r"\[[ xX]?\]")
# Code fence: three or more backticks or tildes, optional info string.
# (A backtick fence's info string may not contain backticks, as in CommonMark.)
_FENCE = re.compile(r"(?:`{3,}[^`]*|~{3,}.*)")
# Closed HTML comment, possibly spanning lines.
_HTML_COMMENT = re.compile(r"<!--.*?-->", re.DOTALL)


def _strip_front_matter(lines: list[str]) -> list[str]:
    """Drop a YAML front-matter block if the document starts with one.

    The block must open with ``---`` on the first line and be closed by a
    ``---`` or ``...`` line. An unclosed block is not front matter, and its
    lines are judged like any other.
    """
    if not lines or lines[0].strip() != "---":
        return lines
    for i in range(1, len(lines)):
        if lines[i].strip() in ("---", "..."):
            return lines[i + 1 :]
    return lines


def _is_empty_line(line: str) -> bool:
    s = line.strip()
    if not s:
        return True
    return bool(
        _HEADING.fullmatch(s)
        or _EMPTY_LIST_ITEM.fullmatch(s)
        or _BARE_CHECKBOX.fullmatch(s)
        or _FENCE.fullmatch(s)
    )


def is_effectively_empty(text: str) -> bool:
    """True when HEARTBEAT.md holds nothing the model could act on.

    Counted as empty: blank lines, Markdown headings, list items and task
    checkboxes with no text, code-fence lines, closed HTML comments (also
    across lines) and a YAML front-matter block at the very top. Any other
    line is content. When in doubt the text is treated as content, since
    wrongly skipping a heartbeat loses a task while wrongly running one only
    costs a model call (an unclosed ``<!--`` therefore does not hide what
    follows it).
    """
    if text.startswith("\ufeff"):
        text = text[1:]
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    lines = _strip_front_matter(text.split("\n"))
    # Replace each comment with a space so that text on either side of it
    # is not glued into something that looks like a heading or marker.
    body = _HTML_COMMENT.sub(" ", "\n".join(lines))
    return all(_is_empty_line(line) for line in body.split("\n"))


# --------------------------------------------------------------------------
# Active hours
# --------------------------------------------------------------------------

_HHMM = re.compile(r"(\d{1,2}):(\d{2})")
_MINUTES_PER_DAY = 24 * 60


def parse_hhmm(s: str, *, allow_24: bool) -> int:
    """Parse ``"HH:MM"`` into minutes since midnight.

    Hours 00-23 and minutes 00-59. ``"24:00"`` (= 1440, the end of the day)
    is accepted only when *allow_24* is true, i.e. for the end of a window.
    Raises :class:`ValueError` naming the bad value otherwise.
    """
    if not isinstance(s, str):
        raise ValueError(f"invalid time {s!r}: expected a string in HH:MM form")
    m = _HHMM.fullmatch(s.strip())
    if not m:
        raise ValueError(f"invalid time {s!r}: expected HH:MM, e.g. 08:00")
    hours, minutes = int(m.group(1)), int(m.group(2))
    if hours == 24 and minutes == 0:
        if allow_24:
            return _MINUTES_PER_DAY
        raise ValueError(f"invalid time {s!r}: 24:00 is only allowed as the end of a window")
    if hours > 23 or minutes > 59:
        hint = "00:00-24:00" if allow_24 else "00:00-23:59"
        raise ValueError(f"invalid time {s!r}: must be between {hint}")
    return hours * 60 + minutes


def in_active_hours(now: datetime, start: str, end: str, tz: ZoneInfo) -> bool:
    """Is *now* inside the daily window ``[start, end)`` in zone *tz*?

    * ``start == end``: the window is empty, never active.
    * ``start < end``: active for ``start <= t < end``.
    * ``start > end``: the window wraps midnight, active for
      ``t >= start or t < end``.
    * ``end == "24:00"`` means the end of the day.

    *now* must be timezone-aware; it is converted to *tz* first. Seconds are
    ignored, so with an end of 06:00 the minute 05:59 is still inside.
    """
    if now.tzinfo is None or now.utcoffset() is None:
        raise ValueError("in_active_hours needs a timezone-aware datetime")
    s = parse_hhmm(start, allow_24=False)
    e = parse_hhmm(end, allow_24=True)
    local = now.astimezone(tz)
    t = local.hour * 60 + local.minute
    if s == e:
        return False
    if s < e:
        return s <= t < e
    return t >= s or t < e


# --------------------------------------------------------------------------
# The decision
# --------------------------------------------------------------------------

# Stable reason strings: ``chela heartbeat`` prints them and logs carry them.
REASON_OUTSIDE_HOURS = "outside active hours"
REASON_EMPTY = "HEARTBEAT.md is empty"
REASON_BUSY = "main session busy"
REASON_MISSING = "HEARTBEAT.md missing"
REASON_DUE = "due"


@dataclass(frozen=True)
class HeartbeatDecision:
    """Whether a heartbeat turn should call the model now, and why (not)."""

    run: bool
    reason: str


def decide(
    *,
    heartbeat_md: str | None,
    now: datetime,
    active_hours: tuple[str, str, ZoneInfo] | None,
    main_session_busy: bool,
) -> HeartbeatDecision:
    """Decide whether a heartbeat runs now.

    *heartbeat_md* is the text of HEARTBEAT.md, or ``None`` when the file
    does not exist (a missing file does not stop the heartbeat).
    *active_hours* is ``(start, end, zone)`` or ``None`` for "always".

    Checks in order: outside active hours, an effectively empty
    HEARTBEAT.md, a busy main session (the caller retries shortly). A skip
    never calls the model.
    """
    if active_hours is not None:
        start, end, tz = active_hours
        if not in_active_hours(now, start, end, tz):
            return HeartbeatDecision(False, REASON_OUTSIDE_HOURS)
    if heartbeat_md is not None and is_effectively_empty(heartbeat_md):
        return HeartbeatDecision(False, REASON_EMPTY)
    if main_session_busy:
        return HeartbeatDecision(False, REASON_BUSY)
    if heartbeat_md is None:
        return HeartbeatDecision(True, REASON_MISSING)
    return HeartbeatDecision(True, REASON_DUE)


# --------------------------------------------------------------------------
# Alert de-duplication
# --------------------------------------------------------------------------

DUPLICATE_ALERT_WINDOW = 86400.0  # 24 h


def _normalise_alert(text: str) -> str:
    return " ".join(text.split())


def is_duplicate_alert(
    text: str,
    last_text: str | None,
    last_at: float | None,
    now: float,
    window: float = DUPLICATE_ALERT_WINDOW,
) -> bool:
    """True when *text* repeats the last delivered alert within *window* seconds.

    Texts are compared after collapsing whitespace runs and trimming the
    ends; the comparison is otherwise exact (case matters). An alert sent
    exactly *window* seconds ago may be sent again. A stored time in the
    future (the clock went back) counts as recent.
    """
    if last_text is None or last_at is None:
        return False
    current = _normalise_alert(text)
    if not current or current != _normalise_alert(last_text):
        return False
    return now - last_at < window


# --------------------------------------------------------------------------
# The heartbeat turn's user message
# --------------------------------------------------------------------------


def heartbeat_user_message(prompt: str, now: datetime, tz_name: str) -> str:
    """Build the user message of a heartbeat turn.

    The heartbeat prompt, then a blank line and a line such as
    ``Current time: 2026-11-21 09:30 (Europe/Paris)``. An aware *now* is
    converted to *tz_name* first; a naive one is taken as already local.
    """
    local = now
    if now.tzinfo is not None and tz_name:
        try:
            local = now.astimezone(ZoneInfo(tz_name))
        except (KeyError, ValueError):  # unknown zone: keep now as given
            local = now
    label = tz_name or (local.tzname() if local.tzinfo is not None else "") or "local"
    stamp = f"Current time: {local:%Y-%m-%d %H:%M} ({label})"
    body = prompt.rstrip()
    return f"{body}\n\n{stamp}" if body else stamp
