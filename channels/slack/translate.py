"""Slack ⇄ Chela translation as pure functions: no I/O, no asyncio, no clock.

Inbound: the ``event`` object of an Events API payload (a ``message`` or ``app_mention``
event, the same dict over Socket Mode and HTTP) becomes an ``InboundMessage`` or ``None``:
edits, deletions, joins and other housekeeping subtypes, other event types, the bot's own
messages, and events without a channel or ``ts``.  A field of the wrong type counts as
absent; nothing here raises on bad input.

Outbound: an ``OutboundMessage`` becomes the list of Web API calls to make, in order
(``plan_send``), each a method name and its params, with what to do instead when Slack
refuses it (``ApiCall.fallback``).  Previews, reactions and deletions get their calls too.

The adapter state these need is passed in explicitly: who the bot is (``BotIdentity``, from
``auth.test``), the thread roots the bot posted in and the ``ts`` of its own top-level
messages (any container: the adapter's ``BoundedLRU``, a set), which files exist on disk,
and the time to use when an event's ``ts`` is not a number.

Slack conventions kept here:

* Slack escapes ``&``, ``<`` and ``>`` in message text and spells a mention ``<@U123>`` (or
  ``<@U123|name>``); the bot's own mention becomes ``@<bot name>``.
* Message ids are ``ts`` strings (``"1700000000.000100"``); ``(channel, ts)`` names a message.
  A reply in a thread carries ``thread_ts``, the root's ``ts``.
* Slack cannot thread "only the first chunk" coherently -- the rest of the reply would land in
  the channel, detached from the part in the thread.  So when a reply is threaded at all
  (``thread_id`` set, or ``reply_to_id`` set with any ``reply_mode``), every chunk and
  attachment of that ``OutboundMessage`` goes to the same thread.  ``thread_id`` wins over
  ``reply_to_id`` (Slack threads do not nest).
"""

from __future__ import annotations

import math
import mimetypes
import re
from collections.abc import Collection, Container, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from channels.base import ChatType, InboundMessage, MediaItem, MediaKind, OutboundMessage
from channels.chunking import chunk_rendered
from channels.formatting import markdown_to_slack_mrkdwn, slack_escape, slack_link

CHANNEL = "slack"
SLACK_HARD_LIMIT = 40000  # chat.postMessage refuses longer text (msg_too_long)

# message subtypes that carry something said; the rest (edits, deletions, joins, topic
# changes, …) are acknowledged and ignored
ALLOWED_SUBTYPES = frozenset({"", "file_share", "thread_broadcast", "bot_message", "me_message"})

# Web API methods of the planned calls.  ``files.upload_v2`` is slack-sdk's upload
# (files.getUploadURLExternal, the upload, files.completeUploadExternal).
POST = "chat.postMessage"
UPDATE = "chat.update"
DELETE = "chat.delete"
UPLOAD = "files.upload_v2"
REACT = "reactions.add"

_MEDIA_LABELS = {"image": "Image", "video": "Video", "audio": "Audio", "voice": "Audio"}
_SAFE_NAME = re.compile(r"[^A-Za-z0-9._-]+")
_EMOJI_NAME = re.compile(r"[\w+\-']+")

# A few unicode emoji the core uses, mapped to Slack's short names.
EMOJI_NAMES: dict[str, str] = {
    "👀": "eyes",
    "✅": "white_check_mark",
    "✔": "heavy_check_mark",
    "👍": "thumbsup",
    "👎": "thumbsdown",
    "❤": "heart",
    "🔥": "fire",
    "🎉": "tada",
    "😂": "joy",
    "🤔": "thinking_face",
    "❌": "x",
    "⚠": "warning",
    "🙏": "pray",
    "💯": "100",
    "⏳": "hourglass_flowing_sand",
    "⌛": "hourglass",
    "🤖": "robot_face",
    "👋": "wave",
    "🚀": "rocket",
    "💡": "bulb",
    "🧠": "brain",
    "✍": "writing_hand",
    "👌": "ok_hand",
    "⚡": "zap",
    "🙂": "slightly_smiling_face",
    "😊": "blush",
    "😢": "cry",
    "🆗": "ok",
    "📝": "memo",
    "🔍": "mag",
}


