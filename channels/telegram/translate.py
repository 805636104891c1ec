"""Telegram ⇄ Chela translation as pure functions: no I/O, no asyncio, no network objects.

Inbound: one raw update (the JSON object ``getUpdates`` returns) becomes an
``InboundMessage`` or ``None``.  Only ``message`` updates carry anything for the core;
edits, channel posts, callbacks and update kinds this code does not know are ``None``, and
so are service messages (a title change, a member joining), polls and animated stickers.
A field of the wrong type counts as absent, except where that would misroute the message,
mistake its sender or leave it without an id: a message without a usable ``message_id``,
``chat.id`` or ``chat.type``, or with a ``from``/``sender_chat`` whose id is not a number, is
dropped.  Nothing here raises on bad input.

Outbound: an ``OutboundMessage`` becomes a ``SendPlan``: the text chunked at the limit
(``channels.chunking``) and rendered to Telegram HTML (``channels.formatting``), the live
preview the first chunk is edited into, and the attachments; each step lists its API calls
(method name + params, as the Bot API names them) and what to send instead when Telegram
refuses them.  Typing, reactions and the streaming preview get their params too.

The adapter state these need is passed in explicitly: the bot's identity (``Me``, from
``getMe``) and the account name.

Telegram conventions kept here:

* Entity offsets and lengths count UTF-16 code units.
* A forum topic is ``message_thread_id`` on a message with ``is_topic_message``; inside a
  topic every message "replies" to the topic's creation message, which is not a reply.
* A reply to a message is ``reply_parameters`` with ``allow_sending_without_reply``, so a
  deleted target does not cost the answer.
* An album arrives as one update per item sharing a ``media_group_id``.
"""

from __future__ import annotations

import dataclasses
import mimetypes
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from channels.base import ChatType, InboundMessage, MediaItem, MediaKind, OutboundMessage
from channels.chunking import chunk_markdown
from channels.formatting import markdown_to_telegram_html

CHANNEL = "telegram"
HARD_TEXT_LIMIT = 4096  # what sendMessage takes, in UTF-16 units
MAX_UPLOAD_BYTES = 50 * 1024 * 1024  # what the Bot API takes as an upload

MEDIA_LABEL = {
    "image": "Image",
    "document": "Document",
    "video": "Video",
    "audio": "Audio",
    "voice": "Voice",
}
# (method, the file's param) per outbound kind
_MEDIA_METHOD = {
    "image": ("sendPhoto", "photo"),
    "document": ("sendDocument", "document"),
    "video": ("sendVideo", "video"),
    "audio": ("sendAudio", "audio"),
    "voice": ("sendVoice", "voice"),
}

