"""Chunking Markdown for platforms (SPEC §3.5): exact limits, cut placement, fences.

tests/test_replies.py holds the property tests (random Markdown: limits, balanced fences,
nothing lost); these pin where the cuts fall, at the exact boundaries.
"""

from __future__ import annotations

import pytest

from channels.chunking import chunk_markdown, chunk_rendered, fence_closes, fence_open


def _fences_balanced(chunk: str, marker: str) -> bool:
    return sum(1 for ln in chunk.split("\n") if ln.lstrip(" ").startswith(marker)) % 2 == 0


# -------------------------------------------------------------------------- limits and breaks


@pytest.mark.parametrize(
    "text, limit, chunks",
    [
        # exactly the limit is one chunk; one more character is two
        ("a" * 40, 40, ["a" * 40]),
        ("a" * 41, 40, ["a" * 40, "a"]),
        ("aaaa bbbb", 9, ["aaaa bbbb"]),
        ("aaaa bbbbb", 9, ["aaaa", "bbbbb"]),
        # a break right after the limit is used: the chunk is exactly the limit
        ("a" * 40 + " " + "b" * 10, 40, ["a" * 40, "b" * 10]),
        ("a" * 40 + "\n" + "b" * 10, 40, ["a" * 40, "b" * 10]),
        ("a" * 40 + "\n\n" + "b" * 10, 40, ["a" * 40, "b" * 10]),
        # one further is too far: a hard cut at the limit
        ("a" * 41 + " b", 40, ["a" * 40, "a b"]),
        # the last break within the limit, not the first
        ("aaa bbb ccc ddd", 12, ["aaa bbb ccc", "ddd"]),
        ("aaa\nbbb\nccc\nddd", 12, ["aaa\nbbb\nccc", "ddd"]),
        (
            "a\tba\tba\tb" + "c" * 40,
            10,
            ["a\tba\tba", "b" + "c" * 9, "c" * 10, "c" * 10, "c" * 10, "c"],
        ),
        # a space before a hard cut, even a short piece
        ("a " + "b" * 50, 40, ["a", "b" * 40, "b" * 10]),
        ("ab " + "c" * 50, 40, ["ab", "c" * 40, "c" * 10]),
    ],
)
def test_cuts_at_the_limit(text, limit, chunks):
    assert chunk_markdown(text, limit) == chunks


@pytest.mark.parametrize(
    "text, first",
    [
        # a paragraph break wins over a later line break...
        ("p" * 20 + "\n\n" + "q" * 10 + "\n" + "r" * 30, "p" * 20),
        # ...from 30 % of the limit on (12 of 40)...
        ("p" * 12 + "\n\n" + "q" * 24 + "\n" + "r" * 20, "p" * 12),
        # ...but one that would leave a tiny chunk gives way to a later line break
        ("p" * 11 + "\n\n" + "q" * 25 + "\n" + "r" * 20, "p" * 11 + "\n\n" + "q" * 25),
        ("p" * 5 + "\n\n" + "q" * 30 + "\n" + "r" * 20, "p" * 5 + "\n\n" + "q" * 30),
        # the same between a line break and a space
        ("p" * 5 + "\n" + "q" * 30 + " " + "r" * 20, "p" * 5 + "\n" + "q" * 30),
        ("p" * 20 + "\n" + "q" * 10 + " " + "r" * 20, "p" * 20),
    ],
)
def test_break_preference(text, first):
    assert chunk_markdown(text, 40)[0] == first


@pytest.mark.parametrize(
    "text, limit, chunks",
    [
        ("\n\nXylophone  \n\n", 100, ["Xylophone"]),  # blank lines, trailing space trimmed
        ("    code line\n", 100, ["    code line"]),  # leading indentation is content
        ("aaaa\n\n  bb", 6, ["aaaa", "  bb"]),  # also at the start of the next chunk
        ("aaaa\n\nXbb", 6, ["aaaa", "Xbb"]),
        ("aaaa\n\n\n\nbb", 6, ["aaaa", "bb"]),
    ],
)
def test_whitespace_at_chunk_edges(text, limit, chunks):
    assert chunk_markdown(text, limit) == chunks


def test_invalid_limits_are_named():
    with pytest.raises(ValueError, match="^limit must be positive$"):
        chunk_markdown("x", 0)
    with pytest.raises(ValueError, match="^max_lines must be positive$"):
        chunk_markdown("x", 10, max_lines=0)
    assert chunk_markdown("x", 1) == ["x"]
    assert chunk_markdown("x\ny", 10, max_lines=1) == ["x", "y"]


# -------------------------------------------------------------------------- max_lines


