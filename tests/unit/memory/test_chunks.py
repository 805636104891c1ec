"""Chunks of a memory file: whole lines, about 400 tokens, about 15 % overlap, and
boundaries that an edit elsewhere does not move."""

from __future__ import annotations

import random

from bot.memory.chunks import CHARS_PER_TOKEN, MAX_CHARS, OVERLAP_CHARS, chunk_lines
import itertools

WORDS = [
    "anna",
    "party",
    "birthday",
    "kid",
    "note",
    "remember",
    "meeting",
    "garage",
    "pizza",
    "lisbon",
    "dentist",
]


def memory(n: int = 1200, seed: int = 7) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(0, 14))) for _ in range(n)]


def test_chunks_are_whole_lines_with_their_line_range():
    lines = memory()
    for c in chunk_lines(lines):
        assert c.text == "\n".join(lines[c.start - 1 : c.end])
        assert lines[c.start - 1].strip() and lines[c.end - 1].strip()  # no blank edges


def test_chunks_are_about_400_tokens_and_cover_every_line():
    lines = memory()
    chunks = chunk_lines(lines)
    tokens = [len(c.text) / CHARS_PER_TOKEN for c in chunks]
    assert 250 <= sum(tokens) / len(tokens) <= 550, tokens
    assert max(len(c.text) for c in chunks) <= MAX_CHARS + OVERLAP_CHARS
    covered = {i for c in chunks for i in range(c.start, c.end + 1)}
    assert covered >= {i for i, line in enumerate(lines, 1) if line.strip()}


def test_consecutive_chunks_overlap_by_about_15_percent():
    chunks = chunk_lines(memory())
    shared = []
    for a, b in itertools.pairwise(chunks):
        assert a.start < b.start <= a.end + 1
        overlap = "\n".join(a.text.splitlines()[b.start - a.start :]) if b.start <= a.end else ""
        shared.append(len(overlap) / len(a.text))
    assert 0.05 <= sum(shared) / len(shared) <= 0.2, shared


def test_an_edit_changes_only_the_chunks_that_hold_the_line():
    lines = memory()
    before = {c.sha for c in chunk_lines(lines)}
    for where in (10, 400, 900):
        edited = list(lines)
        edited[where] = "Anna's birthday party moved to the 14th, at the lake"
        after = {c.sha for c in chunk_lines(edited)}
        assert 1 <= len(after - before) <= 2, where  # its chunk, and the next one's overlap
        inserted = [*lines[:where], "a brand new line", *lines[where:]]
        assert len({c.sha for c in chunk_lines(inserted)} - before) <= 2


def test_twin_a_new_file_is_all_new_chunks():
    before = {c.sha for c in chunk_lines(memory(seed=1))}
    assert not before & {c.sha for c in chunk_lines(memory(seed=2))}


def test_small_and_empty_files():
    assert chunk_lines([]) == [] and chunk_lines(["", "  "]) == []
    (only,) = chunk_lines(["# Family", "", "Anna's birthday party: 12 March."])
    assert (only.start, only.end) == (1, 3)
    long_line = "x" * (MAX_CHARS * 2)
    assert [c.text for c in chunk_lines(["a", long_line, "b"])][1:2] == [long_line]
