"""Signal ⇄ Chela translation as pure functions: no I/O, no asyncio, no clock.

Inbound: a signal-cli envelope (the ``envelope`` of a ``receive`` event) becomes an
``InboundMessage`` or ``None`` (receipts, typing, sync, reactions, our own messages, empty
or malformed envelopes).  A field of the wrong type counts as absent, except where that
would misroute the message or leave it without an id: a group id that is not a string, or
no usable timestamp among the present ones, drops the envelope.  Nothing here raises on
bad input.

Outbound: an ``OutboundMessage`` becomes the list of JSON-RPC ``send`` params to issue, in
order (``plan_send``); reactions and typing get their params too.

The adapter state these need is passed in explicitly: the bot's own ids (``Me``), the kinds
of chats seen inbound (chat id → ``"group"`` | ``"direct"``), the authors of messages seen
and sent ((chat id, message id) → (author, text snippet); chat id ``""`` matches any chat)
and the timestamps of messages the bot sent.  Any object with ``get`` (a dict, the
adapter's ``BoundedLRU``) does for the first two, any container for the last.

Signal conventions kept here:

* Mention offsets and lengths, and text-style ranges, count UTF-16 code units; a mention
  is a U+FFFC placeholder in the text, replaced by ``@name``.
* A DM chat id is the peer's number (``+1555…``) or, when hidden, its service id (UUID); a
  group chat id is the group's base64 ``groupId``.  Outbound, a chat's kind comes from what
  was seen inbound, else from its shape (``+digits`` or a UUID is direct, anything else a
  group); ``group:<id>`` and ``direct:<id>`` force it.
* Message ids are the sent timestamps (milliseconds) as strings.  A quote or reaction names
  the target's author too.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Container
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from channels.base import ChannelError
from channels.base import OutboundMessage
from channels.chunking import chunk_markdown
from channels.formatting import markdown_to_signal
from channels.signal.inbound import (  # the inbound half, re-exported: callers import it from here
    CHANNEL,
    MENTION_PLACEHOLDER,
    Me,
    apply_mentions,
    attachment_refs,
    dedupe_key,
    envelope_for,
    inbound_message,
    media_kind,
    own_uuid_in,
    unwrap_event,
    _PHONE_RE,
)

__all__ = [
    "CHANNEL",
    "MENTION_PLACEHOLDER",
    "Me",
    "apply_mentions",
    "attachment_refs",
    "dedupe_key",
    "envelope_for",
    "inbound_message",
    "media_kind",
    "own_uuid_in",
    "unwrap_event",
]


_UUID_RE = re.compile(
    r"^(PNI:)?[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$"
)

_MEDIA_LABELS = {
    "image": "Image",
    "document": "File",
    "video": "Video",
    "audio": "Audio",
    "voice": "Voice",
}


class ChatKinds(Protocol):
    """chat id → ``"group"`` | ``"direct"``, as seen inbound."""

    def get(self, key: str, /) -> str | None: ...


class Authors(Protocol):
    """(chat id, message id) → (author, text snippet); chat id ``""`` for any chat."""

    def get(self, key: tuple[str, str], /) -> tuple[str, str] | None: ...


# ----------------------------------------------------------------------------- small helpers


def as_timestamp(message_id: object) -> int | None:
    """A Signal message id (a sent timestamp, as a string or number) as an int."""
    if isinstance(message_id, bool) or not isinstance(message_id, (str, int)):
        return None
    try:
        return int(message_id)
    except ValueError:
        return None


def _hard_split(text: str, limit: int) -> list[str]:
    """Last-resort split of an already rendered chunk that is still too long."""
    if len(text) <= limit:
        return [text]
    out = []
    while len(text) > limit:
        cut = text.rfind("\n", 0, limit)
        if cut < limit // 2:
            cut = text.rfind(" ", 0, limit)
        if cut < limit // 2:
            cut = limit
        out.append(text[:cut].rstrip())
        text = text[cut:].lstrip()
    if text:
        out.append(text)
    return [c for c in out if c]


# ----------------------------------------------------------------------------- outbound


def send_target(chat_id: str, chat_kinds: ChatKinds) -> tuple[str, dict[str, Any]]:
    """(clean chat id, recipient params) for a chat id."""
    if chat_id.startswith("group:"):
        cid = chat_id[len("group:") :]
        return cid, {"groupId": cid}
    if chat_id.startswith("direct:"):
        cid = chat_id[len("direct:") :]
        return cid, {"recipient": [cid]}
    kind = chat_kinds.get(chat_id)
    if kind is None:
        kind = "direct" if (_PHONE_RE.match(chat_id) or _UUID_RE.match(chat_id)) else "group"
    if kind == "group":
        return chat_id, {"groupId": chat_id}
    return chat_id, {"recipient": [chat_id]}


def remembered(authors: Authors, chat_id: str, message_id: str) -> tuple[str, str] | None:
    """(author, text snippet) of a message seen or sent, looked up in its chat first."""
    return authors.get((chat_id, message_id)) or authors.get(("", message_id))


def _author(
    chat_id: str,
    target: dict[str, Any],
    ts: int,
    *,
    me: Me,
    authors: Authors,
    own_sent: Container[int],
) -> tuple[str, str] | None:
    known = remembered(authors, chat_id, str(ts))
    if known is not None:
        return known
    if ts in own_sent:
        return me.account, ""
    if "recipient" in target:
        return chat_id, ""  # in a DM the other side is the likely author
    return None


def quote_params(
    reply_to_id: str | None,
    chat_id: str,
    target: dict[str, Any],
    *,
    me: Me,
    authors: Authors,
    own_sent: Container[int],
) -> dict[str, Any] | None:
    """``quoteTimestamp``/``quoteAuthor``/``quoteMessage`` for a reply, or ``None`` when the
    id is not a Signal timestamp or its author in a group is unknown (send unquoted)."""
    ts = as_timestamp(reply_to_id) if reply_to_id else None
    if ts is None:
        return None
    found = _author(chat_id, target, ts, me=me, authors=authors, own_sent=own_sent)
    if found is None:
        return None
    author, text = found
    quote: dict[str, Any] = {"quoteTimestamp": ts, "quoteAuthor": author}
    if text:
        quote["quoteMessage"] = text
    return quote


@dataclass
class SendPlan:
    """What ``plan_send`` decided: the clean chat id, the ``send`` params in order (a
    ``textStyle`` entry where the chunk has styles and styles are on), and the quote."""

    chat_id: str
    sends: list[dict[str, Any]] = field(default_factory=list)
    quote: dict[str, Any] | None = None


def plan_send(
    msg: OutboundMessage,
    *,
    me: Me,
    chunk_limit: int,
    text_styles: bool = True,
    chat_kinds: ChatKinds,
    authors: Authors,
    own_sent: Container[int] = frozenset(),
    local_files: Collection[str] = (),
) -> SendPlan:
    """The ``send`` calls for one outbound message.

    Markdown is chunked at ``chunk_limit`` then rendered to plain text plus style ranges.
    Attachments: ``local_files`` are the targets the caller found to be files on disk;
    those go with the last chunk, URLs and missing files become lines of text."""
    chat_id, target = send_target(msg.chat_id, chat_kinds)
    chunks, styles = _text_chunks(msg.text, chunk_limit, text_styles)
    paths, notes = _media_parts(msg, local_files)
    if notes:
        tail = "\n".join(notes)
        if chunks and len(chunks[-1]) + 2 + len(tail) <= chunk_limit:
            chunks[-1] = f"{chunks[-1]}\n\n{tail}"
        else:
            chunks.extend(_hard_split(tail, chunk_limit))
    plan = SendPlan(chat_id)
    if not chunks and not paths:
        return plan
    plan.quote = quote_params(
        msg.reply_to_id, chat_id, target, me=me, authors=authors, own_sent=own_sent
    )
    chunks = chunks or [""]
    for i, text in enumerate(chunks):
        params: dict[str, Any] = dict(target)
        if text:
            params["message"] = text
        if plan.quote and (i == 0 or msg.reply_mode == "all"):
            params.update(plan.quote)
        if i == len(chunks) - 1 and paths:
            params["attachments"] = paths
        if i in styles:
            params["textStyle"] = styles[i]
        plan.sends.append(params)
    return plan


def _text_chunks(
    text: str, limit: int, text_styles: bool
) -> tuple[list[str], dict[int, list[str]]]:
    """The text's chunks as plain text, and chunk index → signal-cli text styles."""
    chunks: list[str] = []
    styles: dict[int, list[str]] = {}
    if not text or not text.strip():
        return chunks, styles
    # rendering only removes markup ("[t](u)" becomes "t (u)"), so chunks stay in the limit
    for md in chunk_markdown(text, limit):
        plain, ranges = markdown_to_signal(md)
        if plain.strip():
            if ranges and text_styles:
                styles[len(chunks)] = ranges
            chunks.append(plain)
    return chunks, styles