@pytest.mark.parametrize(
    "max_lines, chunks",
    [
        (3, ["l0\nl1\nl2", "l3\nl4\nl5", "l6"]),
        (4, ["l0\nl1\nl2\nl3", "l4\nl5\nl6"]),
        (7, ["l0\nl1\nl2\nl3\nl4\nl5\nl6"]),
        (1, ["l0", "l1", "l2", "l3", "l4", "l5", "l6"]),
    ],
)
def test_max_lines_exactly(max_lines, chunks):
    text = "\n".join(f"l{i}" for i in range(7))
    assert chunk_markdown(text, 100, max_lines=max_lines) == chunks


def test_max_lines_and_limit_together():
    text = "\n".join(["word " * 3 + "end"] * 6)  # 6 lines of 18 characters
    chunks = chunk_markdown(text, 40, max_lines=3)
    assert chunks == ["word word word end\nword word word end"] * 3


# -------------------------------------------------------------------------- code fences

CODE = "```py\n" + "\n".join(["x = 1"] * 10) + "\n```"


def test_fence_closed_and_reopened_at_the_limit():
    # 27 characters per chunk: one more line (6) would pass 30
    assert chunk_markdown(CODE, 30) == ["```py\nx = 1\nx = 1\nx = 1\n```"] * 3 + [
        "```py\nx = 1\n```"
    ]
    assert chunk_markdown(CODE, 28) == ["```py\nx = 1\nx = 1\nx = 1\n```"] * 3 + [
        "```py\nx = 1\n```"
    ]
    assert chunk_markdown(CODE, 26)[0] == "```py\nx = 1\nx = 1\n```"


def test_fence_reopened_within_max_lines():
    # opener + 2 lines + closer = 4 lines
    assert chunk_markdown(CODE, 100, max_lines=4) == ["```py\nx = 1\nx = 1\n```"] * 5
    assert chunk_markdown(CODE, 100, max_lines=5) == ["```py\nx = 1\nx = 1\nx = 1\n```"] * 3 + [
        "```py\nx = 1\n```"
    ]


@pytest.mark.parametrize("limit", [28, 29, 30])
def test_the_closer_we_add_stands_for_the_original_one(limit):
    text = "```\n" + "x" * 20 + "\n```\n\nXafter"
    assert chunk_markdown(text, limit) == ["```\n" + "x" * 20 + "\n```", "Xafter"]


def test_cut_before_the_original_closer_leaves_no_empty_block():
    text = "```\n" + "x" * 20 + "\n```\nXafter"
    chunks = chunk_markdown(text, 24)
    assert all(len(c) <= 24 for c in chunks)
    assert "```\n```" not in chunks
    assert chunks[-1].endswith("Xafter") and not chunks[-1].endswith("```")


def test_tilde_fence_reopened_with_indentation_exactly():
    text = "  ~~~sh\n" + "\n".join(f"  echo {i}" for i in range(6)) + "\n  ~~~\nXdone"
    assert chunk_markdown(text, 40) == [
        "  ~~~sh\n  echo 0\n  echo 1\n  echo 2\n  ~~~",
        "  ~~~sh\n  echo 3\n  echo 4\n  echo 5\n  ~~~",
        "Xdone",
    ]


def test_long_fence_carries_over_and_prose_after_it_stays_prose():
    text = "````md\n" + "\n".join(f"line {i}" for i in range(8)) + "\n````\nafter"
    chunks = chunk_markdown(text, 40)
    assert chunks[0] == "````md\nline 0\nline 1\nline 2\nline 3\n````"
    assert all(c.startswith("````md\n") and c.endswith("\n````") for c in chunks[:-1])
    assert chunks[-1].endswith("after") and not chunks[-1].endswith("````")


def test_minified_line_in_a_fence_is_cut_inside_the_block():
    text = '```json\n{"k":"' + "v" * 60 + '"}\n```\nXok'
    assert chunk_markdown(text, 40) == [
        '```json\n{"k":"' + "v" * 22 + "\n```",
        "```json\n" + "v" * 28 + "\n```",
        "```json\n" + "v" * 10 + '"}\n```\nXok',
    ]


def test_a_chunk_never_ends_on_an_opener():
    text = "intro words here\n```py\nprint(1)\nprint(2)\n```"
    chunks = chunk_markdown(text, 30)
    assert chunks[0] == "intro words here"
    assert chunks[1:] == ["```py\nprint(1)\nprint(2)\n```"]


