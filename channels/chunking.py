"""Splitting Markdown into chunks a platform accepts, and fence detection.

Pure functions shared by the core (``bot.rules.replies`` uses the fence helpers to leave code
alone) and by the adapters, which chunk before rendering for their platform: they live
on the channels side so that ``channels/`` never imports ``bot/``.
"""

from __future__ import annotations

import re
from typing import TypeVar
from collections.abc import Callable

R = TypeVar("R")

__all__ = ["chunk_markdown", "chunk_rendered", "fence_closes", "fence_open"]

_FENCE_OPEN_RE = re.compile(r"^ {0,3}(`{3,}|~{3,})(.*)$")
_FENCE_CLOSE_RE = re.compile(r"^ {0,3}(`{3,}|~{3,})[ \t]*$")


def fence_open(line: str) -> tuple[str, str] | None:
    """``(marker, info)`` when ``line`` (without newline) opens a fenced code block."""
    m = _FENCE_OPEN_RE.match(line)
    if not m:
        return None
    marker, info = m.group(1), m.group(2)
    if marker[0] == "`" and "`" in info:
        return None
    return marker, info.strip()


def fence_closes(line: str, marker: str) -> bool:
    m = _FENCE_CLOSE_RE.match(line)
    return m is not None and m.group(1)[0] == marker[0] and len(m.group(1)) >= len(marker)


# --------------------------------------------------------------------------------------------
# Chunking


def _open_fence_at_end(text: str) -> tuple[str, str, int, str] | None:
    """``(marker, info, line_start, indent)`` of the fence still open at the end of ``text``."""
    fence: tuple[str, str, int, str] | None = None
    pos = 0
    for line in text.splitlines(keepends=True):
        bare = line.rstrip("\r\n")
        if fence is None:
            opened = fence_open(bare)
            if opened:
                fence = (opened[0], opened[1], pos, bare[: len(bare) - len(bare.lstrip(" "))])
        elif fence_closes(bare, fence[0]):
            fence = None
        pos += len(line)
    return fence


# blank lines (empty or spaces only) at the start of what is left after a cut
_BLANK_LINES = re.compile(r"\A(?:[ \t]*\n)+")


def _line_count(text: str) -> int:
    return text.count("\n") + 1


def _find_cut(s: str, window: int) -> tuple[int, int]:
    """Where to cut ``s`` (longer than ``window``): ``(piece_end, next_start)``.

    Prefers the last paragraph break, then line break, then space within the window (when it
    does not leave a tiny chunk), then falls back to any such break, then a hard cut.
    """
    region = s[: window + 1]
    floor = max(1, int(window * 0.3))
    # (where the piece ends, how long the break is); -1: no such break (the caller drops the
    # newlines that start the next piece, so a paragraph break counts as two)
    candidates = [
        (region.rfind("\n\n"), 2),
        (region.rfind("\n"), 1),
        (max(region.rfind(" "), region.rfind("\t")), 1),
    ]
    for end, gap in candidates:
        if end >= floor and s[:end].strip():
            return end, end + gap
    for end, gap in candidates:
        if end > 0 and s[:end].strip():
            return end, end + gap
    return window, window


def chunk_markdown(text: str, limit: int, max_lines: int | None = None) -> list[str]:
    """Split Markdown into chunks of at most ``limit`` characters.

    Breaks at a paragraph break, else a line break, else a space, else a hard cut.  A code
    fence open at a cut is closed at the end of the chunk and reopened (same fence and info
    string) at the start of the next; the added characters count against ``limit``.  With
    ``max_lines`` (Discord's soft 17 lines) no chunk has more lines than that.  Every chunk
    leaves its fences balanced; no chunk is empty.  A fence opener on the last line (nothing
    after it) is dropped: it would only make an empty code block, which platforms reject.
    """
    if limit < 1:
        raise ValueError("limit must be positive")
    if max_lines is not None and max_lines < 1:
        raise ValueError("max_lines must be positive")
    rest = (text or "").lstrip("\n").rstrip()
    dangling = _open_fence_at_end(rest)
    if dangling is not None and "\n" not in rest[dangling[2] :]:
        rest = rest[: dangling[2]].rstrip()
    chunks: list[str] = []
    prefix = ""  # fence reopened at the start of the next chunk
    while rest.strip():
        chunk, nxt, fence = _next_chunk(rest, prefix, limit, max_lines)
        if chunk.strip():
            chunks.append(chunk)
        rest = _BLANK_LINES.sub("", rest[nxt:])  # a chunk never starts with blank lines
        prefix = ""
        if fence is not None:
            first, _, after = rest.partition("\n")
            reopen = fence[3] + fence[0] + fence[1] + "\n"  # reopened with its indentation
            if fence_closes(first, fence[0]):
                rest = after.lstrip("\n")  # the closer we added stands for this line
            elif len(reopen) + 8 > limit // 2 or (max_lines is not None and max_lines < 4):
                # the fence is too long to carry for this limit: the rest of the block goes as
                # plain text, without its closing line (which would open a new block)
                rest = _drop_closing_line(rest, fence[0])
            else:
                prefix = reopen
    return chunks


