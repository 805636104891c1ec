"""The reply pipeline (SPEC §3): silence, heartbeat acks, tags, media markers, chunking, media."""

from __future__ import annotations

import os
import random
import re
from pathlib import Path

import pytest

from bot.delivery.attachments import resolve_media
from bot.rules.replies import (
    HEARTBEAT_TOKEN,
    REPLY_TO_CURRENT,
    SILENT_TOKEN,
    ReplyPlan,
    chunk_markdown,
    is_silent,
    parse_reply,
    strip_heartbeat_token,
    strip_silent_token,
)
from channels.base import MediaItem


def test_tokens():
    assert SILENT_TOKEN == "NO_REPLY"
    assert HEARTBEAT_TOKEN == "HEARTBEAT_OK"


# ---------------------------------------------------------------------------------- §3.1


@pytest.mark.parametrize(
    "text, silent",
    [
        ("NO_REPLY", True),
        ("no_reply", True),
        ("  No_Reply \n\n", True),
        ("\tNO_REPLY", True),
        ('{"action":"NO_REPLY"}', True),
        ('  { "action" : "NO_REPLY" }  ', True),
        ('{"action":"NO_REPLY","x":1}', False),
        ('{"action":"reply"}', False),
        ('["NO_REPLY"]', False),
        ("NO_REPLY please", False),
        ("NO_REPLY_X", False),
        ("", False),
        ("Hello", False),
        ("**NO_REPLY**", True),  # Markdown around the token is part of it
        ("`NO_REPLY`", True),
        ("_NO_REPLY_", True),
        ("** NO_REPLY **", True),
        ("**NO_REPLY** then", False),
    ],
)
def test_is_silent(text, silent):
    assert is_silent(text) is silent


@pytest.mark.parametrize(
    "text, expected",
    [
        ("Done.\n\nNO_REPLY", "Done."),
        ("Done. NO_REPLY", "Done."),
        ("Done.\nno_reply.", "Done."),
        ("NO_REPLYThe user asked nothing.", "The user asked nothing."),
        ("NO_REPLY The user…", "The user…"),
        ("I will answer NO_REPLY when idle, ok?", "I will answer NO_REPLY when idle, ok?"),
        ("Use SEND_NO_REPLY", "Use SEND_NO_REPLY"),
        ("Nothing to strip", "Nothing to strip"),
        ("NO_REPLY", ""),
        ("NO_REPLY.", ""),
        ("NO_REPLY NO_REPLY", ""),
        ("text **NO_REPLY", "text"),  # markup goes with the token, not left behind
        ("text **NO_REPLY**", "text"),
        ("Done. `NO_REPLY`", "Done."),
        ("NO_REPLY: not needed", "not needed"),  # a leading separator goes with the token
        ("NO_REPLY—note", "note"),
        ("NO_REPLY - x", "x"),
        ("NO_REPLY -- x", "x"),
        ("**NO_REPLY**: fine", "fine"),
    ],
)
def test_strip_silent_token(text, expected):
    assert strip_silent_token(text) == expected


@pytest.mark.parametrize(
    "text, text_out",
    [
        ("NO_REPLY", None),
        ("  no_reply  ", None),
        ('{"action":"NO_REPLY"}', None),
        ('{"action":"NO_REPLY","x":1}', '{"action":"NO_REPLY","x":1}'),
        ("Done.\n\nNO_REPLY", "Done."),
        ("NO_REPLYThe user…", "The user…"),
        ("the NO_REPLY token is mid-text", "the NO_REPLY token is mid-text"),
        ("[[reply_to_current]] NO_REPLY", None),
        ("NO_REPLY.", None),
        ("", None),
        ("   \n ", None),
        ("**NO_REPLY**", None),
        ("`NO_REPLY`", None),
        ("text **NO_REPLY", "text"),
        ("NO_REPLY: not needed", "not needed"),
    ],
)
def test_parse_reply_silence(text, text_out):
    plan = parse_reply(text)
    if text_out is None:
        assert plan.silent and plan.text == "" and plan.media == []
    else:
        assert not plan.silent
        assert plan.text == text_out


# ---------------------------------------------------------------------------------- §3.2


