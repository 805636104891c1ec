"""Telegram updates → ``InboundMessage``, as pure functions: no I/O, no asyncio, no network
objects (split from ``channels.telegram.translate``, which re-exports these names).

One raw update (the JSON object ``getUpdates`` returns) becomes an ``InboundMessage`` or
``None``.  Only ``message`` updates carry anything for the core; edits, channel posts,
callbacks and update kinds this code does not know are ``None``, and so are service
messages (a title change, a member joining), polls and animated stickers.  A field of the
wrong type counts as absent, except where that would misroute the message, mistake its
sender or leave it without an id: a message without a usable ``message_id``, ``chat.id`` or
``chat.type``, or with a ``from``/``sender_chat`` whose id is not a number, is dropped.
Nothing here raises on bad input.  Entity offsets and lengths count UTF-16 code units; a
forum topic is ``message_thread_id`` on a message with ``is_topic_message``; an album arrives
as one update per item sharing a ``media_group_id``.
"""

from __future__ import annotations

import dataclasses
import mimetypes
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from channels.base import ChatType, InboundMessage, MediaItem, MediaKind

CHANNEL = "telegram"


@dataclass(frozen=True)
class Me:
    """The bot's own identity: its user id (as a string) and username (without ``@``)."""

    id: str = ""
    username: str = ""


# ----------------------------------------------------------------------------- small helpers


def _str(value: object) -> str:
    """A string field; anything else counts as absent."""
    return value if isinstance(value, str) else ""


def _int(value: object) -> int | None:
    """An integer field (not a bool); ``None`` when it is not one."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _dict(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def to_chat_id(chat_id: str) -> int | str:
    """A chat id as the Bot API takes it: a number, or ``"@channelusername"``."""
    try:
        return int(chat_id)
    except (TypeError, ValueError):
        return chat_id


def to_int(value: str | None) -> int | None:
    """A message or thread id, ``None`` when absent or not a number."""
    if value is None or value == "":
        return None
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def _utf16_slice(text: str, offset: int, length: int) -> str:
    """``text`` cut by a UTF-16 offset and length, as Telegram counts them."""
    units = text.encode(
        "utf-16-le", errors="surrogatepass"
    )  # a lone surrogate is junk, not an error
    return units[offset * 2 : (offset + length) * 2].decode("utf-16-le", errors="replace")


# ----------------------------------------------------------------------------- inbound


def update_id(raw: object) -> int | None:
    """The update's ``update_id``; ``None`` when there is no usable one."""
    return _int(raw.get("update_id")) if isinstance(raw, dict) else None


def album_key(raw: object) -> str | None:
    """``"<chat id>:<media_group_id>"`` for an update that is one item of an album."""
    msg = _dict(raw.get("message")) if isinstance(raw, dict) else {}
    group = _str(msg.get("media_group_id"))
    chat_id = _int(_dict(msg.get("chat")).get("id"))
    return f"{chat_id}:{group}" if group and chat_id is not None else None


def is_mentioned(text: str, entities: object, me: Me) -> bool:
    """Whether ``text`` names the bot: ``@username`` in the text, a ``mention`` or
    ``text_mention`` entity of the bot, or a ``/command@username``."""
    username = me.username.lower()
    if username and re.search(rf"(?<![\w@])@{re.escape(username)}(?!\w)", text, re.IGNORECASE):
        return True
    for entity in entities if isinstance(entities, list) else ():
        if not isinstance(entity, dict):
            continue
        kind = entity.get("type")
        if kind == "text_mention":
            user_id = _int(_dict(entity.get("user")).get("id"))
            if user_id is not None and me.id and str(user_id) == me.id:
                return True
            continue
        offset, length = _int(entity.get("offset")), _int(entity.get("length"))
        if not username or offset is None or length is None or offset < 0 or length < 0:
            continue
        value = _utf16_slice(text, offset, length).lower()
        if kind == "mention" and value == f"@{username}":
            return True
        if kind == "bot_command" and value.endswith(f"@{username}"):
            return True
    return False


def _file(obj: object) -> tuple[str, int] | None:
    """(file_id, declared size) of a file object; ``None`` without a file id."""
    if not isinstance(obj, dict):
        return None
    file_id = _str(obj.get("file_id"))
    if not file_id:
        return None
    return file_id, max(0, _int(obj.get("file_size")) or 0)


def _attachment(kind: MediaKind, obj: object, name: str, mime: str) -> MediaItem | None:
    """A not-yet-fetched item (the sender has not been admitted yet) whose
    ``ref`` is the file_id; ``None`` without one."""
    found = _file(obj)
    if found is None:
        return None
    return MediaItem(
        kind=kind,
        target="",
        name=name,
        mime=mime or (mimetypes.guess_type(name)[0] or ""),
        ref=found[0],
        size=found[1],
    )


# every field of a message attachments_of reads
_MEDIA_FIELDS = frozenset(
    {"photo", "animation", "document", "video", "video_note", "audio", "voice", "sticker"}
)


