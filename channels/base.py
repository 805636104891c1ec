"""The small contract every channel adapter implements.

An adapter only translates: platform events become ``InboundMessage`` values handed to
the core through an ``InboundSink``; ``OutboundMessage`` values become platform API calls
(chunking and formatting for that platform included).  No policy, prompt text or storage
lives in an adapter.
"""

from __future__ import annotations

import abc
import asyncio
import dataclasses
from pathlib import Path
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol
from collections.abc import Awaitable, Callable, Iterable, Mapping

ChatType = Literal["direct", "group"]
MediaKind = Literal["image", "document", "video", "audio", "voice"]

DEFAULT_ACCOUNT = "default"


def account_key(channel: str, account: str = DEFAULT_ACCOUNT) -> str:
    """The name of one account of a channel: ``telegram`` for its default account (so a
    config with one account per channel names everything as before), ``telegram:work``
    for another.  The running adapters are keyed by it, and so are pairing requests and
    approved senders."""
    return channel if account in ("", DEFAULT_ACCOUNT) else f"{channel}:{account}"


def cursor_key(channel: str, account: str = DEFAULT_ACCOUNT) -> str:
    """The store's name for a poll-based account's position in its platform's update
    stream (``cursor.whatsapp``, ``cursor.whatsapp:work``): the key an adapter hands the
    sink with a message (see ``InboundSink``) and the app reads at start."""
    return f"cursor.{account_key(channel, account)}"


def split_account_key(key: str) -> tuple[str, str]:
    """``telegram:work`` → ("telegram", "work"); ``telegram`` or ``telegram:default`` →
    ("telegram", "default")."""
    channel, _, account = key.partition(":")
    return channel, account or DEFAULT_ACCOUNT


def labels(keys: Iterable[str]) -> dict[str, str]:
    """How logs, ``chela status``, ``chela doctor`` and the Control UI name each running
    adapter (keyed by :func:`account_key`): ``channel:account`` for a channel with several
    accounts (``telegram:default``, ``telegram:work``), the plain channel name otherwise (as
    before accounts existed)."""
    keys = list(keys)
    several = {split_account_key(k)[0] for k in keys if ":" in k}
    out = {}
    for key in keys:
        channel, account = split_account_key(key)
        out[key] = f"{channel}:{account}" if channel in several else key
    return out


def adapter_for(
    adapters: Mapping[str, Channel], channel: str, account: str = DEFAULT_ACCOUNT
) -> Channel | None:
    """The running adapter of ``channel``'s ``account``; None when that account is not
    running.  Never another account's adapter: a reply leaves through the account its
    message came in on, or not at all."""
    return adapters.get(account_key(channel, account))


@dataclass(frozen=True)
class MediaItem:
    """One attachment, inbound or outbound.

    ``target`` is an http(s) URL or an absolute local path.  Outbound local paths have
    already been checked by the core to lie inside the turn's file root or the media dir.

    An inbound attachment arrives *not downloaded*: ``ref`` is the platform's handle for
    it (a Telegram file_id, a Slack private URL, a signal-cli attachment id) and
    ``target`` is empty.  The core admits the sender first and only then asks the
    adapter to fetch it (``Channel.fetch_media``), so a stranger's file never touches
    the disk.
    """

    kind: MediaKind
    target: str
    name: str = ""
    mime: str = ""
    ref: str = ""  # platform handle of an inbound file not fetched yet
    size: int = 0  # size in bytes when the platform says it (0 = unknown)

    @property
    def is_url(self) -> bool:
        return self.target.startswith(("http://", "https://"))


@dataclass
class InboundMessage:
    """A message from a platform, already translated into Chela's terms."""

    channel: str  # "telegram", "discord", "slack", "signal", "terminal", "http"
    chat_id: str  # where a reply goes (DM chat id, group id, channel id)
    sender_id: str
    text: str
    message_id: str = ""
    chat_type: ChatType = "direct"
    account: str = "default"  # which bot account of the channel received it
    thread_id: str | None = (
        None  # forum topic / thread; becomes ``:thread:<id>`` in the session key
    )
    sender_name: str = ""
    sender_username: str = ""  # without "@"
    chat_title: str = ""  # group title when known
    reply_to_id: str | None = None  # id of the message this one replies to
    reply_to_bot: bool = False  # the replied-to message is one of ours
    peer_session: bool = (
        False  # the platform names the conversation by its sender (OpenAI ``user``):
    )
    # key it per sender whatever ``session.dm_scope`` says
    mentioned: bool = False  # a platform-native mention of the bot (entity, <@id>, @username)
    sender_is_bot: bool = False
    attachments: list[MediaItem] = field(default_factory=list)
    timestamp: float = 0.0  # unix seconds, platform time when known
    group_kind: str = (
        "group"  # "group" (Telegram/Signal) or "channel" (Discord/Slack) for session keys
    )
    raw_id: str = ""  # platform-level unique id for de-duplication (update id, event id)
    # a request/response API call (the OpenAI-compatible HTTP API): the client's
    # instructions, messages, tools and model parameters, validated by the adapter; empty
    # for chat platforms
    api: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> InboundMessage:
        data = dict(data)
        data["attachments"] = [MediaItem(**a) for a in data.get("attachments", [])]
        known = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})


