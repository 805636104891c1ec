"""Signal envelopes → ``InboundMessage``, as pure functions: no I/O, no asyncio, no clock
(split from ``channels.signal.translate``, which re-exports these names).

A signal-cli envelope (the ``envelope`` of a ``receive`` event) becomes an ``InboundMessage``
or ``None`` (receipts, typing, sync, reactions, our own messages, empty or malformed
envelopes).  A field of the wrong type counts as absent, except where that would misroute
the message or leave it without an id: a group id that is not a string, or no usable
timestamp among the present ones, drops the envelope.  Nothing here raises on bad input.
Mention offsets and lengths count UTF-16 code units; a mention is a U+FFFC placeholder in
the text, replaced by ``@name``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Container
from dataclasses import dataclass
from typing import Any

from channels.base import ChatType, InboundMessage, MediaItem, MediaKind

CHANNEL = "signal"


MENTION_PLACEHOLDER = "\ufffc"


_PHONE_RE = re.compile(r"^\+[0-9]{3,20}$")


@dataclass(frozen=True)
class Me:
    """The bot's own ids: its number and, once known, its service id (UUID)."""

    account: str
    uuid: str = ""

    def matches(self, *ids: object) -> bool:
        return any(i and (i == self.account or (self.uuid and i == self.uuid)) for i in ids)


def _str(value: object) -> str:
    """A string field; anything else counts as absent."""
    return value if isinstance(value, str) else ""


