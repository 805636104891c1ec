"""Plain aligned text tables."""

from __future__ import annotations


def table(headers: list[str], rows: list[list[str]]) -> str:
    """Plain aligned columns with a header line (no trailing spaces)."""
    cells = [headers] + [[str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=False)).rstrip() for r in cells]
    return "\n".join(lines)