@dataclass
class OutboundMessage:
    """A reply or proactive message for one chat.

    ``text`` is Markdown (the adapter chunks and renders it).  ``reply_to_id`` asks for a
    threaded reply to that message; ``thread_id`` keeps the message inside a forum topic or
    Slack thread.  Attachments are sent after the text, in order.
    """

    chat_id: str
    text: str = ""
    thread_id: str | None = None
    reply_to_id: str | None = None
    reply_mode: Literal["off", "first", "all"] = "off"  # how reply_to_id applies to chunks
    media: list[MediaItem] = field(default_factory=list)
    audio_as_voice: bool = False
    account: str = "default"
    # the same for every attempt to send this message (retries, after a crash): adapters of
    # platforms with idempotent sends use it (Discord's nonce); the others ignore it
    idempotency_key: str = ""
    # set on a reply that reports a failed turn: "model" (the provider failed),
    # "config" (a misconfigured model) or "budget" (the daily cost limit); chat channels
    # show the text like any reply, the HTTP API answers with an error status
    error: str = ""
    # the id of a live preview this reply replaces: the first text chunk is
    # edited into that message, the rest are sent as new messages (adapters with
    # ``capabilities.edit``; if the edit is refused, the preview is deleted and the chunk
    # sent as a new message)
    edit_id: str = ""
    # the answer to a request/response API call: ``usage`` (the turn's real
    # token counts), ``tool_calls`` (calls of the client's own tools) and
    # ``finish_reason``; chat channels ignore it
    api: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Capabilities:
    reactions: bool = False
    inline_buttons: bool = False
    media: bool = False
    threads: bool = False
    typing: bool = False
    max_text: int = 4000  # chunk size used for text
    proactive: bool = True  # can deliver a message nobody asked for (heartbeats, the message
    # tool); request/response channels (HTTP, terminal) cannot
    group_history: int = 50  # unanswered group messages kept as context (Discord keeps 20)
    edit: bool = False  # can edit and delete its own messages: live previews

    def names(self) -> list[str]:
        """Lower-case capability names for the Runtime line."""
        return sorted(
            n
            for n in ("reactions", "inline_buttons", "media", "threads", "typing")
            if getattr(self, n)
        )


class InboundSink(Protocol):
    """Called by an adapter for every inbound message.  It returns once the message is
    persisted, so an adapter acknowledges the platform (advances an offset) only after it
    returns.  It never raises for policy reasons; it may raise on storage failure, in which
    case the adapter must not acknowledge.

    ``cursor``: for a platform whose position the client keeps (an update offset), the
    ``(key, value)`` to store once this message is kept: the core writes it in the same
    transaction as the message's row (alone when the message is dropped), so the stored
    position never runs ahead of a stored message."""

    def __call__(
        self, msg: InboundMessage, cursor: tuple[str, int] | None = None
    ) -> Awaitable[None]: ...


FetchUrl = Callable[[str, Mapping[str, str], int], Awaitable[tuple[str, bytes]]]
"""The app's guarded fetch (``bot.net``'s rule) for a URL a platform's answer named:
``(url, headers, max_bytes) -> (content type, body)``.  No redirect is followed; it raises
``MediaTooLarge`` over ``max_bytes`` and ``ChannelError`` when the URL is refused or the
download fails."""


async def wait_task_end(task: asyncio.Task[Any] | None) -> BaseException | None:
    """For ``Channel.wait_closed``: wait for a channel's own background task to end and
    return its error (None if it returned or was cancelled).  Cancelling the waiter does
    not touch the task."""
    if task is None:
        return None
    try:
        await asyncio.shield(task)
    except asyncio.CancelledError:
        if not task.done():
            raise  # the waiter was cancelled, not the task
        return None
    except Exception as exc:
        return exc
    return None


class ChannelError(Exception):
    """A channel-level failure the daemon reports and retries (bad token, unreachable server)."""


class MediaTooLarge(ChannelError):
    """An inbound file is over the download cap; nothing (or nothing lasting) was written."""


SHOWN_STATES = ("connected", "starting", "retrying", "stopped", "failed")


def shown_state(state: str) -> str:
    """The word the Control UI shows for a channel's state: its own ones (``own_state``) fold
    into the few the UI knows: waiting to be linked or connecting is ``starting``, any other
    trouble ``retrying``."""
    head = state.split(":", maxsplit=1)[0].strip()
    if head in SHOWN_STATES:
        return head
    return "starting" if head in ("", "pairing", "connecting") else "retrying"


