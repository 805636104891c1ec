"""The reply pipeline: what the model wrote → what gets delivered.

Everything here is pure (no I/O) except :func:`resolve_media`, which stats files.

The pipeline (:func:`parse_reply`):

1. a whole-text ``NO_REPLY`` (or ``{"action": "NO_REPLY"}``) is silent;
2. reply tags (``[[reply_to_current]]``, ``[[reply_to:<id>]]``), ``[[audio_as_voice]]`` and media
   markers (``[IMAGE:<target>]`` …) are extracted from the text outside code;
3. ``NO_REPLY`` tokens at the edges are stripped;
4. ``HEARTBEAT_OK`` tokens at the edges are stripped (ack handling on heartbeat runs);
5. whitespace left by removed markers is tidied; an empty result without media is silent.

Chunking (``channels.chunking``, re-exported here for the core) works on the Markdown text;
adapters render each chunk for their platform afterwards (``channels.formatting``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field

from channels.base import MediaItem, MediaKind
from channels.chunking import chunk_markdown, chunk_rendered, fence_closes, fence_open

__all__ = [
    "HEARTBEAT_TOKEN",
    "REPLY_TO_CURRENT",
    "SILENT_TOKEN",
    "ReplyPlan",
    "chunk_markdown",
    "chunk_rendered",
    "closes_span",
    "is_silent",
    "parse_reply",
    "strip_heartbeat_token",
    "strip_silent_token",
]

SILENT_TOKEN = "NO_REPLY"
HEARTBEAT_TOKEN = "HEARTBEAT_OK"
REPLY_TO_CURRENT = "current"
"""``ReplyPlan.reply_to`` sentinel: reply to the message that triggered the turn."""


@dataclass
class ReplyPlan:
    """What to deliver for one model reply.

    ``text`` is Markdown with tags and valid media markers removed.  ``reply_to`` is
    :data:`REPLY_TO_CURRENT` for ``[[reply_to_current]]``, an explicit id for
    ``[[reply_to:<id>]]``, or ``None``.  ``media`` targets are as written by the model (not yet
    checked; see :func:`resolve_media`).  ``ack`` is true when a ``HEARTBEAT_OK`` token was
    stripped.  When ``silent`` is true nothing is delivered (``text`` is empty, ``media`` empty).
    """

    silent: bool = False
    text: str = ""
    reply_to: str | None = None
    audio_as_voice: bool = False
    media: list[MediaItem] = field(default_factory=list)
    ack: bool = False


# --------------------------------------------------------------------------------------------
# Code detection (fenced blocks and inline code spans are never touched by directives)


def _split_fences(text: str) -> list[tuple[bool, str]]:
    """Split into ``(is_code, part)``; fenced blocks (fence lines included) are code.

    An unclosed fence runs to the end of the text (CommonMark).
    """
    parts: list[tuple[bool, str]] = []
    buf: list[str] = []
    fence: str | None = None
    for line in text.splitlines(keepends=True):
        bare = line.rstrip("\r\n")
        if fence is None:
            opened = fence_open(bare)
            if opened:
                if buf:
                    parts.append((False, "".join(buf)))
                buf = [line]
                fence = opened[0]
            else:
                buf.append(line)
        else:
            buf.append(line)
            if fence_closes(bare, fence):
                parts.append((True, "".join(buf)))
                buf = []
                fence = None
    if buf:
        parts.append((fence is not None, "".join(buf)))
    return parts


_BACKTICKS_RE = re.compile(r"`+")


def _split_inline_code(text: str) -> list[tuple[bool, str]]:
    """Split prose into ``(is_code, part)`` around inline code spans (matching backtick runs)."""
    parts: list[tuple[bool, str]] = []
    pos = 0
    start_text = 0
    while True:
        m = _BACKTICKS_RE.search(text, pos)
        if not m:
            break
        run = m.group(0)
        closer = re.compile(r"(?<!`)" + re.escape(run) + r"(?!`)")
        c = closer.search(text, m.end())
        if not c:
            pos = m.end()
            continue
        if m.start() > start_text:
            parts.append((False, text[start_text : m.start()]))
        parts.append((True, text[m.start() : c.end()]))
        pos = start_text = c.end()
    if start_text < len(text):
        parts.append((False, text[start_text:]))
    return parts


def _split_code(text: str) -> list[tuple[bool, str]]:
    """``(is_code, part)`` pieces: fenced blocks and inline code spans are code."""
    out: list[tuple[bool, str]] = []
    for is_code, part in _split_fences(text):
        if is_code:
            out.append((True, part))
        else:
            out.extend(_split_inline_code(part))
    return out


def _map_prose(text: str, fn: Callable[[str], str]) -> str:
    return "".join(part if is_code else fn(part) for is_code, part in _split_code(text))


# --------------------------------------------------------------------------------------------
# Silent replies

# Markdown that may wrap the token (``**NO_REPLY**``, `` `NO_REPLY` ``) counts as part of it.
_MD_WRAP = r"[*_~`]*"
_SILENT_WHOLE_RE = re.compile(
    r"\s*" + _MD_WRAP + r"\s*NO_REPLY\s*" + _MD_WRAP + r"\s*", re.IGNORECASE
)
# A trailing token starts after a non-word character, or with markup glued to a word
# (``reasoning**NO_REPLY``: the ``**`` goes with the token unless it closes a span).
_SILENT_TRAILING_RE = re.compile(
    r"(?:(?<!\w)|(?<=\w)(?=[*~`]))(?P<wrap>" + _MD_WRAP + r")NO_REPLY" + _MD_WRAP + r"\W{0,4}$",
    re.IGNORECASE,
)
# a leading token goes with the separator after it: "NO_REPLY: x", "NO_REPLY - x", "NO_REPLY—x"
_SILENT_LEADING_RE = re.compile(
    r"^\s*" + _MD_WRAP + r"NO_REPLY(?!_)(?P<wrap>" + _MD_WRAP + r")(?:\s*[:\-\u2013\u2014]+)?\s*",
    re.IGNORECASE,
)


def closes_span(text: str, wrap: str) -> bool:
    """``wrap`` (markup glued to a token) pairs with an odd run of the same markup in
    ``text``: it belongs to the text (``**bold**NO_REPLY``), not to the token."""
    return bool(wrap) and text.count(wrap) % 2 == 1


def is_silent(text: str) -> bool:
    """True when the whole reply means "say nothing"."""
    if text is None:
        return True
    stripped = text.strip()
    if _SILENT_WHOLE_RE.fullmatch(stripped):
        return True
    if stripped.startswith("{") and stripped.endswith("}"):
        try:
            data = json.loads(stripped)
        except ValueError:
            return False
        if isinstance(data, dict) and list(data) == ["action"]:
            value = data["action"]
            return isinstance(value, str) and value.strip().upper() == SILENT_TOKEN
    return False


def strip_silent_token(text: str) -> str:
    """Remove ``NO_REPLY`` glued to the start or trailing after real content.

    ``Done.\\n\\nNO_REPLY`` → ``Done.``; ``NO_REPLYThe user…`` → ``The user…``; a token in the
    middle of the text is left alone.  Matching ignores case but needs a word boundary before a
    trailing token (``SEND_NO_REPLY`` is not a token).  The result is stripped of surrounding
    whitespace when a token was removed; otherwise the text is returned unchanged.
    """
    out = text
    changed = True
    while changed:
        changed = False
        trimmed = out.rstrip()
        m = _SILENT_TRAILING_RE.search(trimmed)
        if m:
            head = trimmed[: m.start()]
            out = (head + m.group("wrap") if closes_span(head, m.group("wrap")) else head).rstrip()
            changed = True
        m = _SILENT_LEADING_RE.match(out)
        if m:
            rest = out[m.end() :]
            out = (m.group("wrap") + rest if closes_span(rest, m.group("wrap")) else rest).lstrip()
            changed = True
    return out if out is text else out.strip()


# --------------------------------------------------------------------------------------------
# Heartbeat acks

# Markup that may wrap the token: HTML tags, &nbsp; and runs of * ` ~ _
_WRAP = r"(?:<[^<>\n]*>|&nbsp;|[*`~_])"
_HB_START_RE = re.compile(r"^\s*" + _WRAP + r"*" + HEARTBEAT_TOKEN + _WRAP + r"*")
_HB_END_RE = re.compile(
    r"\s*" + _WRAP + r"*" + HEARTBEAT_TOKEN + r"(?P<tail>(?:" + _WRAP + r"|\W)*)$"
)
_WRAP_RE = re.compile(_WRAP)
_INNER_SPACE_RE = re.compile(r"(?<=\S)[ \t\u00a0]{2,}")


def _collapse_whitespace(text: str) -> str:
    def prose(part: str) -> str:
        part = _INNER_SPACE_RE.sub(" ", part)
        part = re.sub(r"[ \t]+(?=\n)", "", part)
        return re.sub(r"\n[ \t]*\n(?:[ \t]*\n)+", "\n\n", part)

    return _map_prose(text, prose).strip()


def strip_heartbeat_token(text: str) -> tuple[str, bool]:
    """Strip ``HEARTBEAT_OK`` at the edges of ``text``; returns ``(rest, found)``.

    Case-sensitive.  Markup around the token (``**HEARTBEAT_OK**``, ``<b>HEARTBEAT_OK</b>``,
    ``&nbsp;``) counts as part of it.  At the end the token may be followed by at most 4
    non-word characters, which are kept (``respond HEARTBEAT_OK.`` → ``respond.``).  Stripping
    repeats while a token sits at an edge.  When a token was found, whitespace runs collapse
    (outside code: runs of spaces inside a line become one space, blank-line runs become one
    blank line; indentation and code are kept).  A token only in the middle leaves the text
    unchanged.
    """
    if not text or HEARTBEAT_TOKEN not in text:
        return text, False
    out = text
    found = False
    while True:
        m = _HB_START_RE.match(out)
        if m:
            out = out[m.end() :]
            found = True
            continue
        trimmed = out.rstrip()
        m = _HB_END_RE.search(trimmed)
        if m:
            tail = _WRAP_RE.sub("", m.group("tail"))
            tail = re.sub(r"\s+", "", tail)
            if len(tail) <= 4:
                before = trimmed[: m.start()].rstrip()
                out = before + tail if before.strip() else ""
                found = True
                continue
        break
    if not found:
        return text, False
    return _collapse_whitespace(out), True


# --------------------------------------------------------------------------------------------
# Directives: reply tags, [[audio_as_voice]], media markers

_REPLY_CURRENT_RE = r"\[\[\s*reply_to_current\s*\]\]"
_REPLY_ID_RE = r"\[\[\s*reply_to\s*:\s*(?P<id>[^\[\]\s](?:[^\[\]\n]*?[^\[\]\s])?)\s*\]\]"
_VOICE_RE = r"\[\[\s*audio_as_voice\s*\]\]"
_MARKER_RE = (
    r"\[\s*(?P<kind>image|photo|document|file|video|audio|voice)\s*:(?P<target>[^\[\]\n]*)\]"
    r"(?!\()"  # `[image: x.png](url)` is a Markdown link, not a marker
)
_DIRECTIVE_RE = re.compile(
    "|".join(
        [
            f"(?P<current>{_REPLY_CURRENT_RE})",
            f"(?P<reply>{_REPLY_ID_RE})",
            f"(?P<voice>{_VOICE_RE})",
            f"(?P<marker>{_MARKER_RE})",
        ]
    ),
    re.IGNORECASE,
)

_KINDS: dict[str, MediaKind] = {
    "image": "image",
    "photo": "image",
    "document": "document",
    "file": "document",
    "video": "video",
    "audio": "audio",
    "voice": "voice",
}

_HOLE = "\x00"  # where a directive was removed; tidied afterwards


def _unquote_target(target: str) -> str:
    """``"/path/My File.png"`` → ``/path/My File.png`` (models quote paths with spaces)."""
    for a, b in (
        ('"', '"'),
        ("'", "'"),
        ("`", "`"),
        ("<", ">"),
        ("\u201c", "\u201d"),
        ("\u2018", "\u2019"),
    ):
        if len(target) >= 2 and target.startswith(a) and target.endswith(b):
            return target[1:-1].strip()
    return target


def _is_media_target(target: str) -> bool:
    """An http(s) URL or something that looks like a local path."""
    if not target:
        return False
    lower = target.lower()
    if lower.startswith(("http://", "https://")):
        return len(target) > len("https://") and not any(c.isspace() for c in target)
    if re.match(r"^[a-z][a-z0-9+.\-]*://", lower):
        return lower.startswith("file://") and len(target) > len("file://")
    # a path: has a directory part ("/x", "~/x", "./x", "a/b") or a file extension
    return "/" in target or bool(re.search(r"\.[A-Za-z0-9]{1,8}$", target))


def _extract_directives(text: str) -> tuple[str, str | None, str | None, bool, list[MediaItem]]:
    """Remove tags and valid markers from prose; returns
    ``(text_with_holes, explicit_id, current, audio_as_voice, media)``."""
    explicit: str | None = None
    current = False
    voice = False
    media: list[MediaItem] = []

    def repl(m: re.Match[str]) -> str:
        nonlocal explicit, current, voice
        if m.group("current"):
            current = True
        elif m.group("reply"):
            explicit = m.group("id").strip()
        elif m.group("voice"):
            voice = True
        else:
            target = _unquote_target(m.group("target").strip())
            if not _is_media_target(target):
                return str(m.group(0))
            media.append(MediaItem(kind=_KINDS[m.group("kind").lower()], target=target))
        return _HOLE

    body = _map_prose(text, lambda part: _DIRECTIVE_RE.sub(repl, part))
    return body, explicit, ("current" if current else None), voice, media


def _tidy(text: str) -> str:
    """Close the gaps left by removed directives, collapse blank-line runs, trim."""
    if _HOLE in text:
        text = re.sub(_HOLE + r"(?:[ \t]*" + _HOLE + r")+", _HOLE, text)
        # a line that held only directives disappears
        text = re.sub(r"(?m)^[ \t]*" + _HOLE + r"[ \t]*(?:\n|$)", "", text)
        # between two words: one space
        text = re.sub(r"(?<=\S)[ \t]*" + _HOLE + r"[ \t]*(?=\S)", " ", text)
        # at the start of a line: keep the indentation
        text = re.sub(r"(?m)^([ \t]*)" + _HOLE + r"[ \t]*", r"\1", text)
        # at the end of a line
        text = re.sub(r"[ \t]*" + _HOLE + r"[ \t]*(?=\n|$)", "", text)
        text = text.replace(_HOLE, "")

    def prose(part: str) -> str:
        return re.sub(r"\n[ \t]*\n(?:[ \t]*\n)+", "\n\n", part)

    return _map_prose(text, prose).strip()


def parse_reply(text: str, *, heartbeat: bool = False, ack_max_chars: int = 300) -> ReplyPlan:
    """Turn the model's final text into a :class:`ReplyPlan` (–§3.4).

    Reply-tag precedence: an explicit ``[[reply_to:<id>]]`` wins over ``[[reply_to_current]]``
    wherever the two appear; among explicit ids the last one wins.

    Silence: the whole text being the silent token (after tags are removed) is silent; if the
    reply carries media markers, the media are still delivered with empty text.  On a heartbeat
    run a stripped ``HEARTBEAT_OK`` with ≤ ``ack_max_chars`` of remaining text and no media is
    silent; longer text is delivered without the token.  An empty text without media is silent.
    """
    raw = text or ""
    if is_silent(raw):
        return ReplyPlan(silent=True)

    body, explicit, current, voice, media = _extract_directives(raw)
    body = _tidy(body)
    reply_to = explicit or current

    ack = False
    while True:  # tokens may be stacked ("HEARTBEAT_OK NO_REPLY"): strip until nothing changes
        before = body
        if is_silent(body):
            body = ""
            break
        body = strip_silent_token(body)
        rest, found = strip_heartbeat_token(body)
        if found:
            ack = True
            body = rest
        if body == before:
            break

    if ack and heartbeat and len(body) <= ack_max_chars and not media:
        return ReplyPlan(silent=True, ack=True)
    if not body.strip() and not media:
        # tag-only text (``[[audio_as_voice]]``): nothing to send, but the tags are kept
        return ReplyPlan(silent=True, reply_to=reply_to, audio_as_voice=voice, ack=ack)
    return ReplyPlan(
        silent=False,
        text=body.strip(),
        reply_to=reply_to,
        audio_as_voice=voice,
        media=media,
        ack=ack,
    )