@pytest.mark.parametrize(
    "text, rest, found",
    [
        ("HEARTBEAT_OK", "", True),
        ("  HEARTBEAT_OK  ", "", True),
        ("**HEARTBEAT_OK**", "", True),
        ("<b>HEARTBEAT_OK</b>", "", True),
        ("&nbsp;HEARTBEAT_OK&nbsp;", "", True),
        ("`HEARTBEAT_OK`", "", True),
        ("~_HEARTBEAT_OK_~", "", True),
        ("I should not respond HEARTBEAT_OK.", "I should not respond.", True),
        ("All quiet. **HEARTBEAT_OK**", "All quiet.", True),
        ("HEARTBEAT_OK All quiet.", "All quiet.", True),
        ("HEARTBEAT_OKAll quiet.", "All quiet.", True),
        ("HEARTBEAT_OK HEARTBEAT_OK", "", True),
        ("HEARTBEAT_OK note HEARTBEAT_OK!!", "note!!", True),
        ("HEARTBEAT_OK  spaced   out \n\n\n\nend", "spaced out\n\nend", True),
        # more than 4 non-word characters after the token: not at the end
        ("note HEARTBEAT_OK ......", "note HEARTBEAT_OK ......", False),
        (
            "the HEARTBEAT_OK token is in the middle",
            "the HEARTBEAT_OK token is in the middle",
            False,
        ),
        ("heartbeat_ok", "heartbeat_ok", False),
        ("Heartbeat_OK", "Heartbeat_OK", False),
        ("nothing here", "nothing here", False),
    ],
)
def test_strip_heartbeat_token(text, rest, found):
    assert strip_heartbeat_token(text) == (rest, found)


def test_heartbeat_token_stripping_keeps_code_indentation():
    text = "Alert:\n```\ndef f():\n    return  1\n```\nHEARTBEAT_OK"
    rest, found = strip_heartbeat_token(text)
    assert found
    assert rest == "Alert:\n```\ndef f():\n    return  1\n```"


@pytest.mark.parametrize(
    "text", ["HEARTBEAT_OK", "**HEARTBEAT_OK**", "<b>HEARTBEAT_OK</b>", " HEARTBEAT_OK. "]
)
def test_heartbeat_ack_is_silent(text):
    plan = parse_reply(text, heartbeat=True)
    assert plan.silent and plan.ack


def test_heartbeat_short_rest_is_silent_long_rest_delivered():
    short = "x" * 250
    plan = parse_reply(f"HEARTBEAT_OK {short}", heartbeat=True, ack_max_chars=300)
    assert plan.silent and plan.ack

    alert = ("Disk almost full on /var. " * 20)[:400].strip()
    assert len(alert) > 300
    plan = parse_reply(f"{alert}\n\nHEARTBEAT_OK", heartbeat=True, ack_max_chars=300)
    assert not plan.silent and plan.ack
    assert plan.text == alert
    assert HEARTBEAT_TOKEN not in plan.text

    plan = parse_reply(f"HEARTBEAT_OK {alert}", heartbeat=True, ack_max_chars=300)
    assert not plan.silent and plan.text == alert


def test_heartbeat_without_token_delivered_as_is():
    plan = parse_reply("Reminder: call mom.", heartbeat=True)
    assert not plan.silent and not plan.ack
    assert plan.text == "Reminder: call mom."


def test_heartbeat_ack_max_chars_is_configurable():
    plan = parse_reply("HEARTBEAT_OK " + "y" * 50, heartbeat=True, ack_max_chars=10)
    assert not plan.silent and plan.text == "y" * 50


@pytest.mark.parametrize(
    "text, silent, out",
    [
        ("HEARTBEAT_OK", True, ""),
        ("**HEARTBEAT_OK**", True, ""),
        ("Here you go. HEARTBEAT_OK", False, "Here you go."),
        ("HEARTBEAT_OK short", False, "short"),  # normal mode: no ack threshold
        ("heartbeat_ok", False, "heartbeat_ok"),
    ],
)
def test_heartbeat_token_in_normal_reply(text, silent, out):
    plan = parse_reply(text)
    assert plan.silent is silent
    assert plan.text == out


def test_stacked_tokens_are_silent():
    assert parse_reply("HEARTBEAT_OK\nNO_REPLY").silent
    assert parse_reply("NO_REPLY HEARTBEAT_OK", heartbeat=True).silent


# ---------------------------------------------------------------------------------- §3.3


@pytest.mark.parametrize(
    "text, out, reply_to",
    [
        ("see[[reply_to_current]]now", "see now", REPLY_TO_CURRENT),
        ("see [[reply_to_current]] now", "see now", REPLY_TO_CURRENT),
        ("[[reply_to_current]] Hello", "Hello", REPLY_TO_CURRENT),
        ("Hello [[REPLY_TO_CURRENT]]", "Hello", REPLY_TO_CURRENT),
        ("[[ reply_to_current ]]\nHello", "Hello", REPLY_TO_CURRENT),
        ("[[ reply_to: 123 ]] Hi", "Hi", "123"),
        ("[[reply_to:123]] Hi", "Hi", "123"),
        ("[[Reply_To:abc-9]] Hi", "Hi", "abc-9"),
        ("[[reply_to:1]] a [[reply_to:2]] b", "a b", "2"),
        # explicit id wins over reply_to_current, in either order
        ("[[reply_to_current]] a [[reply_to:7]]", "a", "7"),
        ("[[reply_to:7]] a [[reply_to_current]]", "a", "7"),
        ("no tags", "no tags", None),
        ("[[reply_to:]] empty", "[[reply_to:]] empty", None),
    ],
)
def test_reply_tags(text, out, reply_to):
    plan = parse_reply(text)
    assert plan.text == out
    assert plan.reply_to == reply_to