# what Telegram says when it will not take the HTML of a chunk (or it came out too long):
# the chunk then goes as plain text.  The edit of a preview also accepts any "start tag".
_HTML_REFUSED_SEND = ("can't parse entities", "can't find end tag", "unsupported start tag")
_HTML_REFUSED_EDIT = ("can't parse entities", "can't find end tag", "start tag")


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
    """A not-yet-fetched item (SPEC §9.4: the sender has not been admitted yet) whose
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


def attachments_of(msg: Mapping[str, Any], message_id: int) -> list[MediaItem]:
    """Each attachment of a message, in this order: the largest size of a photo, an
    animation (as a video; Telegram sends its ``document`` too, the same file) or else a
    document, a video, a video note, an audio, a voice note, a still sticker (as an image).
    One without a file id is left out."""
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


# ----------------------------------------------------------------------------- outbound


@dataclass(frozen=True)
class LocalFile:
    """A file on disk to upload as the value of a media param; the adapter reads it."""

    path: str
    filename: str


@dataclass(frozen=True)
class ApiCall:
    """One Bot API call: its method and params (Bot API names; absent ones left out)."""

    method: str
    params: dict[str, Any] = field(default_factory=dict)

    @property
    def upload(self) -> LocalFile | None:
        """The local file this call uploads, if any."""
        for value in self.params.values():
            if isinstance(value, LocalFile):
                return value
        return None


@dataclass(frozen=True)
class TextSend:
    """One text chunk: ``html`` (``None`` when nothing renders); when Telegram refuses the
    HTML or finds it too long, ``plain``: the chunk as it was written, split at the limit."""

    html: ApiCall | None
    plain: tuple[ApiCall, ...]
    render_error: str = ""  # why the chunk did not render, when the formatter failed


@dataclass(frozen=True)
class PreviewEdit:
    """The first chunk edited into the live preview ``message_id`` (SPEC §12): ``html``,
    else ``plain``; when Telegram refuses the edit (the message is gone, too old), ``delete``
    the preview and send ``fallback`` instead: one reply either way."""

    message_id: int
    html: ApiCall | None
    plain: ApiCall
    delete: ApiCall
    fallback: TextSend


@dataclass(frozen=True)
class MediaSend:
    """One attachment: ``call`` (by URL, or uploading a ``LocalFile``); when Telegram
    refuses it or the file cannot be sent, ``note``: a line of text saying so."""

    kind: str
    name: str
    call: ApiCall
    note: tuple[ApiCall, ...]


def _reply_params(reply_to: int | None) -> dict[str, Any]:
    if not reply_to:
        return {}
    return {"reply_parameters": {"message_id": reply_to, "allow_sending_without_reply": True}}


def _thread_params(thread_id: int | None) -> dict[str, Any]:
    return {"message_thread_id": thread_id} if thread_id is not None else {}


def render_html(chunk: str) -> tuple[str, str]:
    """(Telegram HTML of a Markdown chunk, "" or why the formatter failed)."""
    try:
        return markdown_to_telegram_html(chunk), ""
    except Exception as exc:  # a formatter bug must not cost the message
        return "", repr(exc)


def plain_calls(
    chat_id: int | str, text: str, *, limit: int, reply_to: int | None, thread_id: int | None
) -> tuple[ApiCall, ...]:
    """``text`` as plain messages cut every ``limit`` characters (blank pieces left out),
    the first one replying to ``reply_to``."""
    calls: list[ApiCall] = []
    for i in range(0, len(text), limit):
        piece = text[i : i + limit]
        if piece.strip():
            params: dict[str, Any] = {"chat_id": chat_id, "text": piece}
            params |= _reply_params(None if calls else reply_to)
            params |= _thread_params(thread_id)
            calls.append(ApiCall("sendMessage", params))
    return tuple(calls)


def text_send(
    chat_id: int | str, chunk: str, *, limit: int, reply_to: int | None, thread_id: int | None
) -> TextSend:
    rendered, error = render_html(chunk)
    html = None
    if rendered.strip():
        params: dict[str, Any] = {"chat_id": chat_id, "text": rendered, "parse_mode": "HTML"}
        params |= _reply_params(reply_to) | _thread_params(thread_id)
        html = ApiCall("sendMessage", params)
    plain = plain_calls(chat_id, chunk, limit=limit, reply_to=reply_to, thread_id=thread_id)
    return TextSend(html, plain, error)


def edit_call(
    chat_id: int | str, message_id: int, text: str, parse_mode: str | None = None
) -> ApiCall:
    params: dict[str, Any] = {"chat_id": chat_id, "message_id": message_id, "text": text}
    if parse_mode:
        params["parse_mode"] = parse_mode
    return ApiCall("editMessageText", params)


def delete_call(chat_id: int | str, message_id: int) -> ApiCall:
    return ApiCall("deleteMessage", {"chat_id": chat_id, "message_id": message_id})


def preview_edit(
    chat_id: int | str,
    message_id: int,
    chunk: str,
    *,
    limit: int,
    reply_to: int | None,
    thread_id: int | None,
) -> PreviewEdit:
    fallback = text_send(chat_id, chunk, limit=limit, reply_to=reply_to, thread_id=thread_id)
    html = None
    if fallback.html is not None:
        html = edit_call(chat_id, message_id, fallback.html.params["text"], "HTML")
    return PreviewEdit(
        message_id=message_id,
        html=html,
        plain=edit_call(chat_id, message_id, chunk[:limit]),
        delete=delete_call(chat_id, message_id),
        fallback=fallback,
    )


def media_send(
    chat_id: int | str,
    item: MediaItem,
    *,
    as_voice: bool,
    limit: int,
    reply_to: int | None,
    thread_id: int | None,
) -> MediaSend:
    kind: str = item.kind
    if kind == "audio" and as_voice:
        kind = "voice"
    method, param = _MEDIA_METHOD.get(kind, ("sendDocument", "document"))
    value: str | LocalFile
    if item.is_url:
        value = item.target
        note = f"{MEDIA_LABEL.get(kind, 'File')}: {item.target}"
        name = item.name or item.target
    else:
        path = Path(item.target)
        name = item.name or path.name or "file"
        value = LocalFile(str(path), item.name or path.name)
        note = f"[attachment unavailable: {name}]"
    params: dict[str, Any] = {"chat_id": chat_id, param: value}
    params |= _reply_params(reply_to) | _thread_params(thread_id)
    notes = plain_calls(chat_id, note, limit=limit, reply_to=reply_to, thread_id=thread_id)
    return MediaSend(kind=kind, name=name, call=ApiCall(method, params), note=notes)


def html_refused(reason: str, *, edit: bool = False) -> bool:
    """Whether Telegram's refusal of an HTML message (its description) means "send the
    chunk as plain text instead": unparsable entities, or longer than the limit once
    rendered."""
    reason = reason.lower()
    markers = _HTML_REFUSED_EDIT if edit else _HTML_REFUSED_SEND
    return "too long" in reason or any(m in reason for m in markers)


@dataclass(frozen=True)
class SendPlan:
    """What one ``OutboundMessage`` becomes: its text chunks (Markdown, each within
    ``limit`` characters), the preview the first chunk is edited into, and its attachments,
    sent in that order.

    Which step carries the reply to ``reply_to`` depends on what was delivered before it:
    the first step that gets something delivered (every step with ``reply_mode="all"``),
    so the steps are built on demand with ``delivered`` saying whether anything went out
    yet.  ``calls()`` lists the calls when every first choice is taken."""

    chat_id: int | str
    limit: int
    chunks: tuple[str, ...] = ()
    media: tuple[MediaItem, ...] = ()
    preview: int | None = None
    reply_to: int | None = None
    reply_all: bool = False
    thread_id: int | None = None
    as_voice: bool = False

    def reply_for(self, *, delivered: bool) -> int | None:
        if self.reply_to is None:
            return None
        return self.reply_to if (self.reply_all or not delivered) else None

    def text_step(self, index: int, *, delivered: bool) -> TextSend | PreviewEdit:
        chunk = self.chunks[index]
        reply = self.reply_for(delivered=delivered)
        if index == 0 and self.preview is not None:
            return preview_edit(
                self.chat_id,
                self.preview,
                chunk,
                limit=self.limit,
                reply_to=reply,
                thread_id=self.thread_id,
            )
        return text_send(
            self.chat_id, chunk, limit=self.limit, reply_to=reply, thread_id=self.thread_id
        )

    def media_step(self, index: int, *, delivered: bool) -> MediaSend:
        return media_send(
            self.chat_id,
            self.media[index],
            as_voice=self.as_voice,
            limit=self.limit,
            reply_to=self.reply_for(delivered=delivered),
            thread_id=self.thread_id,
        )

    def calls(self) -> list[ApiCall]:
        """Every call in order when Telegram takes each first choice."""
        out: list[ApiCall] = []
        for i in range(len(self.chunks)):
            step = self.text_step(i, delivered=bool(out))
            if isinstance(step, PreviewEdit):
                out.append(step.html or step.plain)
            elif step.html is not None:
                out.append(step.html)
            else:
                out.extend(step.plain)
        for i in range(len(self.media)):
            out.append(self.media_step(i, delivered=bool(out)).call)
        return out


def plan_send(msg: OutboundMessage, *, limit: int) -> SendPlan:
    """The plan for one outbound message: Markdown chunked at ``limit`` (blank chunks left
    out), the first chunk edited into ``msg.edit_id`` when that is a message id."""
    text = msg.text or ""
    chunks = tuple(c for c in chunk_markdown(text, limit) if c.strip()) if text.strip() else ()
    return SendPlan(
        chat_id=to_chat_id(msg.chat_id),
        limit=limit,
        chunks=chunks,
        media=tuple(msg.media),
        preview=to_int(msg.edit_id),
        reply_to=to_int(msg.reply_to_id),
        reply_all=msg.reply_mode == "all",
        thread_id=to_int(msg.thread_id),
        as_voice=msg.audio_as_voice,
    )


def preview_call(
    chat_id: str,
    text: str,
    *,
    limit: int,
    thread_id: str | None = None,
    reply_to_id: str | None = None,
) -> ApiCall:
    """The first message of a live preview: plain text, cut at the limit."""
    params: dict[str, Any] = {"chat_id": to_chat_id(chat_id), "text": text[:limit]}
    params |= _reply_params(to_int(reply_to_id)) | _thread_params(to_int(thread_id))
    return ApiCall("sendMessage", params)


def typing_call(chat_id: str, thread_id: str | None = None) -> ApiCall:
    params: dict[str, Any] = {"chat_id": to_chat_id(chat_id), "action": "typing"}
    return ApiCall("sendChatAction", params | _thread_params(to_int(thread_id)))


def reaction_call(chat_id: str, message_id: str, emoji: str) -> ApiCall | None:
    """``setMessageReaction`` (an empty emoji clears the reaction); ``None`` when the
    message id is not a number."""
    mid = to_int(message_id)
    if mid is None:
        return None
    reaction = [{"type": "emoji", "emoji": emoji}] if emoji else []
    return ApiCall(
        "setMessageReaction",
        {"chat_id": to_chat_id(chat_id), "message_id": mid, "reaction": reaction},
    )
