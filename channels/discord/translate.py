"""Discord ⇄ Chela translation as pure functions: no I/O, no asyncio, no network objects.

Inbound: a message in the shape of Discord's ``MESSAGE_CREATE`` payload (``id``,
``channel_id``, ``guild_id``, ``type``, ``author``, ``member``, ``content``, ``mentions``,
``message_reference``, ``referenced_message``, ``attachments``) becomes an ``InboundMessage``
or ``None``: the bot's own messages (the gateway echoes what we send), joins, pins and other
system messages, and anything without a usable id, channel or author.  A field of the wrong
type counts as absent; nothing here raises on bad input.  What the payload does not carry is
passed in: the bot's user id, the thread's parent channel id (``None``: not a thread),
whether the replied-to message is the bot's (``reply_to_bot``, decided from the payload when
it can be, see ``reply_to_bot``) and the channel's title.

Translation rules (no policy lives here):

* Other bots' messages are passed on with ``sender_is_bot=True``; the core never answers
  them but may keep them as group history.
* DMs: ``chat_type="direct"``, ``chat_id`` = the DM channel id.  Guild channels:
  ``chat_type="group"``, ``group_kind="channel"``, ``chat_id`` = the channel id.  A message
  in a thread has ``chat_id`` = the parent channel id and ``thread_id`` = the thread id.
* ``mentioned``: the bot user is in ``mentions`` or ``<@id>`` / ``<@!id>`` is in the text.
  The text is passed as written (``<@id>`` mentions included).
* Attachments become not-yet-downloaded ``MediaItem``s whose ``ref`` is the CDN URL.

Outbound: an ``OutboundMessage`` becomes the list of calls to make, in order (``plan_send``),
each a method and its params, with what to do instead when Discord refuses it
(``ApiCall.fallback``).  Text is Discord Markdown already (no conversion), chunked to the
limit; attachments follow, local files grouped up to 10 per message.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from channels.base import InboundMessage, MediaItem, MediaKind, OutboundMessage
from channels.chunking import chunk_markdown

CHANNEL = "discord"
MAX_TEXT = 2000  # Discord refuses longer message content
MAX_FILES_PER_MESSAGE = 10
DISCORD_EPOCH_MS = 1_420_070_400_000

# message types that carry something said: DEFAULT and REPLY (the rest are joins, pins,
# thread-created notices, …)
CHAT_MESSAGE_TYPES = frozenset({0, 19})

# call methods of a plan
SEND = "send_message"  # params: channel_id, content, reference, nonce
SEND_FILES = "send_files"  # params: channel_id, files [(path, filename)], reference, nonce
EDIT = "edit_message"  # params: channel_id, message_id, content
DELETE = "delete_message"  # params: channel_id, message_id


# ----------------------------------------------------------------------------- helpers


def _dict(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _str(value: object) -> str:
    return value if isinstance(value, str) else ""


def snowflake(value: object) -> int | None:
    """A Discord id (a decimal string, or an int) as an int; ``None`` when it is not one."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if value > 0 else None
    if isinstance(value, str) and value.isascii() and value.isdigit():
        number = int(value)
        return number if number > 0 else None
    return None