def test_audio_as_voice():
    plan = parse_reply("[[audio_as_voice]] Listen [AUDIO:/tmp/a.ogg]")
    assert plan.audio_as_voice
    assert plan.text == "Listen"
    assert plan.media == [MediaItem(kind="audio", target="/tmp/a.ogg")]
    assert not parse_reply("Listen [AUDIO:/tmp/a.ogg]").audio_as_voice
    assert parse_reply("[[ Audio_As_Voice ]] hi").audio_as_voice


def test_tags_inside_code_are_text():
    text = "Write `[[reply_to_current]]` to thread."
    plan = parse_reply(text)
    assert plan.text == text and plan.reply_to is None


# ---------------------------------------------------------------------------------- §3.4


@pytest.mark.parametrize(
    "marker, kind, target",
    [
        ("[IMAGE:/w/a.png]", "image", "/w/a.png"),
        ("[image: https://x/y.png]", "image", "https://x/y.png"),
        ("[Photo:pics/cat.jpg]", "image", "pics/cat.jpg"),
        ("[DOCUMENT: ./report.pdf ]", "document", "./report.pdf"),
        ("[file:notes.txt]", "document", "notes.txt"),
        ("[VIDEO:http://v.example/clip.mp4]", "video", "http://v.example/clip.mp4"),
        ("[audio:~/song.mp3]", "audio", "~/song.mp3"),
        ("[VOICE:/tmp/v.ogg]", "voice", "/tmp/v.ogg"),
        ("[ image : /w/My Photo.png ]", "image", "/w/My Photo.png"),
    ],
)
def test_media_markers(marker, kind, target):
    plan = parse_reply(f"Here it is {marker} enjoy")
    assert plan.media == [MediaItem(kind=kind, target=target)]
    assert plan.text == "Here it is enjoy"


@pytest.mark.parametrize(
    "text",
    [
        "[FOO:x]",
        "[IMAGE:]",
        "[IMAGE:   ]",
        "[image: a cat sitting on a mat]",  # neither URL nor path
        "[image: ftp://x/y.png]",
        "[image: cat.png](https://x/cat.png)",  # a Markdown link
        "[link](https://x)",
    ],
)
def test_non_markers_stay_text(text):
    plan = parse_reply(f"see {text} here")
    assert plan.media == []
    assert plan.text == f"see {text} here"


def test_markers_in_code_stay_text():
    fenced = "Example:\n```\n[IMAGE:/w/a.png]\n```\nand `[VIDEO:/w/b.mp4]` inline"
    plan = parse_reply(fenced)
    assert plan.media == []
    assert plan.text == fenced
    # an unclosed fence is code to the end
    plan = parse_reply("```md\n[IMAGE:/w/a.png]")
    assert plan.media == [] and "[IMAGE:/w/a.png]" in plan.text


def test_markers_keep_order_and_tidy_whitespace():
    plan = parse_reply(
        "Here are the files:\n[IMAGE:/w/1.png]\n[DOCUMENT:/w/2.pdf]   [VIDEO:https://x/3.mp4]\n\n\n\nThanks!"
    )
    assert [m.target for m in plan.media] == ["/w/1.png", "/w/2.pdf", "https://x/3.mp4"]
    assert plan.text == "Here are the files:\n\nThanks!"
    plan = parse_reply("Para one.\n\n[IMAGE:/w/a.png]\n\nPara two.")
    assert plan.text == "Para one.\n\nPara two."
    plan = parse_reply("- [IMAGE:/w/a.png] first\n- second")
    assert plan.text == "- first\n- second"


def test_media_only_reply_is_not_silent():
    plan = parse_reply("[IMAGE:https://x/y.png]")
    assert not plan.silent
    assert plan.text == ""
    assert plan.media == [MediaItem(kind="image", target="https://x/y.png")]
    # media with a silent token: media still go, the token does not
    plan = parse_reply("[IMAGE:https://x/y.png]\nNO_REPLY")
    assert not plan.silent and plan.text == "" and len(plan.media) == 1


def test_reply_plan_defaults():
    plan = ReplyPlan()
    assert plan == ReplyPlan(
        silent=False, text="", reply_to=None, audio_as_voice=False, media=[], ack=False
    )


def test_everything_together():
    plan = parse_reply(
        "[[reply_to_current]][[audio_as_voice]]Here's the song [AUDIO:music/a.mp3] and the cover"
        " [IMAGE:https://x/c.jpg]. NO_REPLY"
    )
    assert plan == ReplyPlan(
        silent=False,
        text="Here's the song and the cover .",
        reply_to=REPLY_TO_CURRENT,
        audio_as_voice=True,
        media=[MediaItem("audio", "music/a.mp3"), MediaItem("image", "https://x/c.jpg")],
        ack=False,
    )


# ---------------------------------------------------------------------------------- §3.5

FENCE_LINE = re.compile(r"^ {0,3}```")


def fences_balanced(chunk: str) -> bool:
    open_ = False
    for line in chunk.split("\n"):
        if FENCE_LINE.match(line):
            open_ = not open_
    return not open_


