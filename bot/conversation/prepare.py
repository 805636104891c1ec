"""The prepare stage (docs/architecture.md "How a message flows"): an admitted message → the user turn.

The attachments are fetched (capped in size; a guest's into its own directory, moved in
through the root's handle) and turned into model input (images, voice notes,
documents; never failing the turn), then the user turn is written: the metadata block, the
group's pending history, notes about what could not be read."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from pathlib import Path
from typing import Any

from bot import fs
from bot.rules.admission import Verdict, channel_policy, guest_dir
from bot.agent.turn import Agent, TurnRequest, format_user_turn, zone
from bot.config import Config
from bot.conversation import api, gating, requests
from bot.delivery.outbound import channel_traits
from bot.conversation.types import ApiTurn, UserTurn
from bot.store import Store
from channels.base import (
    Channel,
    ChannelError,
    InboundMessage,
    MediaItem,
    MediaTooLarge,
    adapter_for,
)

log = logging.getLogger("chela.conversation")


def file_root(cfg: Config, key: str, verdict: Verdict) -> Path | None:
    """A guest's own directory (its files, its media); None for the owner (the workspace)."""
    return guest_dir(cfg, key) if verdict.trust == "guest" else None


class Prepare:
    """One agent's prepare stage (``cfg``: that agent's view of the config)."""

    def __init__(
        self, cfg: Config, agent: Agent, channels: dict[str, Channel], store: Store
    ) -> None:
        self.cfg = cfg
        self.agent_id = cfg.agent.id  # the agent whose turns this stage prepares
        self.agent = agent
        self.channels = channels
        self.store = store

    def api_plan(self, msg: InboundMessage, key: str, verdict: Verdict) -> ApiTurn:
        """What an HTTP API request adds to its session (``conversation.api``):
        a client that rewrote its conversation starts the session afresh."""
        stateless = bool(msg.api.get("stateless"))
        state = None if stateless else self.store.get(api.state_key(key))
        turn = api.plan(
            msg.api,
            state,
            epoch=self.store.session(key)["epoch"],
            own_tools=self.agent.tool_names(verdict.trust or "guest"),
            native_tools=self.cfg.agent.native_tools,
        )
        if turn.fork and not turn.error:
            log.info("http client rewrote its conversation: session %s starts afresh", key)
            self.store.reset_session(key)
        return turn

    def request(
        self,
        msg: InboundMessage,
        key: str,
        user_text: str,
        verdict: Verdict,
        *,
        include_intro: bool,
        media: tuple[dict, ...] = (),
        api: ApiTurn | None = None,
    ) -> TurnRequest:
        """The turn's request (``requests.chat_request`` with what it needs looked up: the
        channel's traits, a group's context block, the delivery instructions)."""
        from bot.prompt.delivery import delivery_instructions
        from bot.prompt.group import group_chat_context

        pol = channel_policy(self.cfg, msg.channel)
        caps, reactions = channel_traits(adapter_for(self.channels, msg.channel, msg.account), pol)
        extra = ""
        if msg.chat_type == "group":
            sess = self.store.session(key)
            extra = group_chat_context(
                msg.channel,
                msg.chat_title or msg.chat_id,
                [],
                gating.activation(sess["activation"], pol),
                include_activation=include_intro and not sess["intro_done"],
            )
        ctx = requests.ChatContext(
            trust=verdict.trust or "guest",
            file_root=file_root(self.cfg, key, verdict),
            extra_context=extra,
            after_user_system=delivery_instructions(msg.channel),
            media=media,
        )
        return requests.chat_request(
            msg, key, user_text, requests.Traits(caps, reactions), ctx, api, agent=self.agent_id
        )

    async def user_turn(
        self,
        msg: InboundMessage,
        key: str,
        verdict: Verdict,
        *,
        pending: list[Any],
        was_mentioned: bool | None,
    ) -> UserTurn:
        """The user turn of ``msg`` (its attachments fetched into ``msg.attachments``)."""
        if not msg.attachments:  # most messages: nothing to fetch or read
            text = format_user_turn(
                msg, tz=zone(self.cfg), pending=pending, notes=[], was_mentioned=was_mentioned
            )
            return UserTurn(text)
        notes = await self.fetch_media(msg, verdict, key)
        # images, voice notes and documents → model input
        prep = await self.prepare_media(msg, verdict, key, addressed=was_mentioned is not False)
        text = format_user_turn(
            dataclasses.replace(msg, text=prep.text) if prep.text != msg.text else msg,
            tz=zone(self.cfg),
            pending=pending,
            notes=notes + prep.notes,
            was_mentioned=was_mentioned,
        )
        return UserTurn(prep.user_text(text), tuple(prep.media))

    def unread_turn(
        self, msg: InboundMessage, *, pending: list[Any], was_mentioned: bool | None
    ) -> UserTurn:
        """The user turn of a message whose preparation was stopped ( keeps the
        user message): its text, and a note for each attachment that was not read."""
        notes = [
            f"attachment not read: {m.name or m.kind} ({m.kind}); the turn was stopped"
            for m in msg.attachments
        ]
        text = format_user_turn(
            dataclasses.replace(msg, attachments=[]),
            tz=zone(self.cfg),
            pending=pending,
            notes=notes,
            was_mentioned=was_mentioned,
        )
        return UserTurn(text)

    async def fetch_media(self, msg: InboundMessage, verdict: Verdict, key: str) -> list[str]:
        """Download the attachments of an admitted message: into the media dir
        for the owner, into the guest's own directory otherwise; capped in size.  Returns
        notes for the user turn about files that could not be fetched."""
        ch = adapter_for(self.channels, msg.channel, msg.account)
        todo = [m for m in msg.attachments if m.ref and not m.target]
        if ch is None or not todo:
            return []
        root = file_root(self.cfg, key, verdict)
        # a guest's downloads land in a private dir first, then move into its media dir
        # through the root's handle (bot.fs)
        dest = fs.private_dir(self.cfg.agent.state_dir / "incoming" if root else self.cfg.media_dir)
        cap_mb = self.cfg.media.max_download_mb
        max_bytes = int(cap_mb * 1024 * 1024)
        notes: list[str] = []
        fetched: list[MediaItem] = []
        for item in msg.attachments:
            if item not in todo:
                fetched.append(item)
                continue
            label = item.name or item.kind
            try:
                got = await ch.fetch_media(item, dest, max_bytes)
                fetched.append(await _move_in(got, dest, root) if root else got)
            except MediaTooLarge:
                notes.append(
                    f"attachment not downloaded: {label} ({item.kind}) is larger than {cap_mb:g} MB"
                )
            except ChannelError as e:
                log.warning(
                    "media fetch failed channel=%s chat=%s: %s", msg.channel, msg.chat_id, e
                )
                notes.append(f"attachment could not be downloaded: {label} ({item.kind})")
            except OSError as e:  # e.g. the guest's media dir is a link: refused
                notes.append(f"attachment could not be saved: {label} ({e.strerror or e})")
        msg.attachments = fetched
        return notes

    async def prepare_media(
        self, msg: InboundMessage, verdict: Verdict, key: str, *, addressed: bool
    ):
        """The fetched attachments as model input (bot.media): never fails the turn."""
        from bot.media import Prepared, prepare_inbound

        if not msg.attachments:
            return Prepared(text=msg.text or "")
        root = file_root(self.cfg, key, verdict)
        try:
            return await prepare_inbound(
                self.cfg,
                msg,
                file_root=root if root is not None else self.cfg.agent.workspace,
                dest_dir=root / "media" if root is not None else self.cfg.media_dir,
                addressed=addressed,
                read_tool="read" in self.agent.tool_names(verdict.trust or "guest"),
                call=self.agent.gate.bind(verdict.trust or "guest", key),
            )
        except Exception:
            log.exception("attachments of %s/%s could not be prepared", msg.channel, msg.chat_id)
            return Prepared(text=msg.text or "", notes=["attachments could not be read"])


async def _move_in(item: MediaItem, incoming: Path, root: Path) -> MediaItem:
    """A guest's download, moved from the private ``incoming`` dir into its ``media/``
    through the root's handle (no link followed); the staged file goes either way."""
    src = Path(item.target)
    if src.absolute().parent != incoming.absolute():
        return item  # not downloaded by us (already a local file or a URL)
    try:
        moved = await asyncio.to_thread(fs.move_in, src, root, Path("media") / src.name)
    finally:
        src.unlink(missing_ok=True)
    return dataclasses.replace(item, target=str(moved))
