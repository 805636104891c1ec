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

import math
import re
from collections.abc import Collection, Container
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from channels.base import ChannelError, ChatType, InboundMessage, MediaItem, MediaKind
from channels.base import OutboundMessage
from channels.chunking import chunk_markdown
from channels.formatting import markdown_to_signal

CHANNEL = "signal"
MENTION_PLACEHOLDER = "\ufffc"

_PHONE_RE = re.compile(r"^\+[0-9]{3,20}$")
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


@dataclass(frozen=True)
class Me:
    """The bot's own ids: its number and, once known, its service id (UUID)."""

    account: str
    uuid: str = ""

    def matches(self, *ids: object) -> bool:
        return any(i and (i == self.account or (self.uuid and i == self.uuid)) for i in ids)


# ----------------------------------------------------------------------------- small helpers


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


def as_timestamp(message_id: object) -> int | None:
    """A Signal message id (a sent timestamp, as a string or number) as an int."""
    if isinstance(message_id, bool) or not isinstance(message_id, (str, int)):
        return None
    try:
        return int(message_id)
    except ValueError:
        return None


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


# ----------------------------------------------------------------------------- inbound


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
    src = _str(env.get("source"))
    number = _str(env.get("sourceNumber")) or (src if _PHONE_RE.match(src) else "")
    uuid = _str(env.get("sourceUuid"))
    source = number or src or uuid
    if not source or me.matches(number, uuid, src):
        return None
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

    group = dm.get("groupInfo") or dm.get("groupV2") or None
    group_id = group.get("groupId") if isinstance(group, dict) else None
    chat_type: ChatType
    if group_id:
        if not isinstance(group_id, str) or not isinstance(group, dict):
            return None  # a group message must not be mistaken for a DM
        chat_id = group_id
        chat_type = "group"
        title = _str(group.get("groupName")) or _str(group.get("name"))
    else:
        chat_id = source
        chat_type = "direct"
        title = ""

    reply_to_id = None
    reply_to_bot = False
    quote = dm.get("quote")
    quote_id = quote.get("id") if isinstance(quote, dict) else None
    if (
        isinstance(quote, dict)
        and isinstance(quote_id, (int, str))
        and not isinstance(quote_id, bool)
    ):
        reply_to_id = str(quote_id)
        reply_to_bot = me.matches(
            quote.get("author"), quote.get("authorNumber"), quote.get("authorUuid")
        )
        digits = reply_to_id.isascii() and reply_to_id.isdigit()
        if not reply_to_bot and digits and int(reply_to_id) in own_sent:
            reply_to_bot = True

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
    limit = chunk_limit
    chunks: list[str] = []
    styles: dict[int, list[str]] = {}  # chunk index → signal-cli text styles
    if msg.text and msg.text.strip():
        # rendering only removes markup ("[t](u)" becomes "t (u)"), so chunks stay in the limit
        for md in chunk_markdown(msg.text, limit):
            plain, ranges = markdown_to_signal(md)
            if plain.strip():
                if ranges and text_styles:
                    styles[len(chunks)] = ranges
                chunks.append(plain)

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
    if notes:
        tail = "\n".join(notes)
        if chunks and len(chunks[-1]) + 2 + len(tail) <= limit:
            chunks[-1] = f"{chunks[-1]}\n\n{tail}"
        else:
            chunks.extend(_hard_split(tail, limit))
    plan = SendPlan(chat_id)
    if not chunks and not paths:
        return plan
    if not chunks:
        chunks = [""]

    plan.quote = quote_params(
        msg.reply_to_id, chat_id, target, me=me, authors=authors, own_sent=own_sent
    )
    last = len(chunks) - 1
    for i, text in enumerate(chunks):
        params: dict[str, Any] = dict(target)
        if text:
            params["message"] = text
        if plan.quote and (i == 0 or msg.reply_mode == "all"):
            params.update(plan.quote)
        if i == last and paths:
            params["attachments"] = paths
        if i in styles:
            params["textStyle"] = styles[i]
        plan.sends.append(params)
    return plan


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