def content_signature(text: str) -> str:
    """Non-whitespace characters outside fence lines: what chunking must preserve."""
    lines = [ln for ln in text.split("\n") if not FENCE_LINE.match(ln)]
    return re.sub(r"\s+", "", "".join(lines))


def check_chunks(text: str, chunks: list[str], limit: int, max_lines: int | None = None) -> None:
    assert chunks or not text.strip()
    for c in chunks:
        assert c.strip(), "empty chunk"
        assert len(c) <= limit, (len(c), limit)
        if max_lines is not None:
            assert c.count("\n") + 1 <= max_lines, c
        assert fences_balanced(c), c
    assert content_signature("\n".join(chunks)) == content_signature(text)


def test_short_text_is_one_chunk():
    assert chunk_markdown("Hello **world**", 4000) == ["Hello **world**"]
    assert chunk_markdown("", 4000) == []
    assert chunk_markdown("  \n\n ", 4000) == []


def test_prefers_paragraph_then_line_then_space():
    para = "a" * 30 + "\n\n" + "b" * 30
    assert chunk_markdown(para, 40) == ["a" * 30, "b" * 30]
    lines = "a" * 30 + "\n" + "b" * 30
    assert chunk_markdown(lines, 40) == ["a" * 30, "b" * 30]
    words = "a" * 30 + " " + "b" * 30
    assert chunk_markdown(words, 40) == ["a" * 30, "b" * 30]
    hard = "c" * 100
    assert chunk_markdown(hard, 40) == ["c" * 40, "c" * 40, "c" * 20]
    # a paragraph break wins over a later line break when it is not too early
    mixed = "p" * 20 + "\n\n" + "q" * 10 + "\n" + "r" * 30
    assert chunk_markdown(mixed, 40)[0] == "p" * 20


def test_long_reply_with_code_block_at_4000():
    prose = " ".join(f"word{i}" for i in range(500))
    code = "\n".join(f"    line_{i} = compute({i}) + other_value_{i}" for i in range(160))
    text = f"{prose}\n\n```python\n{code}\n```\n\n{prose}"
    assert len(text) > 10_000
    chunks = chunk_markdown(text, 4000)
    assert len(chunks) >= 3
    check_chunks(text, chunks, 4000)
    # the fence is closed and reopened with its info string
    reopened = [c for c in chunks if c.startswith("```python\n")]
    assert reopened, chunks
    assert any(
        c.rstrip().endswith("```") and c.count("```") == 2 and "```python" in c for c in chunks
    )


def test_fence_info_string_carried_over():
    code = "\n".join(f"x{i} = {i}" for i in range(100))
    text = f"```js title=a\n{code}\n```"
    chunks = chunk_markdown(text, 120)
    check_chunks(text, chunks, 120)
    assert all(c.startswith("```js title=a\n") for c in chunks)
    assert all(c.endswith("\n```") for c in chunks)


def test_tilde_and_long_backtick_fences():
    code = "\n".join(f"row {i}" for i in range(60))
    for fence in ("~~~", "````"):
        text = f"{fence}text\n{code}\n{fence}\nafter"
        chunks = chunk_markdown(text, 100)
        for c in chunks:
            assert len(c) <= 100
            opens = sum(1 for ln in c.split("\n") if ln.startswith(fence))
            assert opens % 2 == 0, c


def test_no_chunk_ends_on_a_bare_fence_opener():
    text = "a" * 50 + "\n```py\n" + "\n".join(["code"] * 10) + "\n```"
    chunks = chunk_markdown(text, 60)
    check_chunks(text, chunks, 60)
    assert chunks[0] == "a" * 50


def test_discord_2000_and_17_lines():
    text = "\n".join(f"line {i}" for i in range(100))
    chunks = chunk_markdown(text, 2000, max_lines=17)
    check_chunks(text, chunks, 2000, 17)
    assert len(chunks) == 6
    assert chunks[0] == "\n".join(f"line {i}" for i in range(17))

    code = "```py\n" + "\n".join(f"print({i})" for i in range(60)) + "\n```"
    chunks = chunk_markdown(code, 2000, max_lines=17)
    check_chunks(code, chunks, 2000, 17)
    assert all(c.startswith("```py\n") for c in chunks)

    long_ = ("word " * 1000).strip()
    check_chunks(long_, chunk_markdown(long_, 2000, max_lines=17), 2000, 17)


def test_unclosed_fence_is_closed_in_last_chunk():
    text = "intro\n```sh\n" + "\n".join(f"echo {i}" for i in range(50))
    chunks = chunk_markdown(text, 100)
    check_chunks(text, chunks, 100)


def test_chunk_invalid_arguments():
    with pytest.raises(ValueError):
        chunk_markdown("x", 0)
    with pytest.raises(ValueError):
        chunk_markdown("x", 10, max_lines=0)


