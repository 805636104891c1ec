"""Inbound messages → access policy, group gating, commands, turns, delivery.

``Router.on_inbound`` is the sink every channel adapter calls.  It stores the message
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
from datetime import datetime
from typing import Any

from bot import pairing
from bot.agent.turn import Agent, TurnRequest, format_user_turn, zone
from bot.config import ChannelPolicy, Config
from bot.sessions import SessionLanes, session_key_for
from bot.store import Store
from channels.base import Capabilities, Channel, ChannelError, InboundMessage, MediaItem, OutboundMessage

log = logging.getLogger("chela.router")

TYPING_EVERY = 4.0
ACK_EMOJI = "👀"
DELIVERY_ATTEMPTS = 3

HELP_TEXT = """Commands:
/new or /reset: start a fresh conversation
/status: model, session and usage
/context [list|detail|json]: what the system prompt is made of
/activation mention|always: in a group, answer only when mentioned, or to everything (owner only)
/help: this list"""


def _sender_matches(entries: list[str], msg: InboundMessage) -> bool:
    ids = {msg.sender_id}
    if msg.sender_username:
        ids |= {"@" + msg.sender_username.lower(), msg.sender_username.lower()}
    return any(e.lower() in ids or e in ids for e in entries)


class Router:
    def __init__(self, cfg: Config, store: Store, agent: Agent, lanes: SessionLanes,
                 channels: dict[str, Channel]):
        self.cfg = cfg
        self.store = store
        self.agent = agent
        self.lanes = lanes
        self.channels = channels
        self._name_re = re.compile(rf"(?<!\w){re.escape(cfg.agent.name)}(?!\w)", re.IGNORECASE) if cfg.agent.name else None
        self.accepting = True

    # ------------------------------------------------------------------------- policy
    def policy(self, channel: str) -> ChannelPolicy | None:
        """The DM/group policy section of a channel; None for channels without one
        (terminal, and HTTP whose callers authenticate with a token)."""
        pol = getattr(self.cfg.channels, channel, None)
        return pol if isinstance(pol, ChannelPolicy) else None

    def channel_traits(self, channel: str) -> tuple[tuple[str, ...], str]:
        """What the prompt needs to know about a channel: capability names and reactions mode."""
        ch = self.channels.get(channel)
        pol = self.policy(channel)
        return (tuple(ch.capabilities.names()) if ch else ()), (pol.reactions if pol else "off")

    def session_key(self, msg: InboundMessage) -> str:
        return session_key_for(self.cfg.agent.id, self.cfg.session.dm_scope, msg)

    def is_owner(self, msg: InboundMessage) -> bool:
        pol = self.policy(msg.channel)
        if pol is None:
            return True  # terminal and authenticated HTTP callers are the owner
        return _sender_matches(pol.allow_from, msg) or msg.sender_id in self.cfg.owner.numbers

    # ------------------------------------------------------------------------ intake
    async def on_inbound(self, msg: InboundMessage) -> None:
        """The sink: persist, then queue.  Returns once the message is stored."""
        if msg.sender_is_bot:
            return
        key = self.session_key(msg)
        message_id = msg.message_id or msg.raw_id or f"t{time.time_ns()}"
        inbound_id = self.store.add_inbound(msg.channel, msg.account, msg.chat_id, message_id, key, msg.to_json())
        if inbound_id is None:
            log.info("duplicate message ignored channel=%s chat=%s id=%s", msg.channel, msg.chat_id, message_id)
            return
        if not self.accepting:
            return  # stored; processed after restart
        self.lanes.submit(key, lambda: self._process(inbound_id, msg, key))

    async def recover(self) -> int:
        """Queue stored messages that were never answered (crash or restart)."""
        rows = self.store.unfinished_inbound()
        for row in rows:
            msg = InboundMessage.from_json(row.payload)
            if row.status == "delivering" and row.outbound:
                self.lanes.submit(row.session_key, lambda r=row, m=msg: self._deliver_stored(r.id, m, r.outbound))
            else:
                self.lanes.submit(row.session_key, lambda r=row, m=msg: self._process(r.id, m, r.session_key))
        if rows:
            log.info("recovering %d unanswered message(s)", len(rows))
        return len(rows)

    # --------------------------------------------------------------------- processing
    async def _process(self, inbound_id: int, msg: InboundMessage, key: str) -> None:
        started = time.perf_counter()
        try:
            verdict = await self._admit(msg)
            if verdict != "serve":
                self.store.set_inbound_status(inbound_id, "skipped")
                log.info("not served channel=%s session=%s reason=%s", msg.channel, key, verdict)
                return
            text = (msg.text or "").strip()
            if text.startswith("/"):
                reply = await self._command(msg, key, text)
                if reply is not None:
                    out = OutboundMessage(chat_id=msg.chat_id, text=reply, thread_id=msg.thread_id, account=msg.account)
                    self.store.commit_turn(key, "", [], inbound_id=inbound_id, outbound=[_out_json(out)])
                    await self._deliver_stored(inbound_id, msg, [_out_json(out)])
                    return
            if msg.chat_type == "group" and not self._addressed(msg, key):
                ch = self.channels.get(msg.channel)
                cap = (ch.capabilities if ch else Capabilities()).group_history
                label = msg.sender_name or msg.sender_username or msg.sender_id
                self.store.add_group_history(key, label, msg.text or "", msg.timestamp or time.time(), cap)
                self.store.set_inbound_status(inbound_id, "history")
                return
            await self._turn(inbound_id, msg, key)
            log.info("turn done channel=%s session=%s ms=%.0f", msg.channel, key, (time.perf_counter() - started) * 1000)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("turn failed channel=%s session=%s", msg.channel, key)
            self.store.set_inbound_status(inbound_id, "failed")
            with contextlib.suppress(Exception):
                await self._send(msg.channel, OutboundMessage(chat_id=msg.chat_id, thread_id=msg.thread_id,
                                                              text="Sorry, something went wrong on my side. Please try again.",
                                                              account=msg.account))
        finally:
            ch = self.channels.get(msg.channel)
            if ch is not None:
                with contextlib.suppress(Exception):
                    await ch.turn_done(msg.chat_id, msg.message_id)

    async def _admit(self, msg: InboundMessage) -> str:
        pol = self.policy(msg.channel)
        if pol is None:
            return "serve"
        if msg.chat_type == "group":
            if pol.group_policy == "disabled":
                return "groups disabled"
            if pol.group_policy == "allowlist" and "*" not in pol.groups and msg.chat_id not in pol.groups:
                return "group not allowlisted"
            return "serve"
        if _sender_matches(pol.allow_from, msg):
            return "serve"
        if pol.dm_policy == "disabled":
            return "dms disabled"
        if pol.dm_policy == "open":
            return "serve"
        if self.store.is_approved(msg.channel, msg.sender_id):
            return "serve"
        if pol.dm_policy == "pairing":
            text = pairing.request_pairing(self.store, msg.channel, msg.sender_id, msg.sender_name)
            if text:
                with contextlib.suppress(Exception):
                    await self._send(msg.channel, OutboundMessage(chat_id=msg.chat_id, text=text, account=msg.account))
            return "unknown sender (pairing)"
        return "sender not allowlisted"

    def _activation(self, msg: InboundMessage, key: str) -> str:
        act = self.store.session(key)["activation"]
        if act:
            return act
        pol = self.policy(msg.channel)
        return "mention" if (pol is None or pol.require_mention) else "always"

    def _addressed(self, msg: InboundMessage, key: str) -> bool:
        if self._activation(msg, key) == "always":
            return True
        if msg.mentioned or msg.reply_to_bot:
            return True
        return bool(self._name_re and self._name_re.search(msg.text or ""))

    # ----------------------------------------------------------------------- commands
    async def _command(self, msg: InboundMessage, key: str, text: str) -> str | None:
        first, _, rest = text.partition(" ")
        name = first[1:].split("@", 1)[0].lower()
        arg = rest.strip().lower()
        if name in ("new", "reset"):
            self.store.reset_session(key)
            return "Started a fresh conversation."
        if name == "help":
            return HELP_TEXT
        if name == "status":
            s = self.store.session(key)
            now = datetime.now(zone(self.cfg)).strftime("%Y-%m-%d %H:%M %Z")
            return (f"Model: {self.cfg.agent.model}\nSession: {key}\nMessages: {self.store.message_count(key)}\n"
                    f"Tokens: {s['usage_in']} in / {s['usage_out']} out\nTime: {now}")
        if name == "context":
            from bot.prompt.report import context_report

            kind = arg if arg in ("list", "detail", "json") else "list"
            req = self._turn_request(msg, key, "", include_intro=False)
            ctx = self.agent.prompt_context(req)
            return context_report(self.agent.cache.get(ctx), ctx, kind)
        if name == "activation":
            if msg.chat_type != "group":
                return "/activation only applies in group chats."
            if not self.is_owner(msg):
                return "Only the owner can change activation."
            if arg not in ("mention", "always"):
                return "Usage: /activation mention|always"
            self.store.set_activation(key, arg)
            return ("I'll answer here only when mentioned." if arg == "mention"
                    else "I'll read everything here and answer when it's useful.")
        return None  # not ours: an ordinary message that starts with "/"

    # --------------------------------------------------------------------------- turns
    def _turn_request(self, msg: InboundMessage, key: str, user_text: str, *, include_intro: bool) -> TurnRequest:
        from bot.prompt.delivery import delivery_instructions
        from bot.prompt.group import group_chat_context

        caps, reactions = self.channel_traits(msg.channel)
        extra = ""
        if msg.chat_type == "group":
            sess = self.store.session(key)
            extra = group_chat_context(msg.channel, msg.chat_title or msg.chat_id,
                                       [], self._activation(msg, key),
                                       include_activation=include_intro and not sess["intro_done"])
        return TurnRequest(
            session_key=key, user_text=user_text, channel=msg.channel, account=msg.account,
            chat_type=msg.chat_type, group_id=msg.chat_id if msg.chat_type == "group" else "",
            group_title=msg.chat_title if msg.chat_type == "group" else "", extra_context=extra,
            capabilities=caps, reactions=reactions,
            after_user_system=delivery_instructions(msg.channel),
            route={"channel": msg.channel, "chat_id": msg.chat_id, "account": msg.account, "thread_id": msg.thread_id},
            message_text=msg.text,
        )

    async def _turn(self, inbound_id: int, msg: InboundMessage, key: str) -> None:
        from bot.replies import parse_reply

        ch = self.channels.get(msg.channel)
        pol = self.policy(msg.channel)
        pending = self.store.peek_group_history(key) if msg.chat_type == "group" else []
        user_text = format_user_turn(msg, tz=zone(self.cfg), pending=pending,
                                     was_mentioned=True if msg.chat_type == "group" else None)
        req = self._turn_request(msg, key, user_text, include_intro=True)
        typing = asyncio.create_task(self._keep_typing(ch, msg)) if ch and ch.capabilities.typing else None
        if ch and pol and pol.reactions == "ack" and msg.message_id:
            with contextlib.suppress(Exception):
                await ch.react(msg.chat_id, msg.message_id, ACK_EMOJI)
        try:
            result = await self.agent.run_turn(req)
        finally:
            if typing:
                typing.cancel()
        plan = parse_reply(result.text)
        outs = self._plan_to_outbound(plan, msg, pol.reply_to_mode if pol else "off")
        if pending:
            self.store.take_group_history(key)
        if req.extra_context and msg.chat_type == "group":
            self.store.mark_intro_done(key)
        self.store.commit_turn(key, result.turn_id, result.to_store, inbound_id=inbound_id,
                               outbound=[_out_json(o) for o in outs], usage=result.usage)
        if msg.chat_type == "direct" and ch is not None and ch.capabilities.proactive:
            # where heartbeats and cron jobs with target "last" / "<channel>" deliver
            route = {"channel": msg.channel, "chat_id": msg.chat_id, "account": msg.account,
                     "thread_id": msg.thread_id, "at": time.time()}
            self.store.put("route:last", route)
            self.store.put(f"route:last:{msg.channel}", route)
        if outs:
            await self._deliver_stored(inbound_id, msg, [_out_json(o) for o in outs])

    def _plan_to_outbound(self, plan, msg: InboundMessage, reply_mode: str) -> list[OutboundMessage]:
        if plan.silent:
            return []
        return [build_outbound(self.cfg, self.channels.get(msg.channel), plan, chat_id=msg.chat_id,
                               thread_id=msg.thread_id, trigger_id=msg.message_id, reply_mode=reply_mode,
                               account=msg.account)]

    async def _keep_typing(self, ch: Channel, msg: InboundMessage) -> None:
        with contextlib.suppress(asyncio.CancelledError):
            while True:
                with contextlib.suppress(Exception):
                    # never cancel a platform call in flight: a cancelled HTTP request can
                    # leak a connection-pool slot (PTB's stock httpx request does;
                    # bench/typing_cancel_leak.py)
                    await asyncio.shield(asyncio.ensure_future(ch.typing(msg.chat_id, msg.thread_id)))
                await asyncio.sleep(TYPING_EVERY)

    # ------------------------------------------------------------------------ delivery
    async def _deliver_stored(self, inbound_id: int, msg: InboundMessage, outs: list[dict]) -> None:
        ok = True
        for o in outs:
            ok = await self.deliver(msg.channel, _out_from_json(o)) and ok
        if ok:
            self.store.set_inbound_status(inbound_id, "done")

    async def deliver(self, channel: str, out: OutboundMessage) -> bool:
        """Send with bounded retries on channel errors; False when it never got through
        (the reply stays stored as 'delivering' and is retried after a restart)."""
        delay = 1.0
        for attempt in range(1, DELIVERY_ATTEMPTS + 1):
            try:
                await self._send(channel, out)
                return True
            except ChannelError as e:
                log.warning("delivery failed channel=%s chat=%s attempt=%d: %s", channel, out.chat_id, attempt, e)
            except Exception:
                log.exception("delivery error channel=%s chat=%s attempt=%d", channel, out.chat_id, attempt)
            if attempt < DELIVERY_ATTEMPTS:
                await asyncio.sleep(delay)
                delay *= 2
        return False

    async def _send(self, channel: str, out: OutboundMessage) -> list[str]:
        ch = self.channels.get(channel)
        if ch is None:
            raise ChannelError(f"channel {channel!r} is not running")
        return await ch.send(out)


def build_outbound(cfg: Config, ch: Channel | None, plan, *, chat_id: str, thread_id: str | None = None,
                   trigger_id: str = "", reply_mode: str = "off", account: str = "default") -> OutboundMessage:
    """A reply plan → one OutboundMessage: reply threading resolved, media checked against
    the workspace, and media the channel cannot carry turned into text."""
    from bot.replies import resolve_media

    media, notes = resolve_media(plan.media, [cfg.agent.workspace, cfg.media_dir])
    text = plan.text
    if notes:
        text = "\n".join([text, *notes]).strip()
    if ch is not None and not ch.capabilities.media and media:
        links = [f"{m.kind.title()}: {m.target}" if m.is_url else f"[attachment: {m.name or m.target}]" for m in media]
        text = "\n".join([text, *links]).strip()
        media = []
    reply_to = None
    if plan.reply_to == "current":
        reply_to = trigger_id or None
    elif plan.reply_to:
        reply_to = plan.reply_to
    elif reply_mode in ("first", "all") and trigger_id:
        reply_to = trigger_id
    return OutboundMessage(chat_id=chat_id, text=text, thread_id=thread_id, reply_to_id=reply_to,
                           reply_mode=reply_mode if reply_mode != "off" else "first", media=media,
                           audio_as_voice=plan.audio_as_voice, account=account)


def _out_json(o: OutboundMessage) -> dict[str, Any]:
    return dataclasses.asdict(o)


def _out_from_json(d: dict) -> OutboundMessage:
    d = dict(d)
    d["media"] = [MediaItem(**m) for m in d.get("media", [])]
    return OutboundMessage(**d)
