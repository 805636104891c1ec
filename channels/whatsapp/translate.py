"""WhatsApp (Agent Platform) ⇄ Chela as pure functions: no I/O, no clock, no network.

Inbound: one ``GET /updates`` answer becomes a :class:`Batch` (the cursor to store and the
messages in it); each message object becomes an ``InboundMessage`` or ``None`` (reactions,
unknown types, anything not from a ``user:`` participant).  Outbound: Markdown becomes
WhatsApp's own markup in chunks that fit the platform's limit (counted in UTF-16 code units),
and a file becomes the message type the platform takes for it, or a one-line note.

Participants (``user:<id>``) are opaque: compared whole and sent back unchanged.  The chat
of a direct conversation is the creator's participant id.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from channels.base import InboundMessage, MediaItem, MediaKind
from channels.chunking import chunk_rendered
from channels.formatting import markdown_to_whatsapp

CHANNEL = "whatsapp"
HARD_LIMIT = 4096  # characters of a text body, in UTF-16 code units
CAPTION_LIMIT = 1024
MIB = 1024 * 1024

# what the platform accepts at upload, and as which message type (the rest is refused)
IMAGE_TYPES = {"image/jpeg", "image/png"}
VIDEO_TYPES = {"video/mp4", "video/3gpp"}
AUDIO_TYPES = {"audio/aac", "audio/mp4", "audio/mpeg", "audio/amr", "audio/ogg", "audio/opus"}
DOCUMENT_TYPES = {
    "application/pdf",
    "text/plain",
    "application/msword",
    "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
    "application/vnd.ms-excel",
    "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
    "application/vnd.ms-powerpoint",
    "application/vnd.openxmlformats-officedocument.presentationml.presentation",
    "application/octet-stream",
}
# refused types that still fit as a document of an accepted type
AS_TEXT = {"text/markdown", "text/csv", "text/x-markdown", "application/json"}
_INBOUND_KINDS: dict[str, MediaKind] = {
    "image": "image",
    "sticker": "image",
    "video": "video",
    "audio": "audio",
    "document": "document",
}


def utf16_len(text: str) -> int:
    """Length as the platform counts it (UTF-16 code units)."""
    return len(text.encode("utf-16-le")) // 2


def is_user(participant: Any) -> bool:
    """A ``user:<decimal id>`` participant (the only kind a client acts on)."""
    if not isinstance(participant, str):
        return False
    kind, _, num = participant.partition(":")
    return kind == "user" and num.isdigit()


@dataclass(frozen=True)
class Batch:
    """One 200 answer of ``GET /updates``: the cursor to pass back (and store), the agent's
    numeric id when given, the messages (raw objects) and the creator's name by id."""

    next_offset: int
    agent_id: str = ""
    messages: list[dict[str, Any]] = field(default_factory=list)
    names: dict[str, str] = field(default_factory=dict)
    statuses: int = 0


class Malformed(ValueError):
    """An answer that is not what the wire format says (logged and skipped by the caller)."""