def _drop_closing_line(text: str, marker: str) -> str:
    """``text`` without the first line that closes a ``marker`` fence (unchanged if none)."""
    lines = text.split("\n")
    for k, line in enumerate(lines):
        if fence_closes(line.rstrip("\r"), marker):
            return "\n".join(lines[:k] + lines[k + 1 :])
    return text


def chunk_rendered(
    text: str,
    limit: int,
    render: Callable[[str], R],
    size: Callable[[R], int] = len,  # type: ignore[assignment]  # R is str or another Sized
    *,
    floor: int = 100,
) -> list[R]:
    """Chunk Markdown, then render each chunk for a platform, keeping every rendering
    within ``limit`` as ``size`` measures it.

    Rendering can grow a chunk (Slack escapes ``&`` as ``&amp;``; plain text spells a link
    as ``text (url)``).  A chunk that renders too long is chunked again, finer, from its
    Markdown, so a cut never falls inside an entity or a formatting span.  A piece of at
    most ``floor`` characters is returned as rendered.
    """

    def fit(chunk: str) -> list[R]:
        rendered = render(chunk)
        n = size(rendered)
        if n <= limit or len(chunk) <= floor:
            return [rendered]
        # limit / n < 1, so this is always shorter than the chunk: every round makes progress
        finer = max(floor, int(len(chunk) * limit / n * 0.9))
        return [r for piece in chunk_markdown(chunk, finer) for r in fit(piece)]

    return [r for chunk in chunk_markdown(text, limit) for r in fit(chunk)]


def _next_chunk(
    rest: str, prefix: str, limit: int, max_lines: int | None
) -> tuple[str, int, tuple[str, str, int, str] | None]:
    """One chunk from the start of ``rest``: ``(chunk, next_start, fence_left_open)``."""
    window = limit - len(prefix)
    line_budget = None if max_lines is None else max_lines - _line_count(prefix) + 1
    for _attempt in range(64):
        if window < 1 or (line_budget is not None and line_budget < 1):
            if not prefix:
                break
            prefix, window = "", limit  # nothing fits next to the reopened fence: drop it
            line_budget = max_lines
        w = _line_window(rest, window, line_budget)
        if len(rest) <= w:
            end = nxt = len(rest)
        else:
            end, nxt = _find_cut(rest, max(w, 1))
        piece = rest[:end].rstrip()
        if not piece.strip():
            piece = rest[:end]
        end, nxt, piece, fence = _not_on_a_bare_opener(rest, prefix, w, end, nxt, piece)
        body = prefix + piece
        chunk = body + ("\n" + fence[3] + fence[0] if fence is not None else "")
        over = len(chunk) - limit
        extra_lines = 0 if max_lines is None else _line_count(chunk) - max_lines
        if over <= 0 and extra_lines <= 0:
            return chunk, nxt, fence
        if over > 0:
            window = min(window, end) - over
        if extra_lines > 0 and line_budget is not None:
            line_budget = min(line_budget, _line_count(piece)) - extra_lines
    return _plain_cut(rest, limit, max_lines)


def _plain_cut(
    rest: str, limit: int, max_lines: int | None
) -> tuple[str, int, tuple[str, str, int, str] | None]:
    """The safety net (tiny limits): a plain cut that honours the limits, fences not
    carried."""
    end = min(len(rest), limit)
    if max_lines is not None:
        lines = rest[:end].split("\n")
        if len(lines) > max_lines:
            end = len("\n".join(lines[:max_lines]))
    end = max(end, 1)
    return rest[:end], end, None


def _line_window(rest: str, window: int, line_budget: int | None) -> int:
    """``window`` cut to end before the line ``line_budget`` + 1 starts."""
    if line_budget is None:
        return window
    nl = -1
    for _ in range(line_budget):
        nl = rest.find("\n", nl + 1)
        if nl < 0:
            return window
    return min(window, nl) if nl >= 0 else window


def _not_on_a_bare_opener(
    rest: str, prefix: str, w: int, end: int, nxt: int, piece: str
) -> tuple[int, int, str, tuple[str, str, int, str] | None]:
    """``(end, next_start, piece, fence_left_open)`` for the cut at ``end``, moved so that
    a chunk never ends on a bare fence opener: the cut goes before the opener, or, when the
    opener starts the chunk and the line after it is longer than the window (minified
    JSON), inside that line (never an empty block; ``rest`` is longer than ``w`` there)."""
    body = prefix + piece
    fence = _open_fence_at_end(body)
    if fence is None or fence[2] < len(prefix) or "\n" in body[fence[2] :]:
        return end, nxt, piece, fence
    opener_at = fence[2] - len(prefix)
    if rest[:opener_at].strip():
        end = opener_at
        return end, end, rest[:end].rstrip(), None  # no fence was open before the opener
    inner = len(body) - len(prefix) + 1
    room = w - inner - len(fence[3]) - len(fence[0]) - 1
    if room < 1:
        return end, nxt, piece, fence
    cut, after = _find_cut(rest[inner:], room)
    end, nxt = inner + cut, inner + after
    piece = rest[:end]
    return end, nxt, piece, _open_fence_at_end(prefix + piece)