def _media_parts(msg: OutboundMessage, local_files: Collection[str]) -> tuple[list[str], list[str]]:
    """(files to attach, lines of text for URLs and files that are not there)."""
    paths: list[str] = []
    notes: list[str] = []
    for item in msg.media:
        label = _MEDIA_LABELS.get(item.kind, "File")
        if item.is_url:
            notes.append(f"{label}: {item.target}")
            continue
        p = Path(item.target)
        if p.is_absolute() and item.target in local_files:
            paths.append(str(p))
        else:
            notes.append(f"[attachment unavailable: {item.name or p.name}]")
    return paths, notes


def reaction_params(
    chat_id: str,
    message_id: str,
    emoji: str,
    *,
    me: Me,
    chat_kinds: ChatKinds,
    authors: Authors,
    own_sent: Container[int] = frozenset(),
) -> dict[str, Any]:
    """``sendReaction`` params; ``ChannelError`` when the message id is not a Signal
    timestamp or its author in a group is unknown."""
    cid, target = send_target(chat_id, chat_kinds)
    ts = as_timestamp(message_id)
    if ts is None:
        raise ChannelError(f"signal: cannot react to non-timestamp message id {message_id!r}")
    found = _author(cid, target, ts, me=me, authors=authors, own_sent=own_sent)
    if found is None:
        raise ChannelError(f"signal: unknown author of message {message_id} in group {cid}")
    return dict(target, emoji=emoji, targetAuthor=found[0], targetTimestamp=ts)