def _changes(body: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    out = []
    for entry in body.get("entry") or []:
        if not isinstance(entry, dict):
            continue
        for change in entry.get("changes") or []:
            if isinstance(change, dict) and change.get("field") == "messages":
                value = change.get("value")
                if isinstance(value, dict):
                    out.append((str(entry.get("id", "")), value))
    return out


def parse_updates(body: Any) -> Batch:
    """A 200 answer → :class:`Batch`; ``Malformed`` when it has no integer ``next_offset``
    or names another object.  Bad items inside a good answer are dropped here one by one."""
    if not isinstance(body, dict) or body.get("object") != "whatsapp_agent_platform":
        raise Malformed("not a whatsapp_agent_platform answer")
    nxt = body.get("next_offset")
    if not isinstance(nxt, int) or isinstance(nxt, bool):
        raise Malformed("no integer next_offset")
    agent_id, messages, names, statuses = "", [], {}, 0
    for entry_id, value in _changes(body):
        agent_id = agent_id or entry_id
        for c in value.get("contacts") or []:
            if isinstance(c, dict) and isinstance(c.get("profile"), dict):
                name = c["profile"].get("name")
                if isinstance(name, str) and isinstance(c.get("wa_id"), str):
                    names[c["wa_id"]] = name
        messages += [m for m in value.get("messages") or [] if isinstance(m, dict)]
        statuses += len([s for s in value.get("statuses") or [] if isinstance(s, dict)])
    return Batch(nxt, agent_id, messages, names, statuses)


def _mime(value: Any) -> str:
    return value.split(";")[0].strip().lower() if isinstance(value, str) else ""


def _attachment(mtype: str, obj: dict[str, Any]) -> MediaItem | None:
    kind = _INBOUND_KINDS.get(mtype)
    media_id = obj.get("id")
    if kind is None or not isinstance(media_id, str) or not media_id:
        return None
    mime = _mime(obj.get("mime_type"))
    if mtype == "audio" and obj.get("voice") is True:
        kind = "voice"
    if mtype == "document" and mime in IMAGE_TYPES:
        kind = "image"  # a photo sent as a file
    name = obj.get("filename") if isinstance(obj.get("filename"), str) else ""
    return MediaItem(kind=kind, target="", name=name or "", mime=mime, ref=media_id)


def _text_of(mtype: str, obj: dict[str, Any]) -> str:
    key = "body" if mtype == "text" else "caption"
    value = obj.get(key)
    return value if isinstance(value, str) else ""


def _timestamp(value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return 0.0


def inbound_message(
    msg: dict[str, Any], *, names: dict[str, str], account: str
) -> InboundMessage | None:
    """One inbound message object → ``InboundMessage``; None for what is never answered
    (reactions, unknown types, a sender that is not a ``user:``, no id, nothing in it)."""
    sender, wamid, mtype = msg.get("from"), msg.get("id"), msg.get("type")
    if not isinstance(sender, str) or not is_user(sender):
        return None
    if not isinstance(wamid, str) or not wamid:
        return None
    if not isinstance(mtype, str) or (mtype != "text" and mtype not in _INBOUND_KINDS):
        return None
    obj = msg.get(mtype)
    if not isinstance(obj, dict):
        return None
    text = _text_of(mtype, obj)
    item = _attachment(mtype, obj) if mtype != "text" else None
    if not text and item is None:
        return None
    ctx = msg.get("context")
    ctx = ctx if isinstance(ctx, dict) else {}
    quoted = ctx.get("id") if isinstance(ctx.get("id"), str) else None
    return InboundMessage(
        channel=CHANNEL,
        chat_id=sender,
        sender_id=sender,
        text=text,
        message_id=wamid,
        account=account,
        sender_name=names.get(sender, ""),
        reply_to_id=quoted,
        reply_to_bot=bool(quoted) and str(ctx.get("from", "")).startswith("agent:"),
        attachments=[item] if item else [],
        timestamp=_timestamp(msg.get("timestamp")),
        raw_id=wamid,
    )


def newest_message_id(messages: list[dict[str, Any]]) -> str:
    """The id of the last message a user sent (what one read receipt for a skipped
    backlog marks); "" when there is none."""
    for m in reversed(messages):
        if is_user(m.get("from")) and isinstance(m.get("id"), str) and m.get("type") != "reaction":
            return str(m["id"])
    return ""


# ------------------------------------------------------------------------------ outbound
def text_chunks(markdown: str, limit: int = HARD_LIMIT) -> list[str]:
    """Markdown → WhatsApp text chunks, each at most ``limit`` UTF-16 code units."""
    limit = min(limit, HARD_LIMIT)
    chunks = chunk_rendered(markdown, limit, markdown_to_whatsapp, utf16_len)
    return [c for c in chunks if c.strip()]


def text_payload(to: str, body: str, quote: str | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {
        "messaging_product": "whatsapp",
        "to": to,
        "type": "text",
        "text": {"body": body, "preview_url": False},
    }
    if quote:
        out["context"] = {"message_id": quote}
    return out


@dataclass(frozen=True)
class MediaPlan:
    """How one outbound file goes: as ``mtype`` uploaded with MIME ``mime``, or, when
    ``note`` is set, not at all (the note says why, in one line)."""

    mtype: str = ""
    mime: str = ""
    note: str = ""


def _limit(mtype: str) -> int:
    return 5 * MIB if mtype == "image" else 16 * MIB


def media_plan(kind: str, mime: str, size: int, name: str) -> MediaPlan:
    """The message type and upload MIME type for a file the reply attaches."""
    mime = _mime(mime) or "application/octet-stream"
    if mime in IMAGE_TYPES and kind in ("image", "document"):
        plan = MediaPlan("image" if kind == "image" else "document", mime)
    elif mime in VIDEO_TYPES:
        plan = MediaPlan("video", mime)
    elif mime in AUDIO_TYPES:
        plan = MediaPlan("audio", mime)  # a voice marker too: no outbound voice bubble
    elif mime in DOCUMENT_TYPES:
        plan = MediaPlan("document", mime)
    elif mime in AS_TEXT or mime.startswith("text/"):
        plan = MediaPlan("document", "text/plain")
    else:
        return MediaPlan(note=f"(the file {name or 'attached'} cannot be sent on WhatsApp: {mime})")
    if size > _limit(plan.mtype):
        mb = _limit(plan.mtype) // MIB
        return MediaPlan(note=f"(the file {name or 'attached'} is over WhatsApp's {mb} MB limit)")
    return plan


def media_payload(
    to: str, plan: MediaPlan, media_id: str, *, caption: str = "", filename: str = ""
) -> dict[str, Any]:
    obj: dict[str, Any] = {"id": media_id}
    if caption and plan.mtype in ("image", "video", "document"):
        obj["caption"] = caption
    if filename and plan.mtype == "document":
        obj["filename"] = filename
    return {"messaging_product": "whatsapp", "to": to, "type": plan.mtype, plan.mtype: obj}


def status_payload(message_id: str, typing: bool) -> dict[str, Any]:
    out: dict[str, Any] = {
        "messaging_product": "whatsapp",
        "status": "read",
        "message_id": message_id,
    }
    if typing:
        out["typing_indicator"] = {"type": "text"}
    return out