def _int(value: object) -> int | None:
    """An integer-ish field (``3``, ``3.0``, ``"3"``); ``None`` when it is not one."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return int(value) if math.isfinite(value) else None
    if isinstance(value, str):
        try:
            return int(value)
        except ValueError:
            return None
    return None


def _stamp(*values: object) -> int | float | None:
    """The first present (truthy) value that is a finite number, as a millisecond
    timestamp; 0 when none is present, ``None`` when all present ones are garbage."""
    garbage = False
    for value in values:
        if not value:
            continue
        if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
            return value
        garbage = True
    return None if garbage else 0


def _utf16_to_index(text: str, offset: int) -> int:
    """Signal mention offsets count UTF-16 code units; convert to a Python index."""
    units = 0
    for idx, ch in enumerate(text):
        if units >= offset:
            return idx
        units += 2 if ord(ch) > 0xFFFF else 1
    return len(text)


def media_kind(mime: str, voice: bool = False) -> MediaKind:
    mime = (mime or "").lower()
    if mime.startswith("image/"):
        return "image"
    if mime.startswith("video/"):
        return "video"
    if mime.startswith("audio/"):
        return "voice" if voice else "audio"
    return "document"


def unwrap_event(payload: object) -> dict[str, Any] | None:
    """The ``{"envelope": …, "account": …}`` object of a decoded event's data, also when
    it comes as a JSON-RPC ``receive`` notification or a ``result``; ``None`` otherwise."""
    if isinstance(payload, dict) and payload.get("method") == "receive":
        payload = payload.get("params") or {}
    if isinstance(payload, dict) and "result" in payload and "envelope" not in payload:
        payload = payload.get("result") or {}
    return payload if isinstance(payload, dict) else None


def envelope_for(payload: dict[str, Any], me: Me) -> dict[str, Any] | None:
    """The envelope of an unwrapped event when it is for this account (a multi-account
    daemon sends every account's events), else ``None``."""
    acct = payload.get("account")
    if acct and acct not in (me.account, me.uuid):
        return None
    envelope = payload.get("envelope")
    return envelope if isinstance(envelope, dict) else None


def dedupe_key(env: dict[str, Any]) -> tuple[object, object]:
    """What identifies an envelope across replays: (sender, sent timestamp), always
    hashable (a malformed value stands in by its ``repr``)."""
    parts = (
        env.get("sourceNumber") or env.get("source") or env.get("sourceUuid"),
        env.get("timestamp"),
    )
    sender, sent = (p if p is None or isinstance(p, str | int | float) else repr(p) for p in parts)
    return sender, sent


def own_uuid_in(env: object, account: str) -> str:
    """The bot's service id when this envelope reveals it (a mention or a quote naming the
    bot's number with a UUID), else ``""``."""
    dm = env.get("dataMessage") if isinstance(env, dict) else None
    if not isinstance(dm, dict):
        return ""
    mentions = dm.get("mentions")
    for m in mentions if isinstance(mentions, list) else ():
        if isinstance(m, dict) and account and m.get("number") == account and _str(m.get("uuid")):
            return _str(m.get("uuid"))
    quote = dm.get("quote")
    if isinstance(quote, dict) and account and quote.get("authorNumber") == account:
        return _str(quote.get("authorUuid"))
    return ""


def apply_mentions(text: str, mentions: object, me: Me) -> tuple[str, bool]:
    """Replace mention placeholders by ``@name``; whether one of them is the bot.  A mention
    whose span is unusable still counts; its placeholder becomes a bare ``@``."""
    mentioned = False
    spans: list[tuple[int, int, str]] = []
    for m in mentions if isinstance(mentions, list) else ():
        if not isinstance(m, dict):
            continue
        if me.matches(m.get("number"), m.get("uuid"), m.get("name")):
            mentioned = True
        label = _str(m.get("name")) or _str(m.get("number")) or _str(m.get("uuid"))[:8] or "someone"
        start = _int(m.get("start") or 0)
        length = _int(m.get("length") or 1)
        if start is not None and length is not None:
            spans.append((start, length, "@" + label.lstrip("@")))
    # Replace from the end so earlier offsets stay valid (offsets are UTF-16 units).
    for start, length, label in sorted(spans, key=lambda s: s[0], reverse=True):
        i = _utf16_to_index(text, start)
        j = _utf16_to_index(text, start + length)
        if i < len(text) and text[i:j] == MENTION_PLACEHOLDER * (j - i) and j > i:
            text = text[:i] + label + text[j:]
    return text.replace(MENTION_PLACEHOLDER, "@"), mentioned


def attachment_refs(items: object) -> tuple[list[MediaItem], list[str]]:
    """Attachments as not-yet-fetched items: ``ref`` is signal-cli's stored file (its
    ``storedFilename``, else the attachment id inside its attachments directory).  Ones
    without a usable reference become notes for the text instead."""
    out: list[MediaItem] = []
    notes: list[str] = []
    for att in items if isinstance(items, list) else ():
        if not isinstance(att, dict):
            continue
        name = _str(att.get("filename")) or _str(att.get("id")) or "attachment"
        mime = _str(att.get("contentType"))
        kind = media_kind(mime, bool(att.get("voiceNote")))
        ref = att.get("storedFilename") or att.get("id") or ""
        if not isinstance(ref, str) or not ref:
            notes.append(f"[attachment unavailable: {name}]")
            continue
        size = _int(att.get("size") or 0)
        out.append(
            MediaItem(kind=kind, target="", name=name, mime=mime, ref=ref, size=max(0, size or 0))
        )
    return out, notes


def _source(env: dict[str, Any], me: Me) -> str:
    """The sender's id (number, else service id); ``""`` for none or for the bot itself."""
    src = _str(env.get("source"))
    number = _str(env.get("sourceNumber")) or (src if _PHONE_RE.match(src) else "")
    uuid = _str(env.get("sourceUuid"))
    if me.matches(number, uuid, src):
        return ""
    return number or src or uuid


def _chat(dm: dict[str, Any], source: str) -> tuple[str, ChatType, str] | None:
    """(chat id, chat type, title); ``None`` for a group whose id or info is malformed."""
    group = dm.get("groupInfo") or dm.get("groupV2") or None
    group_id = group.get("groupId") if isinstance(group, dict) else None
    if not group_id:
        return source, "direct", ""
    if not isinstance(group_id, str) or not isinstance(group, dict):
        return None
    return group_id, "group", _str(group.get("groupName")) or _str(group.get("name"))


def _quote(dm: dict[str, Any], me: Me, own_sent: Container[int]) -> tuple[str | None, bool]:
    """(the quoted message's id, whether it is the bot's): the bot's when its author is one
    of our ids or its timestamp is one we sent."""
    quote = dm.get("quote")
    quote_id = quote.get("id") if isinstance(quote, dict) else None
    if (
        not isinstance(quote, dict)
        or not isinstance(quote_id, (int, str))
        or isinstance(quote_id, bool)
    ):
        return None, False
    reply_to_id = str(quote_id)
    if me.matches(quote.get("author"), quote.get("authorNumber"), quote.get("authorUuid")):
        return reply_to_id, True
    digits = reply_to_id.isascii() and reply_to_id.isdigit()
    return reply_to_id, digits and int(reply_to_id) in own_sent


def inbound_message(
    env: object,
    *,
    me: Me,
    own_sent: Container[int] = frozenset(),
    account_name: str = "default",
) -> InboundMessage | None:
    """Turn one envelope into an ``InboundMessage`` (``None`` for everything else).

    ``own_sent`` holds the timestamps of messages the bot sent (a quote of one is a reply
    to the bot even when its author is not named).  Own ids this envelope reveals apply to
    it already; the caller keeps them with ``own_uuid_in``."""
    if not isinstance(env, dict):
        return None
    dm = env.get("dataMessage")
    if not isinstance(dm, dict):
        return None  # receipts, typing, sync, calls, stories, edits
    if not me.uuid:
        me = Me(me.account, own_uuid_in(env, me.account))
    source = _source(env, me)
    if not source:
        return None  # no sender, or our own message
    if dm.get("reaction") or dm.get("remoteDelete") or dm.get("groupV2Change"):
        return None
    timestamp = _stamp(dm.get("timestamp"), env.get("timestamp"))
    sent_at = _stamp(env.get("timestamp"), timestamp)
    if timestamp is None or sent_at is None:
        return None  # no usable id for it: drop rather than invent one

    text, mentioned = apply_mentions(_str(dm.get("message")), dm.get("mentions"), me)
    attachments, notes = attachment_refs(dm.get("attachments"))
    if notes:
        text = "\n".join([text, *notes]) if text else "\n".join(notes)
    if not text.strip() and not attachments:
        return None  # group updates, stickers, empty messages

    chat = _chat(dm, source)
    if chat is None:
        return None  # a group message must not be mistaken for a DM
    chat_id, chat_type, title = chat
    reply_to_id, reply_to_bot = _quote(dm, me, own_sent)

    return InboundMessage(
        channel=CHANNEL,
        chat_id=chat_id,
        sender_id=source,
        text=text,
        message_id=str(timestamp),
        chat_type=chat_type,
        account=account_name,
        sender_name=_str(env.get("sourceName")),
        chat_title=title,
        reply_to_id=reply_to_id,
        reply_to_bot=reply_to_bot,
        mentioned=mentioned,
        attachments=attachments,
        timestamp=sent_at / 1000.0,
        group_kind="group",
        raw_id=f"{source}:{sent_at}",
    )