@pytest.mark.parametrize(
    "text, limit, max_lines, chunks",
    [
        # a fence too long to carry for the limit: the rest of the block goes as plain text and
        # the prose after it stays prose (its closing line must not open a new block)
        (
            "```python title=a_rather_long_file_name.py\n"
            + "\n".join(f"value = {i}" for i in range(12))
            + "\n```\nafter the block, plain prose.",
            100,
            None,
            [
                "```python title=a_rather_long_file_name.py\n"
                + "\n".join(f"value = {i}" for i in range(5))
                + "\n```",
                "\n".join(f"value = {i}" for i in range(5, 12)),
                "after the block, plain prose.",
            ],
        ),
        # fewer than 4 lines per message: no room to reopen a fence
        (
            "```py\n" + "\n".join(["x = 1"] * 5) + "\n```\nafter the block",
            30,
            3,
            ["```py\nx = 1\n```", "x = 1\nx = 1\nx = 1", "x = 1\nafter the block"],
        ),
        (
            "```py\n" + "\n".join(["x = 1"] * 4) + "\n```",
            30,
            3,
            ["```py\nx = 1\n```", "x = 1\nx = 1\nx = 1"],
        ),
    ],
)
def test_fence_too_big_to_carry_degrades_to_plain_text(text, limit, max_lines, chunks):
    assert chunk_markdown(text, limit, max_lines) == chunks


def test_a_fence_that_just_fits_is_carried():
    # "```" + 10-character info + newline = 14; 14 + 8 <= 44 // 2: carried
    text = "```abcdefghij\n" + "\n".join(f"row {i}" for i in range(12)) + "\n```"
    chunks = chunk_markdown(text, 44)
    assert len(chunks) > 1
    assert all(c.startswith("```abcdefghij\n") and c.endswith("\n```") for c in chunks)
    # 15 + 8 > 44 // 2: not carried
    text = "```abcdefghijk\n" + "\n".join(f"row {i}" for i in range(12)) + "\n```"
    chunks = chunk_markdown(text, 44)
    assert not chunks[1].startswith("```")


@pytest.mark.parametrize(
    "line, opened",
    [
        ("```", ("```", "")),
        ("```py title=x ", ("```", "py title=x")),
        ("   ~~~ sh", ("~~~", "sh")),
        ("~~~ a`b", ("~~~", "a`b")),  # a tilde fence's info may hold backticks
        ("``` a`b", None),  # a backtick fence's may not
        ("    ```", None),  # four spaces: an indented code block, not a fence
        ("``", None),
    ],
)
def test_fence_open(line, opened):
    assert fence_open(line) == opened


@pytest.mark.parametrize(
    "line, marker, closes",
    [
        ("```", "```", True),
        ("````", "```", True),  # at least as long
        ("```", "````", False),
        ("~~~", "```", False),  # same character
        ("```", "~~~", False),
        ("~~~~  ", "~~~", True),
        ("``` x", "```", False),
        ("   ```", "```", True),
    ],
)
def test_fence_closes(line, marker, closes):
    assert fence_closes(line, marker) is closes


# -------------------------------------------------------------------------- chunk_rendered


def _grow(md: str) -> str:  # "&" renders 5 characters long, like Slack's &amp;
    return md.replace("&", "&amp;")


def test_rendered_exactly_at_the_limit_is_one_piece():
    text = "x" * 299 + "&"  # renders to 304
    assert chunk_rendered(text, 304, _grow) == ["x" * 299 + "&amp;"]
    assert len(chunk_rendered(text, 303, _grow)) == 2


def test_pieces_up_to_the_floor_are_returned_as_rendered():
    assert chunk_rendered("&" * 100, 300, _grow) == ["&amp;" * 100]
    assert [len(r) for r in chunk_rendered("&" * 101, 300, _grow)] == [500, 5]
    assert chunk_rendered("&" * 20, 50, _grow, floor=20) == ["&amp;" * 20]
    assert len(chunk_rendered("&" * 21, 50, _grow, floor=20)) == 2


def test_rechunking_cuts_where_the_rendering_fits():
    text = " ".join(["a&b"] * 100)  # 399 characters, 799 rendered
    out = chunk_rendered(text, 300, _grow)
    assert [len(r) for r in out] == [263, 263, 71, 199]
    assert " ".join(out).replace("&amp;", "&") == text


# -------------------------------------------------------------------------- more fence edges


@pytest.mark.parametrize(
    "closer, after, second",
    [
        # the original closer is longer than the one we add (or has trailing spaces): the
        # chunk ends before it, our closer stands for it, and the prose after stays prose
        ("`````", "\n\n  Xafter", "  Xafter"),
        ("```   ", "\nXafter\nXmore", "Xafter\nXmore"),
        ("`````", "\n\nXafter", "Xafter"),
    ],
)
def test_the_closer_we_add_replaces_a_longer_original(closer, after, second):
    text = "```\n" + "x" * 20 + "\n" + closer + after
    assert chunk_markdown(text, 28) == ["```\n" + "x" * 20 + "\n```", second]


