"""neonize's message objects ⇄ Chela: what an inbound ``MessageEv`` says, and the WhatsApp
message a reply becomes (text, a quote, an uploaded file).

Reading takes the event as neonize gives it (protobuf; whatsmeow has already unwrapped
ephemeral and view-once wrappers); building imports neonize's protobuf classes, so it runs
only on a linked device."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from channels.base import InboundMessage, MediaItem, MediaKind
from channels.whatsapp.linked import ids

CHANNEL = "whatsapp"
# the message fields that carry a file, and what Chela calls them
MEDIA_FIELDS: tuple[tuple[str, MediaKind], ...] = (
    ("imageMessage", "image"),
    ("videoMessage", "video"),
    ("audioMessage", "audio"),
    ("documentMessage", "document"),
    ("stickerMessage", "image"),
)


@dataclass(frozen=True)
class Who:
    """Where a message came from, in Chela's ids, and who "we" are (own users: number and
    LID), for mentions and replies to us."""

    chat_id: str
    sender_id: str
    group: bool
    own: frozenset[str]


def media_part(message: Any) -> tuple[str, Any] | None:
    """(field name, sub-message) of the file a message carries, if any."""
    for name, _ in MEDIA_FIELDS:
        if message.HasField(name):
            return name, getattr(message, name)
    return None


def _attachment(message: Any, ref: str) -> MediaItem | None:
    part = media_part(message)
    if part is None:
        return None
    name, sub = part
    kind = dict(MEDIA_FIELDS)[name]
    if name == "audioMessage" and sub.PTT:
        kind = "voice"
    mime = sub.mimetype.split(";")[0].strip().lower()
    if name == "documentMessage" and mime in ("image/jpeg", "image/png"):
        kind = "image"  # a photo sent as a file
    filename = sub.fileName if name == "documentMessage" else ""
    return MediaItem(kind=kind, target="", name=filename, mime=mime, ref=ref, size=sub.fileLength)


def _text_and_context(message: Any) -> tuple[str, Any]:
    if message.HasField("extendedTextMessage"):
        ext = message.extendedTextMessage
        return ext.text, ext.contextInfo if ext.HasField("contextInfo") else None
    part = media_part(message)
    if part is not None:
        sub = part[1]
        caption = sub.caption if hasattr(sub, "caption") else ""
        return caption, sub.contextInfo if sub.HasField("contextInfo") else None
    return message.conversation, None


def _timestamp(value: int) -> float:
    return value / 1000.0 if value > 100_000_000_000 else float(value)  # ms or s


def inbound_message(ev: Any, who: Who, account: str) -> InboundMessage | None:
    """A ``MessageEv`` → ``InboundMessage``; None for what carries nothing to answer
    (reactions, receipts of edits, protocol messages, polls …)."""
    info = ev.Info
    text, ctx = _text_and_context(ev.Message)
    item = _attachment(ev.Message, info.ID)
    if not text and item is None:
        return None
    quoted = ctx.stanzaID if ctx is not None and ctx.stanzaID else None
    mentioned = ctx is not None and any(ids.user_of(j) in who.own for j in ctx.mentionedJID)
    to_us = ctx is not None and bool(ctx.participant) and ids.user_of(ctx.participant) in who.own
    return InboundMessage(
        channel=CHANNEL,
        chat_id=who.chat_id,
        sender_id=who.sender_id,
        text=text,
        message_id=info.ID,
        chat_type="group" if who.group else "direct",
        account=account,
        sender_name=info.Pushname,
        reply_to_id=quoted,
        reply_to_bot=bool(quoted) and to_us,
        mentioned=mentioned,
        attachments=[item] if item else [],
        timestamp=_timestamp(info.Timestamp),
        raw_id=info.ID,
    )


# ------------------------------------------------------------------------------ outbound
def text_message(body: str, quote: Any = None) -> Any:
    """A text message; ``quote`` (a :class:`Received`) makes it a reply to that message."""
    from neonize.proto.waE2E.WAWebProtobufsE2E_pb2 import (
        ContextInfo,
        ExtendedTextMessage,
        Message,
    )

    if quote is None:
        return Message(conversation=body)
    ctx = ContextInfo(stanzaID=quote.id, participant=quote.sender_jid, quotedMessage=quote.message)
    return Message(extendedTextMessage=ExtendedTextMessage(text=body, contextInfo=ctx))


def media_type(mtype: str) -> Any:
    """The upload key type of a message type (a file's keys are bound to it)."""
    from neonize.utils.enum import MediaType

    return {
        "image": MediaType.MediaImage,
        "video": MediaType.MediaVideo,
        "audio": MediaType.MediaAudio,
    }.get(mtype, MediaType.MediaDocument)


def media_message(mtype: str, up: Any, mime: str, *, filename: str = "", caption: str = "") -> Any:
    """The message for a file uploaded as ``mtype`` (neonize's ``UploadResponse`` ``up``)."""
    from neonize.proto.waE2E import WAWebProtobufsE2E_pb2 as e2e

    common = {
        "URL": up.url,
        "directPath": up.DirectPath,
        "mediaKey": up.MediaKey,
        "fileEncSHA256": up.FileEncSHA256,
        "fileSHA256": up.FileSHA256,
        "fileLength": up.FileLength,
        "mimetype": mime,
    }
    if mtype == "image":
        return e2e.Message(imageMessage=e2e.ImageMessage(caption=caption, **common))
    if mtype == "video":
        return e2e.Message(videoMessage=e2e.VideoMessage(caption=caption, **common))
    if mtype == "audio":
        return e2e.Message(audioMessage=e2e.AudioMessage(**common))
    doc = e2e.DocumentMessage(fileName=filename, title=filename, caption=caption, **common)
    return e2e.Message(documentMessage=doc)


@dataclass(frozen=True)
class Received:
    """What the transport keeps of a recent inbound message: to mark it read, show typing
    in its chat, quote it and fetch its file."""

    id: str
    chat: Any  # JID
    sender: Any  # JID
    sender_jid: str  # user@server, for a quote's participant
    message: Any  # the waE2E Message