class Channel(abc.ABC):
    """One adapter per messaging platform."""

    name: str = "base"
    capabilities: Capabilities = Capabilities()

    @abc.abstractmethod
    async def start(self, sink: InboundSink) -> None:
        """Connect and begin delivering inbound messages to ``sink``.  Returns once
        connected (background tasks keep running); raises ``ChannelError`` on failure."""

    async def open_for_sending(self) -> None:
        """Connect for sending only: no inbound at all (no poll, gateway or event stream),
        so a one-shot command such as ``chela heartbeat`` does not compete with a running
        daemon for the bot's updates.  ``stop`` closes it.  Raises ``ChannelError``."""
        raise ChannelError(f"{self.name}: this channel cannot send on its own")

    @abc.abstractmethod
    async def stop(self) -> None:
        """Stop receiving and close connections.  Idempotent."""

    @abc.abstractmethod
    async def send(self, msg: OutboundMessage) -> list[str]:
        """Deliver text (chunked) then attachments.  Returns the platform ids of the sent
        messages.  Raises ``ChannelError`` when nothing could be delivered."""

    async def wait_closed(self) -> BaseException | None:
        """Return when the channel, after a successful ``start``, has stopped by itself
        (its connection died for good): the error, or None.  The daemon then stops and
        restarts it with backoff.  Not called after ``stop``.  The default never returns,
        for channels that recover from every failure on their own."""
        await asyncio.get_running_loop().create_future()
        return None  # pragma: no cover - never reached

    async def fetch_media(self, item: MediaItem, dest_dir: Path, max_bytes: int) -> MediaItem:
        """Download an inbound attachment (``item.ref``) into ``dest_dir`` (which exists,
        mode 0700) and return it with ``target`` set to the local file (mode 0600).
        Raises ``MediaTooLarge`` past ``max_bytes`` (stop reading there, leave no partial
        file) and ``ChannelError`` when it cannot be fetched.  Called by the core only
        after the sender is admitted.  The default returns the item unchanged, for
        channels whose attachments are already URLs or local files."""
        return item

    async def typing(self, chat_id: str, thread_id: str | None = None) -> None:  # noqa: B027 - optional, a no-op by default
        """Show a typing indicator once (the core refreshes it).  Optional."""

    async def react(self, chat_id: str, message_id: str, emoji: str) -> None:  # noqa: B027 - optional, a no-op by default
        """Set a reaction on a message.  Optional."""

    async def turn_done(self, chat_id: str, message_id: str) -> None:  # noqa: B027 - optional, a no-op by default
        """Called by the core when it has finished with an inbound message, whether or
        not anything was sent (silent replies, skipped senders).  Request/response
        channels (HTTP, terminal) use it to complete the caller's wait.  Optional."""

    # live previews: channels with ``capabilities.edit`` implement these three
    async def send_preview(
        self,
        chat_id: str,
        text: str,
        *,
        thread_id: str | None = None,
        reply_to_id: str | None = None,
    ) -> str:
        """Send a live preview: one message of plain text (no Markdown rendering, which
        half-written text would break), at most ``capabilities.max_text`` long.  Returns
        its id.  Raises on failure (the preview then stops)."""
        raise ChannelError(f"{self.name}: this channel cannot show live previews")

    async def edit_preview(
        self, chat_id: str, message_id: str, text: str, *, thread_id: str | None = None
    ) -> None:
        """Replace the text of a preview sent by ``send_preview``."""
        raise ChannelError(f"{self.name}: this channel cannot edit messages")

    async def delete_message(
        self, chat_id: str, message_id: str, *, thread_id: str | None = None
    ) -> None:
        """Delete one of the bot's own messages (a preview whose reply was silent)."""
        raise ChannelError(f"{self.name}: this channel cannot delete messages")

    def live_stream(self, chat_id: str) -> Callable[[str, Any], None] | None:
        """A request/response channel whose caller asked for the reply as it is generated
        (the HTTP API's ``stream: true``) returns a sink for ``("text", delta)``,
        ``("step", "")`` and ``("usage", {...})`` events (bot.delivery.previews.StreamText); None
        otherwise.  Called by the core when a turn for ``chat_id`` starts."""
        return None

    @property
    def bot_identity(self) -> dict[str, Any]:
        """What the adapter learned about itself at start (id, username).  Optional."""
        return {}

    def own_state(self) -> str:
        """A state only the platform's answers show, which ``chela status`` and the Control
        UI report instead of ``connected`` (``conflict``: another client uses the same
        key); "" for none.  Optional."""
        return ""

    _state_listener: Callable[[str, bool], None] | None = None

    def watch_state(self, listener: Callable[[str, bool], None]) -> None:
        """Subscribe ``listener(state, owner_must_act)`` to :meth:`tell_state` (the daemon
        does, before ``start``); one listener."""
        self._state_listener = listener

    def tell_state(self, state: str, *, owner_must_act: bool = False) -> None:
        """Report a new ``own_state()`` at once (the Control UI shows it live).
        ``owner_must_act``: the account stopped and stays down until the owner does
        something (a device logged out, a key revoked); the daemon then tells the owner on
        another channel, once per stop."""
        if self._state_listener is not None:
            self._state_listener(state, owner_must_act)