@dataclass(frozen=True)
class BotIdentity:
    """Who the bot is, as ``auth.test`` answered: its member id (``U…``), its bot id
    (``B…``) and its name."""

    user_id: str = ""
    bot_id: str = ""
    username: str = ""


# ----------------------------------------------------------------------------- small helpers


def _str(value: object) -> str:
    """A string field; anything else counts as absent."""
    return value if isinstance(value, str) else ""


def _dict(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _size(value: object) -> int:
    """A file's declared size; 0 when absent or not a number."""
    if isinstance(value, bool):
        return 0
    if isinstance(value, float):
        value = int(value) if math.isfinite(value) else 0
    if isinstance(value, int | str):
        try:
            return max(0, int(value or 0))
        except ValueError:
            return 0
    return 0


def slack_emoji_name(emoji: str) -> str:
    """``👀`` → ``eyes``; ``:eyes:`` → ``eyes``; unknown unicode is returned stripped."""
    e = (emoji or "").strip()
    base = e.replace("\ufe0f", "").replace("\ufe0e", "")
    if base in EMOJI_NAMES:
        return EMOJI_NAMES[base]
    return e.strip(":").strip()


def safe_file_name(name: str) -> str:
    """A file name safe to put on disk (no directories, no odd characters, ≤ 80 chars)."""
    return _SAFE_NAME.sub("_", Path(name).name).strip("._")[:80] or "file"


def token_allowed_for(url: str, api_base: str) -> bool:
    """Whether the bot token may go to ``url``: Slack's hosts or the configured API host."""
    host = (urlparse(url).hostname or "").lower()
    api_host = (urlparse(api_base).hostname or "").lower()
    return host in (api_host, "slack.com") or host.endswith(".slack.com")


# ----------------------------------------------------------------------------- inbound


def media_kind(file: Mapping[str, Any]) -> MediaKind:
    """A Slack file object's kind: a voice clip (``slack_audio``), else by MIME type."""
    mime = _str(file.get("mimetype")).lower()
    if file.get("subtype") == "slack_audio":
        return "voice"
    if mime.startswith("image/"):
        return "image"
    if mime.startswith("video/"):
        return "video"
    if mime.startswith("audio/"):
        return "audio"
    return "document"


def attachment_refs(files: object) -> list[MediaItem]:
    """An event's ``files`` as not-yet-downloaded attachments (``ref`` = the private URL).
    Files without one (tombstoned, external) are left out: there is nothing to fetch."""
    items: list[MediaItem] = []
    for f in files if isinstance(files, list) else ():
        if not isinstance(f, dict):
            continue
        url = _str(f.get("url_private_download")) or _str(f.get("url_private"))
        if not url:
            continue
        name = _str(f.get("name")) or _str(f.get("title")) or _str(f.get("id")) or "file"
        items.append(
            MediaItem(
                kind=media_kind(f),
                target="",
                name=name,
                mime=_str(f.get("mimetype")) or mimetypes.guess_type(name)[0] or "",
                ref=url,
                size=_size(f.get("size")),
            )
        )
    return items


def clean_text(text: str, bot: BotIdentity) -> str:
    """Slack escapes ``& < >``; the bot's own mention becomes ``@<bot name>``."""
    if bot.user_id:
        name = bot.username or "bot"
        text = re.sub(rf"<@{re.escape(bot.user_id)}(?:\|[^>]*)?>", f"@{name}", text)
    return text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")


def is_own(event: Mapping[str, Any], bot: BotIdentity) -> bool:
    """Whether the bot itself wrote this event (by its member id or its bot id)."""
    user, bot_id = event.get("user"), event.get("bot_id")
    return bool((bot.user_id and user == bot.user_id) or (bot.bot_id and bot_id == bot.bot_id))


def _seconds(ts: str, fallback: float) -> float:
    try:
        value = float(ts)
    except ValueError:
        return fallback
    return value if math.isfinite(value) else fallback


def inbound_message(
    event: object,
    *,
    bot: BotIdentity,
    bot_threads: Container[str] = frozenset(),
    bot_roots: Container[str] = frozenset(),
    account: str = "default",
    now: float = 0.0,
) -> InboundMessage | None:
    """Turn one ``message``/``app_mention`` event into an ``InboundMessage`` (``None`` for
    everything else).

    ``bot_threads`` holds the thread roots the bot posted in (a reply there counts as a
    mention), ``bot_roots`` the ``ts`` of the bot's own top-level messages (a thread under
    one is a reply to the bot).  ``now`` stands in for an event ``ts`` that is no number."""
    if not isinstance(event, dict):
        return None
    etype = event.get("type")
    subtype = event.get("subtype")
    if etype not in ("message", "app_mention"):
        return None
    said = subtype is None or (isinstance(subtype, str) and subtype in ALLOWED_SUBTYPES)
    if etype == "message" and not said:
        return None
    channel = _str(event.get("channel"))
    ts = _str(event.get("ts"))
    if not channel or not ts or is_own(event, bot):
        return None
    user = _str(event.get("user"))
    bot_flag = event.get("bot_id")
    sender_is_bot = bool(bot_flag) or subtype == "bot_message"
    text = _str(event.get("text"))
    thread_ts = _str(event.get("thread_ts"))
    thread_id = thread_ts if thread_ts and thread_ts != ts else None

    channel_type = _str(event.get("channel_type")) or ("im" if channel.startswith("D") else "")
    chat_type: ChatType = "direct" if channel_type == "im" else "group"

    mentioned = (
        etype == "app_mention"
        or (bool(bot.user_id) and (f"<@{bot.user_id}>" in text or f"<@{bot.user_id}|" in text))
        or (thread_id is not None and thread_id in bot_threads)
    )
    profile = _dict(event.get("user_profile"))
    sender_name = (
        _str(profile.get("display_name"))
        or _str(profile.get("real_name"))
        or _str(event.get("username"))
    )
    return InboundMessage(
        channel=CHANNEL,
        chat_id=channel,
        sender_id=user or _str(bot_flag),
        text=clean_text(text, bot),
        message_id=ts,
        chat_type=chat_type,
        account=account,
        thread_id=thread_id,
        sender_name=sender_name,
        sender_username=_str(profile.get("name")),
        reply_to_id=thread_id,
        reply_to_bot=thread_id is not None and thread_id in bot_roots,
        mentioned=mentioned,
        sender_is_bot=sender_is_bot,
        attachments=attachment_refs(event.get("files")),
        timestamp=_seconds(ts, now),
        group_kind="channel",
        # Stable across app_mention/message and across retries (event ids differ), so the
        # core's de-dup also holds after a restart.
        raw_id=f"{channel}:{ts}",
    )


# ----------------------------------------------------------------------------- outbound


@dataclass(frozen=True)
class ApiCall:
    """One Web API call: the method (``POST``, ``UPDATE``, …) and its params.  ``fallback``
    is what to call, in order, instead when Slack refuses this one: the new post that
    replaces a preview which cannot be edited (after deleting it), the note that replaces
    a file whose upload failed."""

    method: str
    params: dict[str, Any]
    fallback: tuple[ApiCall, ...] = field(default=())


def thread_for(msg: OutboundMessage) -> str | None:
    """The thread an outbound message goes to: ``thread_id``, else ``reply_to_id``."""
    return msg.thread_id or msg.reply_to_id or None


def render_chunks(text: str, limit: int) -> list[str]:
    """Markdown → mrkdwn posts, each within ``limit`` after escaping."""
    text = (text or "").strip()
    if not text:
        return []
    return [r for r in chunk_rendered(text, limit, markdown_to_slack_mrkdwn) if r.strip()]


def post_call(chat_id: str, text: str, thread_ts: str | None = None) -> ApiCall:
    params: dict[str, Any] = {"channel": chat_id, "text": text, "mrkdwn": True}
    if thread_ts:
        params["thread_ts"] = thread_ts
    return ApiCall(POST, params)


def delete_call(chat_id: str, ts: str) -> ApiCall:
    return ApiCall(DELETE, {"channel": chat_id, "ts": ts})


def media_name(item: MediaItem) -> str:
    """The name an outbound attachment goes by: its own, else the last part of its path."""
    if item.name:
        return item.name
    path = urlparse(item.target).path if item.is_url else item.target
    return Path(path).name or "attachment"


def unavailable_note(name: str) -> str:
    return f"[attachment unavailable: {slack_escape(name)}]"


def plan_send(
    msg: OutboundMessage, *, chunk_limit: int, local_files: Collection[str] = ()
) -> list[ApiCall]:
    """The calls that deliver one outbound message, in order.

    The Markdown is chunked so each mrkdwn post fits ``chunk_limit``; with ``edit_id`` (a
    live preview) the first chunk is a ``chat.update`` of the preview, falling back
    to deleting it and posting anew.  Attachments follow the text: ``local_files`` are the
    targets the caller found to be files on disk, uploaded (a note if the upload fails);
    URLs are posted as ``<url|name>`` links, other targets as a note.  Everything goes to
    the thread of ``thread_for(msg)``."""
    thread_ts = thread_for(msg)
    calls: list[ApiCall] = []
    preview = msg.edit_id
    for chunk in render_chunks(msg.text, chunk_limit):
        post = post_call(msg.chat_id, chunk, thread_ts)
        if preview:
            edit = {"channel": msg.chat_id, "ts": preview, "text": chunk}
            calls.append(ApiCall(UPDATE, edit, (delete_call(msg.chat_id, preview), post)))
            preview = ""
        else:
            calls.append(post)

    for item in msg.media:
        name = media_name(item)
        if item.is_url:
            label = _MEDIA_LABELS.get(item.kind, "File")
            text = f"{label}: {slack_link(item.target, name)}"
            calls.append(post_call(msg.chat_id, text, thread_ts))
            continue
        note = post_call(msg.chat_id, unavailable_note(name), thread_ts)
        if item.target not in local_files:
            calls.append(note)
            continue
        upload = {
            "channel": msg.chat_id,
            "file": str(Path(item.target)),
            "filename": name,
            "title": name,
            "thread_ts": thread_ts or None,
        }
        calls.append(ApiCall(UPLOAD, upload, (note,)))
    return calls


def upload_id(resp: Mapping[str, Any], chat_id: str) -> str:
    """The id of an uploaded file's message: the share's ``ts`` when Slack reports it,
    else the file id."""
    files = resp.get("files") or ([resp.get("file")] if resp.get("file") else [])
    for f in files if isinstance(files, list) else ():
        if not isinstance(f, dict):
            continue
        shares = _dict(f.get("shares"))
        for scope in ("public", "private"):
            for share in _dict(shares.get(scope)).get(chat_id) or []:
                if isinstance(share, dict) and share.get("ts"):
                    return str(share["ts"])
        if f.get("id"):
            return str(f["id"])
    return ""


# ----------------------------------------------------------------------------- previews, reactions


def preview_text(text: str, limit: int) -> str:
    """A live preview's mrkdwn, cut to ``limit`` (a preview is never split)."""
    try:
        rendered = markdown_to_slack_mrkdwn(text)
    except Exception:
        rendered = slack_escape(text)
    return rendered[:limit]


def preview_post(
    chat_id: str,
    text: str,
    *,
    limit: int,
    thread_id: str | None = None,
    reply_to_id: str | None = None,
) -> ApiCall:
    """Post a preview, in the thread the reply goes to (``thread_for``)."""
    return post_call(chat_id, preview_text(text, limit), thread_id or reply_to_id)


def preview_edit(chat_id: str, ts: str, text: str, *, limit: int) -> ApiCall:
    return ApiCall(UPDATE, {"channel": chat_id, "ts": ts, "text": preview_text(text, limit)})


def reaction_call(chat_id: str, message_id: str, emoji: str) -> ApiCall | None:
    """``reactions.add`` for an emoji, or ``None`` when it has no Slack name."""
    name = slack_emoji_name(emoji)
    if not name or not _EMOJI_NAME.fullmatch(name):
        return None
    return ApiCall(REACT, {"channel": chat_id, "timestamp": message_id, "name": name})
