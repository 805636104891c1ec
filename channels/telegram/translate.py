"""Telegram ⇄ Chela translation as pure functions: no I/O, no asyncio, no network objects.

Inbound: ``channels.telegram.inbound`` (an update becomes an ``InboundMessage`` or ``None``);
its names are re-exported here.

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

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from channels.base import MediaItem, OutboundMessage
from channels.chunking import chunk_markdown
from channels.formatting import markdown_to_telegram_html
from channels.telegram.inbound import (  # re-exported: callers import them from here
    CHANNEL,
    Me,
    to_chat_id,
    to_int,
    update_id,
    album_key,
    is_mentioned,
    attachments_of,
    inbound_message,
    merge_album,
)

# the inbound half's names, still importable from here
__all__ = [
    "CHANNEL",
    "Me",
    "album_key",
    "attachments_of",
    "inbound_message",
    "is_mentioned",
    "merge_album",
    "to_chat_id",
    "to_int",
    "update_id",
]

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
    """The first chunk edited into the live preview ``message_id``: ``html``,
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