def _random_markdown(rng: random.Random) -> str:
    parts = []
    count = rng.randint(1, 25)
    for n in range(count):
        r = rng.random()
        if r < 0.15:
            body = "\n".join(
                " " * rng.randint(0, 8)
                + " ".join(
                    rng.choice(["x", "foo()", "a_b", "{}", "#", "y" * rng.randint(1, 90)])
                    for _ in range(rng.randint(0, 12))
                )
                for _ in range(rng.randint(0, 40))
            )
            info = rng.choice(["", "py", "python", "js title=x", "sh"])
            # only the last part may leave its fence open (CommonMark: then it runs to the end)
            closer = "" if n == count - 1 and rng.random() < 0.3 else "\n```"
            parts.append(f"\n```{info}\n{body}{closer}\n")
        elif r < 0.25:
            parts.append("z" * rng.randint(50, 5000))  # huge single word
        elif r < 0.35:
            parts.append(
                "\n".join("- item " + "w " * rng.randint(0, 30) for _ in range(rng.randint(1, 30)))
            )
        else:
            words = [
                rng.choice(["lorem", "ipsum", "**bold**", "`code`", "dolor", "sit", "amet", "_x_"])
                for _ in range(rng.randint(1, 300))
            ]
            parts.append(" ".join(words))
        parts.append(rng.choice(["\n\n", "\n", " ", "\n\n\n"]))
    return "".join(parts)


@pytest.mark.parametrize("seed", range(40))
def test_chunking_properties_random(seed):
    rng = random.Random(seed)
    for _ in range(8):
        text = _random_markdown(rng)
        limit = rng.choice([60, 97, 200, 500, 2000, 4000])
        max_lines = rng.choice([None, None, 17, 5])
        chunks = chunk_markdown(text, limit, max_lines)
        check_chunks(text, chunks, limit, max_lines)


@pytest.mark.parametrize("limit", [1, 2, 3, 5, 8, 13, 21])
def test_chunking_tiny_limits_never_exceed(limit):
    rng = random.Random(limit)
    for _ in range(20):
        text = _random_markdown(rng)[:3000]
        chunks = chunk_markdown(text, limit, rng.choice([None, 1, 2, 3]))
        assert all(0 < len(c) <= limit for c in chunks)
        assert all(c.strip() for c in chunks)
        assert re.sub(r"[\s`]", "", "".join(chunks)) == re.sub(r"[\s`]", "", text)


# ---------------------------------------------------------------------------------- resolve_media


@pytest.fixture()
def roots(tmp_path: Path):
    ws = tmp_path / "workspace"
    media = tmp_path / "state" / "media"
    ws.mkdir()
    media.mkdir(parents=True)
    (ws / "report.pdf").write_bytes(b"%PDF")
    (ws / "pics").mkdir()
    (ws / "pics" / "cat.png").write_bytes(b"png")
    (media / "voice.ogg").write_bytes(b"ogg")
    outside = tmp_path / "secret.txt"
    outside.write_text("secret")
    os.symlink(outside, ws / "link.txt")
    os.symlink(ws / "report.pdf", ws / "inside_link.pdf")
    return ws, media, outside


def test_resolve_media_accepts_workspace_files_and_urls(roots):
    ws, media, _ = roots
    items = [
        MediaItem("document", "report.pdf"),
        MediaItem("image", "./pics/cat.png"),
        MediaItem("image", "https://x.example/a/b.png?size=2"),
        MediaItem("voice", str(media / "voice.ogg")),
        MediaItem("document", "inside_link.pdf"),
        MediaItem("image", f"file://{ws / 'pics' / 'cat.png'}"),
    ]
    ok, notes = resolve_media(items, [ws, media])
    assert notes == []
    assert [m.target for m in ok] == [
        str((ws / "report.pdf").resolve()),
        str((ws / "pics" / "cat.png").resolve()),
        "https://x.example/a/b.png?size=2",
        str((media / "voice.ogg").resolve()),
        str((ws / "report.pdf").resolve()),
        str((ws / "pics" / "cat.png").resolve()),
    ]
    assert [m.name for m in ok] == [
        "report.pdf",
        "cat.png",
        "b.png",
        "voice.ogg",
        "report.pdf",
        "cat.png",
    ]
    assert all(os.path.isabs(m.target) or m.is_url for m in ok)
    assert ok[0].mime == "application/pdf"
    assert ok[1].kind == "image"


@pytest.mark.parametrize(
    "target, name",
    [
        ("../../etc/passwd", "passwd"),
        ("/etc/passwd", "passwd"),
        ("link.txt", "link.txt"),  # symlink out of the workspace
        ("missing.png", "missing.png"),
        ("pics", "pics"),  # a directory
        ("../secret.txt", "secret.txt"),
    ],
)
def test_resolve_media_refuses(roots, target, name):
    ws, media, _ = roots
    ok, notes = resolve_media([MediaItem("document", target)], [ws, media])
    assert ok == []
    assert notes == [f"[attachment unavailable: {name}]"]


