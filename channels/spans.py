"""Inline rules the formatters share (``channels.formatting``): where a code span that is
never closed ends, and when a link's label is only its URL."""

from __future__ import annotations

import re


def unterminated_end(text: str, i: int) -> int:
    """Where the code span opened by a backtick run that is never closed ends, or -1.

    A model that opens a span and stops (``prefix `unterminated``) meant code: the span runs
    to the end of its line when the run is glued to what follows and no other backtick is
    on that line (a lone backtick before a space stays a backtick)."""
    line_end = text.find("\n", i)
    line_end = len(text) if line_end < 0 else line_end
    rest = text[i:line_end]
    if not rest or rest[0].isspace() or "`" in rest or not rest.strip():
        return -1
    return line_end


def _link_key(s: str) -> str:
    """A link target as a reader compares it: no scheme, no trailing slash, any case."""
    return re.sub(r"^(?:https?|mailto):(?://)?", "", s.strip()).rstrip("/").lower()


def same_link(text: str, url: str) -> bool:
    """The label says nothing the URL does not (``[example.com](https://example.com/)``):
    show the link once."""
    return not text.strip() or _link_key(text) == _link_key(url)