def attachments_of(msg: Mapping[str, Any], message_id: int) -> list[MediaItem]:
    """Each attachment of a message, in this order: the largest size of a photo, an
    animation (as a video; Telegram sends its ``document`` too, the same file) or else a
    document, a video, a video note, an audio, a voice note, a still sticker (as an image).
    One without a file id is left out."""
    if msg.keys().isdisjoint(_MEDIA_FIELDS):
        return []  # a text message: none of the fields read below
    mid = message_id
    out: list[MediaItem | None] = []
    photo = msg.get("photo")
    sizes = [p for p in photo if _file(p) is not None] if isinstance(photo, list) else []
    if sizes:
        largest = max(
            sizes,
            key=lambda p: (
                (_int(p.get("width")) or 0) * (_int(p.get("height")) or 0),
                max(0, _int(p.get("file_size")) or 0),
            ),
        )
        out.append(_attachment("image", largest, f"photo_{mid}.jpg", "image/jpeg"))
    anim, doc = _dict(msg.get("animation")), _dict(msg.get("document"))
    if "animation" in msg and msg["animation"] is not None:
        name = _str(anim.get("file_name")) or f"animation_{mid}.mp4"
        out.append(_attachment("video", anim, name, _str(anim.get("mime_type")) or "video/mp4"))
    elif "document" in msg and msg["document"] is not None:
        name = _str(doc.get("file_name")) or f"document_{mid}"
        out.append(_attachment("document", doc, name, _str(doc.get("mime_type"))))
    video = _dict(msg.get("video"))
    name = _str(video.get("file_name")) or f"video_{mid}.mp4"
    out.append(_attachment("video", video, name, _str(video.get("mime_type")) or "video/mp4"))
    out.append(_attachment("video", msg.get("video_note"), f"video_note_{mid}.mp4", "video/mp4"))
    audio = _dict(msg.get("audio"))
    name = _str(audio.get("file_name")) or f"audio_{mid}.mp3"
    out.append(_attachment("audio", audio, name, _str(audio.get("mime_type")) or "audio/mpeg"))
    voice = _dict(msg.get("voice"))
    out.append(
        _attachment("voice", voice, f"voice_{mid}.ogg", _str(voice.get("mime_type")) or "audio/ogg")
    )
    sticker = _dict(msg.get("sticker"))
    if not sticker.get("is_animated") and not sticker.get("is_video"):
        out.append(_attachment("image", sticker, f"sticker_{mid}.webp", "image/webp"))
    return [item for item in out if item is not None]


def _full_name(user: Mapping[str, Any]) -> str:
    first, last = _str(user.get("first_name")), _str(user.get("last_name"))
    return f"{first} {last}" if last else first


def inbound_message(raw: object, *, me: Me, account: str = "default") -> InboundMessage | None:
    """Turn one raw update into an ``InboundMessage`` (``None`` for everything else)."""
    uid = update_id(raw)
    msg = raw.get("message") if isinstance(raw, dict) else None
    if uid is None or not isinstance(msg, dict):
        return None  # edited messages, channel posts, callbacks, unknown update kinds
    message_id = _int(msg.get("message_id"))
    chat = _dict(msg.get("chat"))
    chat_id = _int(chat.get("id"))
    chat_kind = chat.get("type")
    if message_id is None or chat_id is None or not isinstance(chat_kind, str):
        return None  # nowhere to answer, or no id for it

    # a caption stands in for the text of a message with media, and so do its entities
    has_text = isinstance(msg.get("text"), str)
    text = msg["text"] if has_text else _str(msg.get("caption"))
    entities = msg.get("entities") if has_text else msg.get("caption_entities")

    sender = msg.get("from")
    sender_chat = msg.get("sender_chat")
    sender_is_bot = False
    if sender_chat is not None:
        # an anonymous group admin or a linked channel: `from` is a placeholder bot
        # (GroupAnonymousBot / Channel_Bot), the real sender is the chat
        sender_chat_id = _int(_dict(sender_chat).get("id"))
        if sender_chat_id is None:
            return None
        sender_id = str(sender_chat_id)
        sender_name = _str(sender_chat.get("title"))
        sender_username = _str(sender_chat.get("username"))
    elif sender is not None:
        from_id = _int(_dict(sender).get("id"))
        if from_id is None:
            return None
        sender_id, sender_name = str(from_id), _full_name(sender)
        sender_username, sender_is_bot = _str(sender.get("username")), sender.get("is_bot") is True
    else:
        sender_id, sender_name, sender_username = str(chat_id), "", ""

    topic = bool(msg.get("is_topic_message"))
    thread = _int(msg.get("message_thread_id"))
    thread_id = str(thread) if topic and thread else None
    reply = msg.get("reply_to_message")
    reply_id = _int(reply.get("message_id")) if isinstance(reply, dict) else None
    if reply_id is not None and topic and _dict(reply).get("forum_topic_created") is not None:
        reply_id = None  # in a forum topic every message "replies" to the topic's first message
    reply_from = _int(_dict(_dict(reply).get("from")).get("id")) if reply_id is not None else None
    reply_to_bot = reply_from is not None and bool(me.id) and str(reply_from) == me.id

    attachments = attachments_of(msg, message_id)
    if not text and not attachments:
        return None  # service messages, stickers, polls, …: nothing for the core

    date = _int(msg.get("date"))
    chat_type: ChatType = "direct" if chat_kind == "private" else "group"
    return InboundMessage(
        channel=CHANNEL,
        chat_id=str(chat_id),
        sender_id=sender_id,
        text=text,
        message_id=str(message_id),
        chat_type=chat_type,
        account=account,
        thread_id=thread_id,
        sender_name=sender_name,
        sender_username=sender_username,
        chat_title=_str(chat.get("title")),
        reply_to_id=str(reply_id) if reply_id is not None else None,
        reply_to_bot=reply_to_bot,
        mentioned=is_mentioned(text, entities, me),
        sender_is_bot=sender_is_bot,
        attachments=attachments,
        timestamp=float(date) if date else 0.0,
        group_kind="group",
        raw_id=str(uid),
    )


def merge_album(parts: Sequence[InboundMessage]) -> InboundMessage:
    """The items of one album (in update order) as one message: the first item's fields,
    the captions joined, every attachment in order, mentioned if any part mentions."""
    first = parts[0]
    return dataclasses.replace(
        first,
        text="\n".join(p.text for p in parts if p.text),
        attachments=[a for p in parts for a in p.attachments],
        mentioned=any(p.mentioned for p in parts),
    )