def test_resolve_media_absolute_symlink_and_mixed(roots):
    ws, media, outside = roots
    items = [
        MediaItem("document", str(ws / "link.txt")),
        MediaItem("document", str(outside)),
        MediaItem("image", "pics/cat.png"),
    ]
    ok, notes = resolve_media(items, [ws, media])
    assert [m.name for m in ok] == ["cat.png"]
    assert notes == ["[attachment unavailable: link.txt]", "[attachment unavailable: secret.txt]"]


def test_resolve_media_without_roots_refuses_local():
    ok, notes = resolve_media(
        [MediaItem("image", "/etc/hostname"), MediaItem("image", "https://x/y.png")], []
    )
    assert [m.target for m in ok] == ["https://x/y.png"]
    assert notes == ["[attachment unavailable: hostname]"]


def test_chunk_rendered_rechunks_what_renders_too_long():
    from bot.rules.replies import chunk_rendered

    def grow(md: str) -> str:  # "&" renders 5 characters long, like Slack's &amp;
        return md.replace("&", "&amp;")

    text = "\n\n".join(["R&D " * 200] * 3)  # 3 paragraphs of 800 chars, 1,600 rendered
    out = chunk_rendered(text, 1000, grow)
    assert all(len(r) <= 1000 for r in out) and len(out) > 3
    assert " ".join(out).replace("&amp;", "&").split() == text.split()
    assert chunk_rendered("a & b", 1000, grow) == ["a &amp; b"]
    # the measure is the caller's: here the first element of a (text, extra) pair
    pairs = chunk_rendered("x " * 600, 500, lambda md: (md.strip(), None), lambda r: len(r[0]))
    assert all(len(t) <= 500 for t, _ in pairs)


@pytest.mark.parametrize("before", ["", "intro\n"])
def test_a_fence_whose_first_line_is_over_the_limit_never_yields_an_empty_block(before):
    long_line = '{"k":"' + "v" * 150 + '"}'  # minified JSON in tool output
    chunks = chunk_markdown(f"{before}```json\n{long_line}\n```\n", 50)
    assert all(len(c) <= 50 for c in chunks)
    assert not [c for c in chunks if c.strip() in ("```json\n```", "```\n```")]
    inner = "".join(
        c.removeprefix("```json\n").removesuffix("\n```") for c in chunks if c.startswith("```json")
    )
    assert inner.replace("\n", "") == long_line  # nothing lost, nothing added


def test_an_indented_fence_is_reopened_with_its_indentation():
    md = "- item\n  ```py\n" + "  a = 1\n" * 30 + "  ```\n"
    chunks = chunk_markdown(md, 70)
    assert len(chunks) > 2
    for c in chunks[1:]:
        assert c.startswith("  ```py\n") and c.endswith("\n  ```")


@pytest.mark.parametrize(
    "marker, target",
    [
        ('[FILE:"/tmp/My File.png"]', "/tmp/My File.png"),
        ("[IMAGE:'/tmp/a b.png']", "/tmp/a b.png"),
        ("[IMAGE:<https://x.y/a.png>]", "https://x.y/a.png"),
        ("[IMAGE:/tmp/plain.png]", "/tmp/plain.png"),  # the unquoted twin
    ],
)
def test_quoted_media_targets_lose_their_quotes(marker, target):
    plan = parse_reply(f"here {marker}")
    assert [m.target for m in plan.media] == [target] and plan.text == "here"


# ---------------------------------------------------------------------------------- edges
# Pinned by a mutation test (bash .ci/mutation): boundaries, fences, tidying, media names.


@pytest.mark.parametrize(
    "text, out, targets",
    [
        # ~~~ fences are code like ``` fences; text after a closed fence is prose again
        (
            "~~~\n[IMAGE:/w/a.png]\n~~~\nafter [IMAGE:/w/b.png]",
            "~~~\n[IMAGE:/w/a.png]\n~~~\nafter",
            ["/w/b.png"],
        ),
        ("```\nx\n```\nThen [IMAGE:/w/a.png]", "```\nx\n```\nThen", ["/w/a.png"]),
        # prose before a fence is prose, every line of it
        ("See [IMAGE:/w/a.png]\n```\ncode\n```", "See\n```\ncode\n```", ["/w/a.png"]),
        ("one\ntwo [IMAGE:/w/a.png]\n```\ncode\n```", "one\ntwo\n```\ncode\n```", ["/w/a.png"]),
        # CRLF line endings: the closing fence still closes
        (
            "```\r\n[IMAGE:/w/a.png]\r\n```\r\nSee [IMAGE:/w/b.png]",
            "```\r\n[IMAGE:/w/a.png]\r\n```\r\nSee",
            ["/w/b.png"],
        ),
        # a closing fence may be followed by spaces only (CommonMark): these do not close
        (
            "```\n[IMAGE:/w/a.png]\n```X\nSee [IMAGE:/w/b.png]",
            "```\n[IMAGE:/w/a.png]\n```X\nSee [IMAGE:/w/b.png]",
            [],
        ),
        (
            "```\n[IMAGE:/w/a.png]\n```\u00a0\nSee [IMAGE:/w/b.png]",
            "```\n[IMAGE:/w/a.png]\n```\u00a0\nSee [IMAGE:/w/b.png]",
            [],
        ),
        ("```\n[IMAGE:/w/a.png]\n```  \nSee [IMAGE:/w/b.png]", None, ["/w/b.png"]),
        # inline code spans: at the very start, after an unmatched run, before prose
        ("`[IMAGE:/w/a.png]` and [IMAGE:/w/b.png]", "`[IMAGE:/w/a.png]` and", ["/w/b.png"]),
        (
            "a `` b `[IMAGE:/w/a.png]` c [IMAGE:/w/b.png]",
            "a `` b `[IMAGE:/w/a.png]` c",
            ["/w/b.png"],
        ),
        ("Use a ` backtick [IMAGE:/w/b.png]", "Use a ` backtick", ["/w/b.png"]),
        ("[IMAGE:/w/b.png] see `x`", "see `x`", ["/w/b.png"]),
    ],
)
def test_code_detection_edges(text, out, targets):
    plan = parse_reply(text)
    if out is not None:
        assert plan.text == out
    assert [m.target for m in plan.media] == targets


