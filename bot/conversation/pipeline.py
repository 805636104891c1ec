"""The conversation pipeline (ARCHITECTURE.md move 5): inbound messages → access policy,
group gating, commands, turns, delivery.

``Conversation.on_inbound`` is the sink every channel adapter calls.  It stores the message
(so the adapter may acknowledge the platform) and queues the work on the session's lane;
the lane runs one turn at a time per session, in arrival order.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import re
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, Literal, TypeVar

from bot import api_turn, fs, owner_route, pairing
from bot.admission import Verdict, admit, channel_policy, guest_dir, session_key
from bot.agent.turn import Agent, TurnRequest, format_user_turn, zone
from bot.config import ChannelPolicy, Config
from bot.approvals import Approvals
from bot.conversation.commands import COMMANDS, CommandPorts, command_call, run_command
from bot.conversation.commands.help import help_text as _help_text
from bot.conversation.types import CommandCall
from bot.delivery import send
from bot.delivery.outbound import build_outbound, channel_traits
from bot.delivery.outbox import Outbox, out_json
from bot.sessions import SessionLanes
from bot.store import Store, storage_full
from bot.delivery.previews import PREVIEW_INTERVAL, Preview, StreamText
from bot.untrusted import valid_utf8
from channels.base import (
    Capabilities,
    Channel,
    ChannelError,
    InboundMessage,
    MediaItem,
    MediaTooLarge,
    OutboundMessage,
)

log = logging.getLogger("chela.router")  # the name operators grep for
T = TypeVar("T")

TYPING_EVERY = 4.0
ACK_EMOJI = "👀"
STORE_RETRY_MAX = 30.0  # the longest wait between two tries of a store write on a full disk


def help_text(owner: bool) -> str:
    """The /help text (kept here while callers move to bot.conversation.commands)."""
    return _help_text(COMMANDS.values(), owner)


def valid_text(msg: InboundMessage) -> InboundMessage:
    """The message with lone UTF-16 surrogates (which some clients send, and which SQLite
    cannot store) replaced by U+FFFD in every text field; the same object when clean."""

    changed: dict[str, Any] = {}
    for f in (
        "text",
        "sender_name",
        "sender_username",
        "chat_title",
        "chat_id",
        "sender_id",
        "message_id",
    ):
        value = getattr(msg, f)
        if isinstance(value, str) and (fixed := valid_utf8(value)) is not value:
            changed[f] = fixed
    if msg.api and (api := _valid_data(msg.api)) != msg.api:  # the HTTP API's messages
        changed["api"] = api
    return dataclasses.replace(msg, **changed) if changed else msg


def _valid_data(v: Any) -> Any:
    """JSON data with every string made valid UTF-8 (``valid_utf8``)."""
    if isinstance(v, str):
        return valid_utf8(v)
    if isinstance(v, list):
        return [_valid_data(x) for x in v]
    if isinstance(v, dict):
        return {_valid_data(k): _valid_data(x) for k, x in v.items()}
    return v


class _Approved:
    """The stored pairing approvals, as the container ``admit`` looks in."""

    def __init__(self, store: Store):
        self.store = store

    def __contains__(self, item: object) -> bool:
        if not (isinstance(item, tuple) and len(item) == 2):
            return False
        channel, sender = item
        return bool(self.store.is_approved(str(channel), str(sender)))


class Conversation:
    def __init__(
        self,
        cfg: Config,
        store: Store,
        agent: Agent,
        lanes: SessionLanes,
        channels: dict[str, Channel],
        outbox: Outbox,
        *,
        approvals: Approvals | None = None,
    ):
        self.cfg = cfg
        self.store = store
        self.agent = agent
        self.lanes = lanes
        self.channels = channels
        self.outbox = outbox  # every reply is a stored row it sends (built by the daemon)
        # the command table's reach (/approve and /deny answer held exec commands)
        self.command_ports = CommandPorts(
            cfg, store, agent, turn_request=self._command_request, approvals=approvals
        )
        self._name_re = (
            re.compile(rf"(?<!\w){re.escape(cfg.agent.name)}(?!\w)", re.IGNORECASE)
            if cfg.agent.name
            else None
        )
        self.approved = _Approved(store)
        self.accepting = True
        self._tasks: set[asyncio.Task] = set()
        self._queued: set[int] = set()  # inbound ids queued or running now
        self._recovered = False  # until recover() ran, intake only stores
        self._started = time.time()
        # live previews (SPEC §12): the spacing of their edits, on an injectable clock
        self.preview_interval = PREVIEW_INTERVAL
        self.preview_clock: Callable[[], float] = time.monotonic
        self.preview_sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep

    def _background(self, coro) -> None:
        task = asyncio.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # ------------------------------------------------------------------------- policy
    def policy(self, channel: str) -> ChannelPolicy | None:
        return channel_policy(self.cfg, channel)

    def admit(self, msg: InboundMessage) -> Verdict:
        return admit(msg, self.cfg, self.approved)

    def session_key(self, msg: InboundMessage, verdict: Verdict | None = None) -> str:
        verdict = verdict or self.admit(msg)
        return session_key(msg, self.cfg, verdict.trust if verdict.served else "guest")

    # ------------------------------------------------------------------------ intake
    async def on_inbound(self, msg: InboundMessage) -> None:
        """The sink: decide admission, persist, then queue.  Returns once the message is
        stored (or deliberately dropped)."""
        msg = valid_text(msg)
        verdict = self.admit(msg)
        if verdict.action == "drop":
            log.info(
                "not served channel=%s chat=%s sender=%s reason=%s",
                msg.channel,
                msg.chat_id,
                msg.sender_id,
                verdict.reason,
            )
            return
        key = self.session_key(msg, verdict)
        message_id = msg.message_id or msg.raw_id or f"t{time.time_ns()}"
        inbound_id = await self._store_write(
            "storing an inbound message",
            lambda: self.store.add_inbound(
                msg.channel, msg.account, msg.chat_id, message_id, key, msg.to_json()
            ),
        )
        if inbound_id is None:
            log.info(
                "duplicate message ignored channel=%s chat=%s id=%s",
                msg.channel,
                msg.chat_id,
                message_id,
            )
            return
        if verdict.action == "pair":
            # kept so that the owner's approval can answer it; never processed before that.
            # Only the newest one per sender is kept: a stranger cannot fill the database.
            self.store.hold_for_pairing(inbound_id, key)
            if self.accepting:
                self.lanes.submit(key, lambda: self._pairing_reply(msg))
            return
        if not self.accepting or not self._recovered:
            # stored; processed after restart, or (during start-up) by recover(), in arrival
            # order behind the messages the last run left unanswered
            return
        call = command_call(msg, self.cfg, key, verdict, on_arrival=True)
        if call and COMMANDS[call.name].immediate:
            # answered now (a turn waiting for it may hold this session's lane); the reply
            # is delivered in the background so the platform's intake never waits on it
            self._background(self._immediate(inbound_id, call))
            return
        self._queue(key, inbound_id, lambda: self._process(inbound_id, msg, key, verdict))

    def _queue(self, key: str, inbound_id: int, job) -> bool:
        """Queue the work of one stored message, at most once: live intake and ``recover``
        (channels start before it runs) may both see a message that arrives during start-up."""
        if inbound_id in self._queued:
            return False
        self._queued.add(inbound_id)

        async def run():
            try:
                return await job()
            finally:
                self._queued.discard(inbound_id)

        self.lanes.submit(key, run)
        return True

    async def recover(self) -> int:
        """Queue stored messages that were never answered (crash or restart); the daemon
        started the outbox, with what the last run left unsent, just before."""
        self._recovered = True  # from here on intake queues (no await before the loop below)
        queued = 0
        for row in self.store.unfinished_inbound():
            msg = InboundMessage.from_json(row.payload)
            if msg.api and msg.timestamp < self._started:
                # an HTTP API call of the last run: its caller has gone (it got a 503)
                self.store.set_inbound_status(row.id, "skipped")
                continue

            def job(r=row, m=msg):
                return self._process(r.id, m, r.session_key, None)

            queued += self._queue(row.session_key, row.id, job)
        if queued:
            log.info("recovering %d unanswered message(s)", queued)
        return queued

    async def pairing_approved(self, channel: str, sender_id: str) -> bool:
        """The owner approved a pairing request (``chela pairing approve``): tell the sender,
        then answer the message that asked (the newest one; older ones are dropped)."""
        probe = InboundMessage(channel=channel, chat_id=sender_id, sender_id=sender_id, text="")
        held = self.store.inbound_with_status(
            "pairing", session_key=session_key(probe, self.cfg, "guest")
        )
        if not held:
            return False
        last = held[-1]  # on_inbound keeps only the newest one
        msg = InboundMessage.from_json(last.payload)
        verdict = self.admit(msg)
        if not verdict.served:
            return False
        key = self.session_key(msg, verdict)
        self.store.requeue_inbound(last.id, key)
        with contextlib.suppress(Exception):
            await send.deliver(
                self.outbox,
                msg.channel,
                OutboundMessage(
                    chat_id=msg.chat_id, account=msg.account, text=pairing.approved_message()
                ),
                kind="pairing",
            )
        self._queue(key, last.id, lambda: self._process(last.id, msg, key, verdict))
        return True

    # --------------------------------------------------------------------- processing
    async def _pairing_reply(self, msg: InboundMessage) -> None:
        text = pairing.request_pairing(self.store, msg.channel, msg.sender_id, msg.sender_name)
        code = next(
            (
                r["code"]
                for r in self.store.pairing_requests(msg.channel)
                if r["sender_id"] == msg.sender_id
            ),
            "?",
        )
        log.info(
            "pairing requested channel=%s sender=%s code=%s replied=%s; to admit them run: chela pairing approve %s %s",
            msg.channel,
            msg.sender_id,
            code,
            bool(text),
            msg.channel,
            code,
        )
        if text:
            with contextlib.suppress(Exception):
                await send.deliver(
                    self.outbox,
                    msg.channel,
                    OutboundMessage(chat_id=msg.chat_id, text=text, account=msg.account),
                    kind="pairing",
                )

    async def _process(
        self, inbound_id: int, msg: InboundMessage, key: str, verdict: Verdict | None
    ) -> None:
        started = time.perf_counter()
        later = False  # retried after a full disk: the message is not finished
        try:
            if verdict is None:  # recovered after a restart: the config may have changed since
                verdict = self.admit(msg)
            if not verdict.served:
                self.store.set_inbound_status(inbound_id, "skipped")
                log.info(
                    "not served channel=%s session=%s reason=%s", msg.channel, key, verdict.reason
                )
                return
            call = command_call(msg, self.cfg, key, verdict, on_arrival=False)
            if call is not None:
                await self._command(inbound_id, call)
                return
            if msg.chat_type == "group" and not self._addressed(msg, key):
                ch = self.channels.get(msg.channel)
                cap = (ch.capabilities if ch else Capabilities()).group_history
                label = msg.sender_name or msg.sender_username or msg.sender_id
                self.store.add_group_history(
                    key, label, msg.text or "", msg.timestamp or time.time(), cap
                )
                self.store.set_inbound_status(inbound_id, "history")
                return
            await self._turn(inbound_id, msg, key, verdict)
            log.info(
                "turn done channel=%s session=%s trust=%s ms=%.0f",
                msg.channel,
                key,
                verdict.trust,
                (time.perf_counter() - started) * 1000,
            )
        except asyncio.CancelledError:
            raise
        except Exception as e:
            if storage_full(e):
                # a full disk: no apology, the answer comes once space is back (the stored
                # message stays 'pending'; a restart would answer it too)
                self.outbox.storage.failed(e, "answering a message")
                later = True
                self._background(self._retry_later(inbound_id, msg, key))
                return
            log.exception("turn failed channel=%s session=%s", msg.channel, key)
            # the apology first: it must not depend on the store (the outbox sends it from
            # memory when it cannot be stored)
            with contextlib.suppress(Exception):
                await send.deliver(self.outbox, msg.channel, _apology(msg), kind="apology")
            try:
                self.store.set_inbound_status(inbound_id, "failed")
            except Exception:
                log.exception(
                    "could not record the failed turn channel=%s session=%s", msg.channel, key
                )
        finally:
            ch = self.channels.get(msg.channel)
            if ch is not None and not later:
                with contextlib.suppress(Exception):
                    await ch.turn_done(msg.chat_id, msg.message_id)

    def _activation(self, msg: InboundMessage, key: str) -> Literal["mention", "always"]:
        act = self.store.session(key)["activation"]
        if act in ("mention", "always"):
            return act  # one of the two literals, checked above
        pol = self.policy(msg.channel)
        return "mention" if (pol is None or pol.require_mention) else "always"

    def _addressed(self, msg: InboundMessage, key: str) -> bool:
        if self._activation(msg, key) == "always":
            return True
        if msg.mentioned or msg.reply_to_bot:
            return True
        return bool(self._name_re and self._name_re.search(msg.text or ""))

    # ----------------------------------------------------------------------- commands
    async def _command(self, inbound_id: int, call: CommandCall) -> None:
        """Answer a command (bot.conversation.commands), store the answer, deliver it."""
        replies = await run_command(call, self.command_ports)
        msg = call.msg
        outs = [
            OutboundMessage(
                chat_id=msg.chat_id, text=text, thread_id=msg.thread_id, account=msg.account
            )
            for text in replies.texts
        ]
        await self._answer(inbound_id, call.key, outs, "storing a command answer")

    async def _immediate(self, inbound_id: int, call: CommandCall) -> None:
        await self._command(inbound_id, call)
        ch = self.channels.get(call.msg.channel)
        if ch is not None:
            with contextlib.suppress(Exception):
                await ch.turn_done(call.msg.chat_id, call.msg.message_id)

    async def _answer(
        self, inbound_id: int, key: str, outs: list[OutboundMessage], what: str
    ) -> None:
        """Store an answer that is not a model turn with its message, then deliver it."""
        ids = await self._store_write(
            what,
            lambda: self.store.commit_turn(
                key,
                "",
                [],
                inbound_id=inbound_id,
                outbound=[out_json(o) for o in outs],
                outbox_kind="command",
            ),
        )
        await send.deliver_stored(self.outbox, ids)

    # --------------------------------------------------------------------------- turns
    def _command_request(self, call: CommandCall) -> TurnRequest:
        return self._turn_request(call.msg, call.key, "", call.verdict, include_intro=False)

    def file_root(self, key: str, verdict: Verdict) -> Path | None:
        return guest_dir(self.cfg, key) if verdict.trust == "guest" else None

    def _live_output(
        self, ch: Channel | None, pol: ChannelPolicy | None, msg: InboundMessage
    ) -> Preview | StreamText | None:
        """What shows this turn while the model writes it (SPEC §12): a live preview in a
        chat whose channel has ``streaming = "partial"`` and can edit, the caller's stream
        on a request/response channel that asked for one (HTTP ``stream: true``), else
        nothing."""
        if ch is None:
            return None
        sink = ch.live_stream(msg.chat_id)
        if sink is not None:
            return StreamText(sink)
        if pol is None or pol.streaming != "partial" or not ch.capabilities.edit:
            return None
        mode = pol.reply_to_mode
        return Preview(
            ch,
            msg.chat_id,
            thread_id=msg.thread_id,
            # where the reply goes unless a reply tag says otherwise (build_outbound)
            reply_to_id=(msg.message_id or None) if mode in ("first", "all") else None,
            interval=self.preview_interval,
            clock=self.preview_clock,
            sleep=self.preview_sleep,
            max_chars=ch.capabilities.max_text,
        )

    def _turn_request(
        self,
        msg: InboundMessage,
        key: str,
        user_text: str,
        verdict: Verdict,
        *,
        include_intro: bool,
    ) -> TurnRequest:
        from bot.prompt.delivery import delivery_instructions
        from bot.prompt.group import group_chat_context

        caps, reactions = channel_traits(self.channels.get(msg.channel), self.policy(msg.channel))
        extra = ""
        if msg.chat_type == "group":
            sess = self.store.session(key)
            extra = group_chat_context(
                msg.channel,
                msg.chat_title or msg.chat_id,
                [],
                self._activation(msg, key),
                include_activation=include_intro and not sess["intro_done"],
            )
        return TurnRequest(
            session_key=key,
            user_text=user_text,
            channel=msg.channel,
            account=msg.account,
            chat_type=msg.chat_type,
            group_id=msg.chat_id if msg.chat_type == "group" else "",
            group_title=msg.chat_title if msg.chat_type == "group" else "",
            extra_context=extra,
            capabilities=caps,
            reactions=reactions,
            after_user_system=delivery_instructions(msg.channel),
            route={
                "channel": msg.channel,
                "chat_id": msg.chat_id,
                "account": msg.account,
                "thread_id": msg.thread_id,
                "chat_type": msg.chat_type,
            },
            message_text=msg.text,
            trust=verdict.trust or "guest",
            file_root=self.file_root(key, verdict),
        )

    async def _fetch_media(self, msg: InboundMessage, verdict: Verdict, key: str) -> list[str]:
        """Download the attachments of an admitted message (SPEC §9.4): into the media dir
        for the owner, into the guest's own directory otherwise; capped in size.  Returns
        notes for the user turn about files that could not be fetched."""
        ch = self.channels.get(msg.channel)
        todo = [m for m in msg.attachments if m.ref and not m.target]
        if ch is None or not todo:
            return []
        root = self.file_root(key, verdict)
        # a guest's downloads land in a private dir first, then move into its media dir
        # through the root's handle (bot.fs, SPEC §9.5)
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

    async def _prepare_media(
        self, msg: InboundMessage, verdict: Verdict, key: str, *, addressed: bool
    ):
        """The fetched attachments as model input (bot.media): never fails the turn."""
        from bot.media import Prepared, prepare_inbound

        if not msg.attachments:
            return Prepared(text=msg.text or "")
        root = self.file_root(key, verdict)
        try:
            return await prepare_inbound(
                self.cfg,
                msg,
                file_root=root if root is not None else self.cfg.agent.workspace,
                dest_dir=root / "media" if root is not None else self.cfg.media_dir,
                addressed=addressed,
                read_tool="read" in self.agent.tool_names(verdict.trust or "guest"),
                call=self.agent.gate.bind(verdict.trust or "guest", key),  # SPEC §9.5
            )
        except Exception:
            log.exception("attachments of %s/%s could not be prepared", msg.channel, msg.chat_id)
            return Prepared(text=msg.text or "", notes=["attachments could not be read"])

    async def _turn(self, inbound_id: int, msg: InboundMessage, key: str, verdict: Verdict) -> None:
        from bot.replies import parse_reply

        ch = self.channels.get(msg.channel)
        pol = self.policy(msg.channel)
        api = self._api_plan(msg, key, verdict) if msg.api else None  # SPEC §13
        if api is not None and api.error:
            await self._api_refusal(inbound_id, msg, key, api.error)
            return
        notes = await self._fetch_media(msg, verdict, key)
        pending = self.store.peek_group_history(key) if msg.chat_type == "group" else []
        was_mentioned = (
            (
                msg.mentioned
                or msg.reply_to_bot
                or bool(self._name_re and self._name_re.search(msg.text or ""))
            )
            if msg.chat_type == "group"
            else None
        )
        # images, voice notes and documents → model input (SPEC §11)
        prep = await self._prepare_media(msg, verdict, key, addressed=was_mentioned is not False)
        user_text = format_user_turn(
            dataclasses.replace(msg, text=prep.text) if prep.text != msg.text else msg,
            tz=zone(self.cfg),
            pending=pending,
            notes=notes + prep.notes,
            was_mentioned=was_mentioned,
        )
        req = self._turn_request(msg, key, prep.user_text(user_text), verdict, include_intro=True)
        req.media = prep.media
        if api is not None:
            api_turn.apply(req, api)
        typing = (
            asyncio.create_task(self._keep_typing(ch, msg))
            if ch and ch.capabilities.typing
            else None
        )
        if ch and pol and pol.reactions == "ack" and msg.message_id:
            with contextlib.suppress(Exception):
                await ch.react(msg.chat_id, msg.message_id, ACK_EMOJI)
        live = self._live_output(ch, pol, msg)
        try:
            result = await self.agent.run_turn(req, on_event=live.push if live else None)
        except BaseException:
            if isinstance(live, Preview):  # the apology replaces it
                await asyncio.shield(live.delete())
            raise
        finally:
            if typing:
                typing.cancel()
        plan = parse_reply(result.text)
        if self.cfg.media.tts_model:  # spoken replies (SPEC §11)
            from bot.media import speak_plan

            root = self.file_root(key, verdict)
            plan = await speak_plan(
                self.cfg,
                plan,
                file_root=root if root is not None else self.cfg.agent.workspace,
                out_dir=root / "media" if root is not None else self.cfg.media_dir / "tts",
                call=self.agent.gate.bind(req.trust, key, result.turn_id),  # SPEC §9.5
            )
        outs = self._plan_to_outbound(plan, msg, pol.reply_to_mode if pol else "off", req)
        for o in outs if result.error else ():  # told, marked (the HTTP API answers 502/429)
            o.error = getattr(result, "error_kind", None) or "model"
        api_reply = None
        if api is not None:  # usage, client tool calls, finish reason: one answer, always
            if not outs:
                outs = [OutboundMessage(chat_id=msg.chat_id, account=msg.account)]
            outs[0].api, api_reply = api_turn.answer(result, outs[0].text.strip())
        if isinstance(live, Preview):
            # the preview's last edit has landed; the reply (stored below, sent by the
            # outbox) is edited into it, or it is deleted (a silent reply)
            await live.settle(outs)
        elif live is not None:
            live.close()
        if pending:
            self.store.take_group_history(key)
        if req.extra_context and msg.chat_type == "group":
            self.store.mark_intro_done(key)
        # the turn and its reply are stored together (retried while the disk is full: the
        # model is not asked again), then the outbox sends the reply
        ids = await self._store_write(
            "storing a turn",
            lambda: self.store.commit_turn(
                key,
                result.turn_id,
                result.to_store,
                inbound_id=inbound_id,
                outbound=[out_json(o) for o in outs],
                usage=result.usage,
            ),
        )
        if api is not None and api.stateful:
            record = api_turn.remember(api, api_reply, self.store.session(key)["epoch"])
            self.store.put(api_turn.state_key(key), record)
        try:  # where heartbeats, cron jobs and approval requests reach the owner (never a guest)
            owner_route.record(
                self.store,
                msg,
                trust=verdict.trust,
                proactive=bool(ch and ch.capabilities.proactive),
            )
        except Exception as e:  # the turn is stored: never fail it (and answer twice) now
            log.warning("could not record the last route: %s", e)
        await send.deliver_stored(self.outbox, ids)

    def _api_plan(self, msg: InboundMessage, key: str, verdict: Verdict) -> api_turn.ApiTurn:
        """What an HTTP API request adds to its session (SPEC §13; bot.api_turn)."""
        stateless = bool(msg.api.get("stateless"))
        state = None if stateless else self.store.get(api_turn.state_key(key))
        plan = api_turn.plan(
            msg.api,
            state,
            epoch=self.store.session(key)["epoch"],
            own_tools=self.agent.tool_names(verdict.trust or "guest"),
            native_tools=self.cfg.agent.native_tools,
        )
        if plan.fork and not plan.error:
            log.info("http client rewrote its conversation: session %s starts afresh", key)
            self.store.reset_session(key)
        return plan

    async def _api_refusal(self, inbound_id: int, msg: InboundMessage, key: str, text: str):
        """Answer an API request that cannot run (HTTP 400); nothing reaches the model."""
        out = OutboundMessage(
            chat_id=msg.chat_id, text=text, account=msg.account, error="invalid_request"
        )
        await self._answer(inbound_id, key, [out], "storing an answer")

    def _plan_to_outbound(
        self,
        plan,
        msg: InboundMessage,
        reply_mode: Literal["off", "first", "all"],
        req: TurnRequest,
    ) -> list[OutboundMessage]:
        if plan.silent:
            return []
        roots = [req.file_root] if req.trust == "guest" and req.file_root else None
        return [
            build_outbound(
                self.cfg,
                self.channels.get(msg.channel),
                plan,
                chat_id=msg.chat_id,
                thread_id=msg.thread_id,
                trigger_id=msg.message_id,
                reply_mode=reply_mode,
                account=msg.account,
                roots=roots,
            )
        ]

    async def _keep_typing(self, ch: Channel, msg: InboundMessage) -> None:
        with contextlib.suppress(asyncio.CancelledError):
            while True:
                with contextlib.suppress(Exception):
                    # never cancel a platform call in flight: a cancelled HTTP request can
                    # leak a connection-pool slot (PTB's stock httpx request does;
                    # bench/typing_cancel_leak.py)
                    await asyncio.shield(
                        asyncio.ensure_future(ch.typing(msg.chat_id, msg.thread_id))
                    )
                await asyncio.sleep(TYPING_EVERY)

    async def _store_write(self, what: str, fn: Callable[[], T]) -> T:
        """Run a store write; while the disk is full, retry it with backoff (logged once) so
        the message is not lost and is answered once space is back.  Gives up (raises) only
        when the daemon stops."""
        delay = 1.0
        while True:
            try:
                result = fn()
            except Exception as e:
                if not storage_full(e) or not self.accepting:
                    raise
                self.outbox.storage.failed(e, what)
                await asyncio.sleep(delay)
                delay = min(delay * 2, STORE_RETRY_MAX)
                continue
            self.outbox.storage.ok()
            return result

    async def _retry_later(self, inbound_id: int, msg: InboundMessage, key: str) -> None:
        """Process a message again after a full disk stopped its turn."""
        delay = 1.0
        while self.accepting and self.outbox.storage.down:
            await asyncio.sleep(delay)
            delay = min(delay * 2, STORE_RETRY_MAX)
            with contextlib.suppress(Exception):
                self.store.put("storage:probe", time.time())
                self.outbox.storage.ok()
        if self.accepting:
            self._queue(key, inbound_id, lambda: self._process(inbound_id, msg, key, None))


def _apology(msg: InboundMessage) -> OutboundMessage:
    return OutboundMessage(
        chat_id=msg.chat_id,
        thread_id=msg.thread_id,
        text="Sorry, something went wrong on my side. Please try again.",
        account=msg.account,
    )


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