def test_crlf_fences_close():
    text = "```\r\nab\r\n```\r\n" + "word " * 10
    assert chunk_markdown(text, 30) == [
        "```\r\nab\r\n```",
        "word word word word word word",
        "word word word word",
    ]
    # the closer in the middle of a chunk: nothing is added after the prose
    text = "```\r\nab\r\n```\r\nmore text\r\n" + "word " * 10
    assert chunk_markdown(text, 30)[0] == "```\r\nab\r\n```\r\nmore text"


def test_a_fence_line_with_text_after_it_does_not_close():
    # CommonMark: a closing fence may be followed by spaces only; "```X" is code
    text = "```\nab\n```X\n" + "word " * 10
    chunks = chunk_markdown(text, 30)
    assert chunks[0] == "```\nab\n```X\n```"
    assert all(c.startswith("```\n") and c.endswith("\n```") for c in chunks)


def test_an_opener_on_a_later_line_is_moved_to_the_next_chunk():
    text = "intro\nwords here\n```py\nprint(1)\nprint(2)\n```"
    assert chunk_markdown(text, 30) == ["intro\nwords here", "```py\nprint(1)\nprint(2)\n```"]


@pytest.mark.parametrize(
    "text, chunks",
    [
        ("Here:\n```py", ["Here:"]),  # a dangling opener would only make an empty block
        ("Here:\n```py\n", ["Here:"]),
        ("```", []),
        (" x = 1\n```\n", [" x = 1"]),  # what comes before keeps its indentation
        ("    indented code\n```py", ["    indented code"]),
        ("Here:\n```py\nx\n```", ["Here:\n```py\nx\n```"]),  # the twin: a real block stays
    ],
)
def test_a_dangling_opener_makes_no_empty_block(text, chunks):
    assert chunk_markdown(text, 100) == chunks


def test_tiny_limits_prefer_a_line_break_to_a_space():
    assert chunk_markdown("a\nb cdefgh", 5) == ["a", "b", "cdefg", "h"]


def test_a_long_line_after_an_opener_goes_in_even_one_character_at_a_time():
    # 13 = "```json\n" + 1 character + "\n```": still a block with content, never an empty one
    assert chunk_markdown("```json\n" + "v" * 30, 13)[0] == "```json\nv\n```"
    assert chunk_markdown("```json\n" + "v" * 30, 14)[0] == "```json\nvv\n```"


@pytest.mark.parametrize(
    "text, limit, first",
    [
        # a long line inside a block is cut at a space when there is one
        (
            '```json\n{"a": 1, "b": 2, "c": 3, "d": 4, "e": 5}\n```',
            30,
            '```json\n{"a": 1, "b":\n```',
        ),
        # an indented fence: its indentation counts against the limit
        (
            '  ```json\n  {"k":"' + "v" * 40 + '"}\n  ```',
            30,
            '  ```json\n  {"k":"vvvvvv\n  ```',
        ),
    ],
)
def test_a_long_line_after_an_opener_is_cut_inside_the_block(text, limit, first):
    chunks = chunk_markdown(text, limit)
    assert chunks[0] == first
    assert all(len(c) <= limit for c in chunks)


def test_a_long_line_after_a_reopened_fence():
    text = "```\n" + "line\n" * 3 + '```json\n{"k":"' + "v" * 40 + '"}\n```'
    # "```json" cannot close a ``` block: it is code, and so is everything up to the last line
    assert chunk_markdown(text, 30) == [
        "```\nline\nline\nline\n```json\n```",
        '```\n{"k":"' + "v" * 16 + "\n```",
        "```\n" + "v" * 22 + "\n```",
        '```\nvv"}\n```',
    ]


@pytest.mark.parametrize(
    "inside",
    [
        "\r\n",  # CRLF lines
        "\n",
    ],
)
def test_degraded_fence_drops_its_closing_line(inside):
    info = "python title=a_rather_long_file_name.py"
    body = inside.join(f"value = {i}" for i in range(12))
    text = f"```{info}{inside}{body}{inside}```{inside}after the block."
    chunks = chunk_markdown(text, 100)
    assert chunks[-1].endswith("after the block.")
    assert not any(c.rstrip().endswith("```") for c in chunks[1:])


def test_three_lines_hold_a_block_with_one_line():
    # max_lines 3: opener, one line, closer; the paragraph after it is prose
    assert chunk_markdown("```\nword \n\na", 40, max_lines=3) == ["```\nword\n```", "a"]
