"""Memory files in chunks: whole lines, about 400 tokens (characters / 4) each, the next
chunk repeating about 15 % of the previous one's last lines.  Pure.

Where a chunk ends is decided by the lines themselves (content-defined, as backup tools cut
files): after at least ``MIN_CHARS``, a line ends the chunk when its checksum falls under a
threshold proportional to its length, so on average a chunk ends ``MEAN_GAP`` characters
later; ``MAX_CHARS`` forces an end.  An edit therefore moves no boundary elsewhere in the
file: only the chunks that hold the edited lines change, and with them their embeddings.
"""

from __future__ import annotations

import hashlib
import re
import zlib
from dataclasses import dataclass

CHARS_PER_TOKEN = 4
TOKENS = 400
MIN_CHARS = 100 * CHARS_PER_TOKEN  # a chunk is never cut before this
MEAN_GAP = (TOKENS - 100) * CHARS_PER_TOKEN  # then a cut every this many characters on average
MAX_CHARS = 600 * CHARS_PER_TOKEN  # ... and always before this (a longer line stays whole)
OVERLAP_CHARS = TOKENS * CHARS_PER_TOKEN * 15 // 100  # of the previous chunk, repeated


@dataclass(frozen=True)
class Chunk:
    start: int  # first line, 1-based
    end: int  # last line, inclusive
    text: str

    @property
    def sha(self) -> str:
        return text_sha(self.text)


def text_sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _cuts_after(line: str) -> bool:
    """Whether a chunk long enough may end after ``line`` (the same answer wherever it is)."""
    if not line.strip():
        return False
    chance = min(1.0, (len(line) + 1) / MEAN_GAP)
    return zlib.crc32(line.encode("utf-8")) < chance * 0x1_0000_0000


def _ends(lines: list[str]) -> list[int]:
    """The index after the last line of each chunk (before overlap is added)."""
    ends: list[int] = []
    size = 0
    for i, line in enumerate(lines):
        if size and size + len(line) + 1 > MAX_CHARS:
            ends.append(i)
            size = 0
        size += len(line) + 1
        if size >= MIN_CHARS and _cuts_after(line):
            ends.append(i + 1)
            size = 0
    if not ends or ends[-1] != len(lines):
        ends.append(len(lines))
    return ends


def _overlap_start(lines: list[str], begin: int, end: int) -> int:
    """Where a chunk starting at ``end`` begins once it repeats the tail of the chunk
    ``begin:end`` (at most ``OVERLAP_CHARS``, whole lines, never the whole chunk)."""
    k, size = end, 0
    while k - 1 > begin and size + len(lines[k - 1]) + 1 <= OVERLAP_CHARS:
        k -= 1
        size += len(lines[k]) + 1
    return k


def chunk_lines(lines: list[str]) -> list[Chunk]:
    """The chunks of a file's lines; blank lines at a chunk's edges are left out."""
    out: list[Chunk] = []
    begin = before = 0  # this chunk's own first line, and the previous chunk's
    for end in _ends(lines):
        first, last = (_overlap_start(lines, before, begin) if begin else 0), end
        while first < last and not lines[first].strip():
            first += 1
        while last > first and not lines[last - 1].strip():
            last -= 1
        if first < last:
            out.append(Chunk(first + 1, last, "\n".join(lines[first:last])))
        before, begin = begin, end
    return out


BLOCK_LINES = 12
# a heading or a list item starts a block of its own (memory notes are mostly bullets)
_BLOCK_START = re.compile(r"\s{0,3}(#{1,6}\s|[-*+]\s|\d{1,3}[.)]\s)")


def blocks(lines: list[str]) -> list[tuple[int, int]]:
    """The blocks of some lines, ``(first, last)`` 0-based and inclusive: a blank line ends
    one, a heading or a list item starts one, none is longer than ``BLOCK_LINES``.  A search
    hit points at the block of its chunk that holds the words it matched."""
    out: list[tuple[int, int]] = []
    first = -1
    for i, line in enumerate(lines):
        blank = not line.strip()
        if first >= 0 and (blank or _BLOCK_START.match(line) or i - first >= BLOCK_LINES):
            out.append((first, i - 1))
            first = -1
        if first < 0 and not blank:
            first = i
    if first >= 0:
        out.append((first, len(lines) - 1))
    return out
