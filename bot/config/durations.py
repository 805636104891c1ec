"""Durations written in the config: ``"30m"``, ``"1h30m"``, ``"250ms"`` ... to seconds.

Pure: the config validates every duration key with :func:`parse_duration`, and the heartbeat
rules (``bot.rules.heartbeat``) re-export it for the scheduler and ``chela heartbeat``.
"""

from __future__ import annotations

import re

__all__ = ["parse_duration"]

# Longest unit names first so "ms" wins over "m".
_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d)")
_UNIT_SECONDS = {"d": 86400.0, "h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}
_UNIT_ORDER = ["d", "h", "m", "s", "ms"]


def parse_duration(s: str) -> float:
    """Parse a duration such as ``"30m"``, ``"1h30m"``, ``"90s"`` or ``"250ms"``.

    Returns seconds as a float. Units are ``d``, ``h``, ``m``, ``s`` and
    ``ms``; each may appear once, largest first; numbers may have a decimal
    part (``"1.5h"``). ``"0m"`` gives 0 (heartbeats use that for "off").
    A bare number, an empty string, a negative value or an unknown unit
    raises :class:`ValueError` naming the bad value.
    """
    if not isinstance(s, str):
        raise ValueError(f"invalid duration {s!r}: expected a string such as '30m'")
    text = s.strip()
    if not text:
        raise ValueError(f"invalid duration {s!r}: empty (use e.g. '30m', '1h30m', '90s')")
    pos = 0
    total = 0.0
    last_rank = -1
    while pos < len(text):
        m = _DURATION_PART.match(text, pos)
        if not m:
            raise ValueError(
                f"invalid duration {s!r}: expected <number><unit> parts with units "
                "d, h, m, s, ms (e.g. '30m', '1h30m', '250ms')"
            )
        unit = m.group(2)
        rank = _UNIT_ORDER.index(unit)
        if rank <= last_rank:
            raise ValueError(f"invalid duration {s!r}: each unit may appear once, largest first")
        last_rank = rank
        total += float(m.group(1)) * _UNIT_SECONDS[unit]
        pos = m.end()
    return total