def _size(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return 0
    try:
        return max(0, int(value))
    except (OverflowError, ValueError):
        return 0


def snowflake_seconds(message_id: int) -> float:
    """The creation time a Discord id encodes, in Unix seconds."""
    return ((message_id >> 22) + DISCORD_EPOCH_MS) / 1000


# ----------------------------------------------------------------------------- inbound


def is_chat_message(payload: Mapping[str, Any], bot_id: int) -> bool:
    """Whether a message is worth translating: said by someone other than the bot, and of a
    type that carries something said."""
    if not isinstance(payload, Mapping):
        return False
    author = _dict(payload.get("author"))
    author_id = snowflake(author.get("id"))
    if author_id is None or author_id == bot_id:
        return False
    kind = payload.get("type", 0)
    return isinstance(kind, int) and not isinstance(kind, bool) and kind in CHAT_MESSAGE_TYPES


def reply_to_bot(payload: Mapping[str, Any], bot_id: int) -> bool | None:
    """Whether the message answers one of the bot's: ``True``/``False`` when the payload
    tells (the referenced message, or its deletion), ``None`` when only a fetch of the
    referenced message can tell.  No reference, or no bot id: ``False``."""
    if not isinstance(payload, Mapping) or not bot_id:
        return False
    ref = _dict(payload.get("message_reference"))
    if snowflake(ref.get("message_id")) is None:
        return False
    if "referenced_message" not in payload:
        return None
    referenced = payload.get("referenced_message")
    if not isinstance(referenced, dict):
        return False  # deleted
    return snowflake(_dict(referenced.get("author")).get("id")) == bot_id


def referenced_channel(payload: Mapping[str, Any]) -> int | None:
    """The channel of the replied-to message (for fetching it): the reference's, else the
    message's own."""
    ref = _dict(payload.get("message_reference"))
    return snowflake(ref.get("channel_id")) or snowflake(payload.get("channel_id"))


def is_mentioned(payload: Mapping[str, Any], bot_id: int) -> bool:
    if not bot_id:
        return False
    mentions = payload.get("mentions")
    for user in mentions if isinstance(mentions, list) else ():
        if snowflake(_dict(user).get("id")) == bot_id:
            return True
    content = _str(payload.get("content"))
    return f"<@{bot_id}>" in content or f"<@!{bot_id}>" in content


def channel_title(name: object, *, is_dm: bool, thread: bool, parent_name: object = None) -> str:
    """``#channel``, ``#parent › thread`` for a thread, ``""`` for a DM or a nameless channel."""
    if is_dm:
        return ""
    if thread:
        if isinstance(parent_name, str):
            return f"#{parent_name} › {name}"
        return f"#{name}"
    return f"#{name}" if isinstance(name, str) and name else ""


def media_kind(attachment: Mapping[str, Any]) -> MediaKind:
    main = _str(attachment.get("content_type")).split("/", 1)[0]
    if main == "image":
        return "image"
    if main == "video":
        return "video"
    if main == "audio":
        # a voice message carries its duration and waveform
        voice = (
            attachment.get("duration_secs") is not None and attachment.get("waveform") is not None
        )
        return "voice" if voice else "audio"
    return "document"


def attachment_refs(attachments: object) -> list[MediaItem]:
    """Attachments as not-downloaded ``MediaItem``s (the sender has not been admitted yet); entries that are not attachments are skipped."""
    items: list[MediaItem] = []
    for att in attachments if isinstance(attachments, list) else ():
        if not isinstance(att, dict):
            continue
        mime = _str(att.get("content_type"))
        items.append(
            MediaItem(
                kind=media_kind(att),
                target="",
                name=_str(att.get("filename")),
                mime=mime.split(";")[0],
                ref=_str(att.get("url")),
                size=_size(att.get("size")),
            )
        )
    return items


def sender_names(payload: Mapping[str, Any]) -> tuple[str, str]:
    """(display name, username): the guild nickname, else the global name, else the
    username."""
    author = _dict(payload.get("author"))
    username = _str(author.get("username"))
    nick = _str(_dict(payload.get("member")).get("nick"))
    return nick or _str(author.get("global_name")) or username, username


def inbound_message(
    payload: Mapping[str, Any],
    *,
    bot_id: int,
    account: str = "default",
    parent_id: int | None = None,
    reply_to_bot: bool = False,
    chat_title: str = "",
) -> InboundMessage | None:
    """One Discord message → ``InboundMessage``, or ``None`` (see the module docstring)."""
    if not is_chat_message(payload, bot_id):
        return None
    message_id = snowflake(payload.get("id"))
    channel_id = snowflake(payload.get("channel_id"))
    author = _dict(payload.get("author"))
    sender_id = snowflake(author.get("id"))
    if message_id is None or channel_id is None or sender_id is None:
        return None
    is_dm = snowflake(payload.get("guild_id")) is None
    if parent_id is not None:
        chat_id, thread_id = str(parent_id), str(channel_id)
    else:
        chat_id, thread_id = str(channel_id), None
    display, username = sender_names(payload)
    reply_id = snowflake(_dict(payload.get("message_reference")).get("message_id"))
    return InboundMessage(
        channel=CHANNEL,
        chat_id=chat_id,
        sender_id=str(sender_id),
        text=_str(payload.get("content")),
        message_id=str(message_id),
        chat_type="direct" if is_dm else "group",
        account=account,
        thread_id=thread_id,
        sender_name=display,
        sender_username=username,
        chat_title=chat_title,
        reply_to_id=str(reply_id) if reply_id is not None else None,
        reply_to_bot=reply_to_bot,
        mentioned=is_mentioned(payload, bot_id),
        sender_is_bot=author.get("bot") is True,
        attachments=attachment_refs(payload.get("attachments")),
        timestamp=snowflake_seconds(message_id),
        group_kind="channel",
        raw_id=str(message_id),
    )


# ----------------------------------------------------------------------------- outbound


@dataclass(frozen=True)
class ApiCall:
    """One call: the method (``SEND``, ``SEND_FILES``, ``EDIT``, ``DELETE``) and its params.
    ``fallback`` is what to call, in order, instead when Discord refuses this one: deleting
    a preview that cannot be edited and sending the chunk anew, the note that replaces files
    whose upload failed."""

    method: str
    params: dict[str, Any]
    fallback: tuple[ApiCall, ...] = field(default=())


def chunks(text: str, limit: int, max_lines: int) -> list[str]:
    """The text as messages of at most ``limit`` characters and about ``max_lines`` lines
    (Discord collapses taller messages), Markdown kept balanced across the cuts."""
    if not text.strip():
        return []
    return [c for c in chunk_markdown(text, limit, max_lines=max_lines) if c.strip()]


def reply_reference(reply_to_id: str | None) -> int | None:
    """The message id a reply references; ``None`` for none or a non-numeric id."""
    if not reply_to_id:
        return None
    try:
        return int(reply_to_id)
    except ValueError:
        return None


def media_name(item: MediaItem) -> str:
    return item.name or Path(item.target).name


def unavailable_note(name: str) -> str:
    return f"[attachment unavailable: {name}]"


def send_call(channel_id: int, content: str, reference: int | None, nonce: str | None) -> ApiCall:
    return ApiCall(
        SEND,
        {"channel_id": channel_id, "content": content, "reference": reference, "nonce": nonce},
    )


def plan_send(
    msg: OutboundMessage,
    *,
    channel_id: int,
    chunk_limit: int = MAX_TEXT,
    max_lines: int = 17,
    local_files: Collection[str] = (),
) -> list[ApiCall]:
    """The calls that deliver one outbound message to ``channel_id``, in order.

    Text chunks first, then the attachments: consecutive ``local_files`` (the targets the
    caller found on disk) grouped up to 10 per message, URLs and notes for missing files as
    text.  The reply reference goes on the first message (every one with
    ``reply_mode="all"``).  Each message carries the nonce ``<key>.<index>`` (the key cut to
    20 characters): the same on every attempt, so Discord answers a retry with the message
    it already created.  With ``edit_id`` (a live preview) the first text chunk is
    an edit of the preview, falling back to deleting it and sending the chunk anew (a
    non-numeric ``edit_id`` names no message: the chunk is simply sent)."""
    limit = min(int(chunk_limit), MAX_TEXT)
    plan: list[tuple[str, Any]] = [("text", c) for c in chunks(msg.text, limit, max_lines)]
    plan += _media_plan(msg, limit, max_lines, local_files)
    reference = reply_reference(msg.reply_to_id)
    key = msg.idempotency_key[:20]
    preview = msg.edit_id
    calls: list[ApiCall] = []
    for index, (kind, value) in enumerate(plan):
        ref = reference if msg.reply_mode == "all" or index == 0 else None
        nonce = f"{key}.{index}" if key else None
        if kind == "text":
            calls.append(_text_call(channel_id, value, ref, nonce, preview))
            preview = ""
        else:
            calls.append(_files_call(channel_id, value, ref, nonce))
    return calls


def _media_plan(
    msg: OutboundMessage, limit: int, max_lines: int, local_files: Collection[str]
) -> list[tuple[str, Any]]:
    """The attachments as ("text", chunk) and ("files", items) steps, in order: consecutive
    local files grouped up to 10 per message, URLs and missing files as lines of text."""
    plan: list[tuple[str, Any]] = []
    pending_lines: list[str] = []
    pending_files: list[MediaItem] = []

    def flush_lines() -> None:
        if pending_lines:
            plan.extend(("text", c) for c in chunks("\n".join(pending_lines), limit, max_lines))
            pending_lines.clear()

    def flush_files() -> None:
        if pending_files:
            plan.append(("files", list(pending_files)))
            pending_files.clear()

    for item in msg.media:
        if item.is_url or item.target not in local_files:
            flush_files()
            pending_lines.append(item.target if item.is_url else unavailable_note(media_name(item)))
            continue
        flush_lines()
        pending_files.append(item)
        if len(pending_files) >= MAX_FILES_PER_MESSAGE:
            flush_files()
    flush_lines()
    flush_files()
    return plan


def _text_call(
    channel_id: int, text: str, ref: int | None, nonce: str | None, preview: str
) -> ApiCall:
    """One text chunk: an edit of the live preview (falling back to deleting it and sending
    anew) when there is one with a numeric id, else a send."""
    send = send_call(channel_id, text, ref, nonce)
    preview_id = snowflake(preview) if preview else None
    if preview_id is None:
        return send
    target = {"channel_id": channel_id, "message_id": preview_id}
    return ApiCall(EDIT, {**target, "content": text}, (ApiCall(DELETE, target), send))


def _files_call(
    channel_id: int, items: list[MediaItem], ref: int | None, nonce: str | None
) -> ApiCall:
    """One message of files; if they cannot be read, a note naming them instead."""
    files = [(item.target, media_name(item)) for item in items]
    note = "\n".join(unavailable_note(name) for _, name in files)
    params = {"channel_id": channel_id, "files": files, "reference": ref, "nonce": nonce}
    fallback = send_call(channel_id, note, ref, f"{nonce}n" if nonce else None)
    return ApiCall(SEND_FILES, params, (fallback,))


# ----------------------------------------------------------------------------- previews


def preview_send(
    channel_id: int, text: str, *, limit: int, reply_to_id: str | None = None
) -> ApiCall:
    """Post a live preview (never split: cut to ``limit``), replying when asked."""
    return send_call(channel_id, text[:limit], snowflake(reply_to_id), None)


def preview_edit(channel_id: int, message_id: int, text: str, *, limit: int) -> ApiCall:
    return ApiCall(
        EDIT, {"channel_id": channel_id, "message_id": message_id, "content": text[:limit]}
    )