@pytest.mark.parametrize(
    "text, out",
    [
        ("see [[reply_to_current]] [[audio_as_voice]] now", "see now"),
        ("see [[reply_to_current]]  [[audio_as_voice]]now", "see now"),
        ("Here:\n[IMAGE:/w/a.png]\nThanks", "Here:\nThanks"),
        ("Here:\n  [IMAGE:/w/a.png] [IMAGE:/w/b.png]  \nThanks", "Here:\nThanks"),
        ("Intro\n[IMAGE:/w/a.png] caption", "Intro\ncaption"),
        ("- a\n  [IMAGE:/w/a.png] b", "- a\n  b"),
        ("See this: [IMAGE:/w/a.png]\nNext", "See this:\nNext"),
        ("See this: [IMAGE:/w/a.png]", "See this:"),
    ],
)
def test_removed_directives_leave_tidy_text(text, out):
    assert parse_reply(text).text == out


def test_flags_are_booleans():
    plan = parse_reply("hi")
    assert plan.audio_as_voice is False and plan.ack is False and plan.reply_to is None
    assert parse_reply("[[audio_as_voice]] hi").audio_as_voice is True


@pytest.mark.parametrize(
    "text, silent",
    [("{oops}", False), ("{not: json}", False), ("{}", False), ('{"action": "no_reply"}', True)],
)
def test_is_silent_json_edges(text, silent):
    assert is_silent(text) is silent


@pytest.mark.parametrize(
    "text, expected",
    [
        ("Done. NO_REPLY NO_REPLY", "Done."),  # stripped repeatedly from the end
        ("NO_REPLY NO_REPLY: not needed", "not needed"),  # and from the start
        ("Done.\n\nNO_REPLY" + " " * 8, "Done."),
        ("Done.\n\nNO_REPLY\n\n\n\n\n\n", "Done."),
        ("  Done. NO_REPLY", "Done."),  # the result is trimmed once a token went
        ("  hello  ", "  hello  "),  # no token: the text comes back unchanged
        ("NO_REPLY\u2013 dash", "dash"),
    ],
)
def test_strip_silent_token_edges(text, expected):
    assert strip_silent_token(text) == expected


@pytest.mark.parametrize(
    "text, rest, found",
    [
        # at most 4 non-word characters after the token: 4 strip, 5 do not
        ("x HEARTBEAT_OK....", "x....", True),
        ("x HEARTBEAT_OK.....", "x HEARTBEAT_OK.....", False),
        ("x HEARTBEAT_OK!?!?", "x!?!?", True),
        ("x HEARTBEAT_OK!?!?!", "x HEARTBEAT_OK!?!?!", False),
        # whitespace and markup around the punctuation do not count (decision; SPEC is silent)
        ("x HEARTBEAT_OK !!", "x!!", True),
        ("x HEARTBEAT_OK ! ! ! !", "x!!!!", True),
        ("x HEARTBEAT_OK**.**", "x.", True),
        # repeatedly at the end
        ("Disk full. HEARTBEAT_OK HEARTBEAT_OK", "Disk full.", True),
    ],
)
def test_strip_heartbeat_token_boundaries(text, rest, found):
    assert strip_heartbeat_token(text) == (rest, found)


def test_ack_max_chars_boundary_is_inclusive():
    for limit in (300, 10):
        at_limit = "y" * limit
        plan = parse_reply(f"HEARTBEAT_OK {at_limit}", heartbeat=True, ack_max_chars=limit)
        assert plan.silent and plan.ack
        over = "y" * (limit + 1)
        plan = parse_reply(f"HEARTBEAT_OK {over}", heartbeat=True, ack_max_chars=limit)
        assert not plan.silent and plan.ack and plan.text == over


