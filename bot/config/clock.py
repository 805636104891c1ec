"""Times and zones written in the config: ``HH:MM`` and IANA zone names (pure checks)."""

from __future__ import annotations

import re
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError


def check_hhmm(value: str, *, allow_24: bool) -> str:
    """``value`` when it is ``HH:MM`` (``24:00`` too when ``allow_24``), else ValueError."""
    m = re.fullmatch(r"(\d{2}):(\d{2})", value or "")
    if not m:
        raise ValueError(f"bad time {value!r}: use HH:MM")
    h, mi = int(m[1]), int(m[2])
    if (h, mi) == (24, 0) and allow_24:
        return value
    if h > 23 or mi > 59:
        raise ValueError(
            f"bad time {value!r}: hours 00-23 and minutes 00-59"
            + (" (or 24:00)" if allow_24 else "")
        )
    return value


def check_zone(value: str) -> str:
    """``value`` when it is "" or a known IANA time zone, else ValueError."""
    if value:
        try:
            ZoneInfo(value)
        except (ZoneInfoNotFoundError, ValueError):
            raise ValueError(f"unknown IANA time zone {value!r}") from None
    return value