def test_ack_max_chars_defaults_to_300():
    assert parse_reply("HEARTBEAT_OK " + "z" * 300, heartbeat=True).silent
    plan = parse_reply("HEARTBEAT_OK " + "z" * 301, heartbeat=True)
    assert not plan.silent and plan.text == "z" * 301


def test_a_reply_that_was_only_the_ack_is_dropped_and_marked():
    plan = parse_reply("HEARTBEAT_OK")  # normal mode
    assert plan == ReplyPlan(silent=True, ack=True)


@pytest.mark.parametrize(
    "text",
    [
        "HEARTBEAT_OK NO_REPLY HEARTBEAT_OK",
        "NO_REPLY HEARTBEAT_OK NO_REPLY HEARTBEAT_OK NO_REPLY HEARTBEAT_OK NO_REPLY",
    ],
)
def test_sandwiched_tokens_are_silent(text):
    assert parse_reply(text).silent
    assert parse_reply(text, heartbeat=True).silent


def test_deeply_stacked_leading_tokens_never_leak():
    # SPEC §3.1: a leading NO_REPLY is removed, however many layers of tokens precede it
    text = "NO_REPLY HEARTBEAT_OK NO_REPLY HEARTBEAT_OK NO_REPLY HEARTBEAT_OK NO_REPLY Hello"
    assert parse_reply(text).text == "Hello"


@pytest.mark.parametrize(
    "marker, target",
    [
        ("[IMAGE:\u201c/tmp/My File.png\u201d]", "/tmp/My File.png"),
        ("[IMAGE:\u2018/tmp/a b.png\u2019]", "/tmp/a b.png"),
        ('[IMAGE:/tmp/x.png"]', '/tmp/x.png"'),  # only a matching pair is removed
        ('[IMAGE:"/tmp/x.png]', '"/tmp/x.png'),
        ("[FILE:file:///w/a.pdf]", "file:///w/a.pdf"),
        ("[FILE:FILE:///w/a.pdf]", "FILE:///w/a.pdf"),
        ("[FILE:docs/README]", "docs/README"),  # a directory part makes a path
        ("[FILE:REPORT.PDF]", "REPORT.PDF"),  # so does an extension, any case
    ],
)
def test_media_target_forms(marker, target):
    plan = parse_reply(f"here {marker}")
    assert [m.target for m in plan.media] == [target]
    assert plan.text == "here"


@pytest.mark.parametrize(
    "text",
    ["[IMAGE:https://]", "[IMAGE:http://]", "[FILE:file://]", '[IMAGE:""]', "[IMAGE:README]"],
)
def test_incomplete_targets_stay_text(text):
    plan = parse_reply(f"see {text}")
    assert plan.media == [] and plan.text == f"see {text}"


@pytest.mark.parametrize(
    "target, name, mime",
    [
        ("http://x.example/a/b.png?size=2", "b.png", "image/png"),
        ("https://x.example/docs/", "docs", ""),
        (
            "https://x.example/files/report.DOCX",
            "report.DOCX",
            "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
        ),
        ("https://x.example/", "file", ""),
        ("https://x.example/a", "a", ""),
    ],
)
def test_resolve_media_urls(target, name, mime):
    ok, notes = resolve_media([MediaItem("image", target)], [])
    assert notes == []
    assert ok == [MediaItem(kind="image", target=target, name=name, mime=mime)]


def test_resolve_media_keeps_given_name_and_mime():
    item = MediaItem("document", "https://x.example/a", name="a.pdf", mime="application/pdf")
    assert resolve_media([item], []) == ([item], [])


@pytest.mark.parametrize("target, name", [("pics/", "pics"), ("missing/draft.DOCX", "draft.DOCX")])
def test_resolve_media_refusal_names(roots, target, name):
    ws, media, _ = roots
    refused = ([], [f"[attachment unavailable: {name}]"])
    assert resolve_media([MediaItem("document", target)], [ws, media]) == refused


def test_resolve_media_relative_path_without_roots_is_refused(roots):
    ws, media, _ = roots
    # the twin: with the workspace as a root the same path resolves
    ok, notes = resolve_media([MediaItem("image", "pics/cat.png")], [ws, media])
    assert [m.name for m in ok] == ["cat.png"] and notes == []
    # without roots it has nothing to resolve against: refused, not an error
    ok, notes = resolve_media([MediaItem("image", "pics/cat.png")], [])
    assert ok == [] and notes == ["[attachment unavailable: cat.png]"]


def test_resolve_media_unknown_type_and_a_broken_root(roots, tmp_path):
    ws, _media, _ = roots
    (ws / "notes.zzq").write_bytes(b"?")
    loop = tmp_path / "loop"
    os.symlink(loop, loop)  # resolving it fails; the other roots still count
    ok, notes = resolve_media([MediaItem("document", str(ws / "notes.zzq"))], [loop, ws])
    assert notes == []
    assert ok == [
        MediaItem("document", str((ws / "notes.zzq").resolve()), name="notes.zzq", mime="")
    ]
