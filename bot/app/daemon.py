"""The daemon's lifecycle: components from :mod:`bot.app.build`, entered in order over one
exit stack and left in reverse; one :class:`~bot.app.timeouts.Timeouts` table for every wait.

``Daemon(cfg)`` builds every component at once, top to bottom (:func:`bot.app.core.build`);
:meth:`Daemon.start` enters them in that order: the store, the prompt cache, MCP, the channels
(each given one first attempt), the outbox and the stored messages, the turns, cron."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import signal
import sys
import time
from collections.abc import Awaitable, Callable, Coroutine
from typing import TYPE_CHECKING, Any

from bot.app.channels import (
    SecretMissing,
    build_channel,
    channel_class,
    enabled_accounts,
    enabled_channels,
    labels,
)
from bot.app.startup import address_in_use, heartbeat_schedule, holder_hint, startup_lines
from bot.app.timeouts import DEFAULT, Timeouts
from bot.config import Config, ConfigError
from bot.reports.notices import Notices
from bot.schedule.notes import send_note
from bot.store.disk import disk_full
from channels.base import Channel, ChannelError, account_key, shown_state
from channels.retry import Backoff

if TYPE_CHECKING:
    from bot.agent.turn import Agent
    from bot.app.core import Components
    from bot.conversation.lanes import SessionLanes
    from bot.conversation.pipeline import Conversation
    from bot.delivery.outbox import Outbox
    from bot.mcp.client import McpManager
    from bot.schedule import Scheduled, ScheduleService
    from bot.store import Store

__all__ = [  # the channel helpers are imported from here by the CLI and tests
    "PAIRING_POLL",
    "Daemon",
    "PortInUse",
    "SecretMissing",
    "build_channel",
    "channel_class",
    "enabled_channels",
    "heartbeat_schedule",
    "startup_lines",
]

log = logging.getLogger("chela.daemon")

PAIRING_POLL = 2.0  # seconds between looks for approvals made by `chela pairing approve`


class PortInUse(ConfigError):
    """A channel's listen address is taken: fatal at start-up, never retried (the fix is
    another address in the config, or stopping the process that holds it)."""


class Daemon:
    store: Store
    lanes: SessionLanes
    channels: dict[str, Channel]
    outbox: Outbox
    agent: Agent
    mcp: McpManager | None
    conversation: Conversation
    scheduled: Scheduled
    cron: ScheduleService
    notices: Notices

    def __init__(
        self,
        cfg: Config,
        *,
        channels: dict[str, Channel] | None = None,
        scheduler: bool = True,
        receive: bool = True,
        timeouts: Timeouts = DEFAULT,
        config_check: Callable[[Config], Any] | None = None,
    ):
        """``receive=False`` is for one-shot commands next to a running daemon: channels are
        opened for sending only and stored messages are left to the daemon.  Raises
        ``StoreError``/``ConfigError`` when a component cannot be built."""
        self.cfg = cfg
        self.use_scheduler = scheduler
        self.receive = receive
        self.timeouts = timeouts
        self.built_channels = channels is not None
        self.states: dict[str, dict[str, str]] = {}  # channel -> its state and last error
        from bot.model import litellm_path
        from bot.model import litellm_needed

        if litellm_needed(cfg):  # an openai-compatible config never imports litellm
            litellm_path.start()  # in its own thread, while the core's modules are imported here
        from bot.app.core import build

        self._take(
            build(cfg, channels, channel_states=self.channel_states, config_check=config_check)
        )
        self.lifecycle: list[str] = []  # "start X" / "stop X", in the order they happened
        self.up: list[str] = []  # channels that started, in order
        self.on_change: Callable[[], None] = lambda: None  # the channels up or ready changed
        self.ready = False
        self._stop = asyncio.Event()
        self._now = asyncio.Event()  # a second signal while stopping: no more grace
        self._tasks: list[asyncio.Task] = []
        self._stack = contextlib.AsyncExitStack()
        self._fatal: BaseException | None = None

    def _take(self, parts: Components) -> None:
        self.store = parts.store
        self.lanes = parts.lanes
        self.channels = parts.channels  # keyed by account (channels.base.account_key)
        # one supervisor per account, named as logs and `chela status` show it
        self.labels = labels(self.channels)
        self.outbox = parts.outbox
        self.agent = parts.agent
        self.agents = parts.agents
        self.mcp = parts.mcp
        self.conversation = parts.conversation
        self.scheduled = parts.scheduled
        self.cron = parts.cron
        self.notices = parts.notices
        self.triggers = parts.triggers

    async def __aenter__(self) -> Daemon:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    # ---------------------------------------------------------------------- lifecycle
    def _enter(self, name: str, leave: Callable[[], Awaitable[object] | None]) -> None:
        """Record that ``name`` is up and push how it is left (run in reverse order)."""
        self.lifecycle.append(f"start {name}")

        async def left() -> None:
            self.lifecycle.append(f"stop {name}")
            try:
                result = leave()
                if result is not None:
                    await result
            except Exception as e:
                log.warning("stopping %s failed: %s", name, e)

        self._stack.push_async_callback(left)

    async def start(self) -> None:
        t0 = time.perf_counter()
        self._enter("store", self.store.close)
        for agent in self.agents.values():  # each agent's own
            self._enter("prompt cache", agent.cache.close)
            if agent.memory is not None and self.receive:  # its memory index, kept fresh
                agent.memory.start()
                self._enter("memory index", agent.memory.stop)
        if self.mcp is not None:
            self.mcp.start()  # connects in the background; start-up never waits for a server
            self._enter("mcp", self.mcp.stop)
        log.info(
            "starting agent=%s model=%s channels=%s",
            self.cfg.agent.id,
            self.cfg.agent.model,
            ", ".join(self.labels.values()) or "none",
        )
        if self.receive:
            await self._start_receiving()
        else:
            await self._start_sending_only()
        self._enter("turns", self._drain)
        if self.use_scheduler:
            self.cron.start()
            self._enter("cron", self.cron.shutdown)
        await self._wait_for_import()
        if self._stop.is_set():
            return
        self.ready = True
        self.on_change()
        log.info("ready in %.0f ms", (time.perf_counter() - t0) * 1000)

    async def _start_sending_only(self) -> None:
        for key, ch in self.channels.items():
            try:
                await ch.open_for_sending()
            except ChannelError as e:
                log.error("channel %s cannot send: %s", self.labels[key], e)
        self._enter("channels", self._stop_channels)
        # this process's own messages only: what the daemon left unsent is the daemon's
        self.outbox.start(recover=False)
        self._enter("outbox", self._stop_outbox)

    async def _start_receiving(self) -> None:
        started = self._start_channels(self.channels)
        self._enter("channels", self._stop_channels)
        await self._first_attempts(started)  # before recovering stored messages
        self.outbox.start(recover=True)  # what the last run left unsent goes first
        self._enter("outbox", self._stop_outbox)
        await self.conversation.recover()
        self.triggers.recover()  # webhook and mail events stored but not run yet
        if self.cfg.mail:
            self._spawn(self.triggers.watch_mail(), "mail")  # IMAP, one connection per account
        self._spawn(self._watch_pairing(), "pairing-approvals")
        self._spawn(self.conversation.outage.watch(), "outage")  # kept messages, the probe

    def _start_channels(self, channels: dict[str, Channel]) -> list[asyncio.Event]:
        """A supervisor per channel account; the events are set after each one's first
        attempt."""
        started: list[asyncio.Event] = []
        for key, ch in channels.items():
            ev = asyncio.Event()
            started.append(ev)
            name = self.labels[key]
            ch.watch_state(functools.partial(self._own_state, key))
            self._spawn(self._supervise(name, ch, ev), f"channel:{name}")
        return started

    def _own_state(self, key: str, state: str, owner_must_act: bool) -> None:
        """A channel told a state of its own (``Channel.tell_state``): published at once;
        a stop the owner must act on marks the channel failed and tells the owner on
        another channel (once: the adapter tells a stop once)."""
        name = self.labels[key]
        if not owner_must_act:
            shown = shown_state(state or "connected")
            self.notices.publish("channel.state", {"id": name, "state": shown})
            return
        self._set_state(name, "failed", state)
        others = {k: ch for k, ch in self.channels.items() if k != key}
        text = f"Channel {name} stopped and needs you: {state}"
        self._spawn(self._tell_owner(others, text), f"note:{name}")

    async def _tell_owner(self, channels: dict[str, Channel], text: str) -> None:
        try:
            await send_note(self.cfg, self.store, self.outbox, channels, text)
        except Exception:
            log.exception("telling the owner failed: %s", text)

    async def _first_attempts(self, started: list[asyncio.Event]) -> None:
        """Give every channel one attempt (bounded by ``start_wait``; a stop ends the wait);
        raises what was fatal (a listen address taken)."""
        if started:
            tried: asyncio.Future[Any] = asyncio.gather(*(e.wait() for e in started))
            stopping: asyncio.Future[Any] = asyncio.ensure_future(self._stop.wait())
            wait = self.timeouts.start_wait
            await asyncio.wait({tried, stopping}, timeout=wait, return_when="FIRST_COMPLETED")
            tried.cancel()
            stopping.cancel()
        if self._fatal is not None:
            raise self._fatal

    def _spawn(self, coro: Coroutine[Any, Any, None], name: str) -> None:
        self._tasks.append(asyncio.create_task(coro, name=name))

    async def _wait_for_import(self) -> None:
        """ "ready" means a message is answered now: the channels already poll and store what
        arrives, and litellm's import (begun in its own thread as the daemon was built) has to
        finish before a model call.  Waiting here rather than in the first turn is what makes
        the first reply after "ready" take one model call."""
        from bot.model import litellm_path
        from bot.model import litellm_needed

        if not litellm_needed(self.cfg):
            return
        wait = self.timeouts.import_wait
        imported = asyncio.ensure_future(litellm_path.litellm())
        stopping = asyncio.ensure_future(self._stop.wait())  # SIGTERM meanwhile: stop now
        await asyncio.wait({imported, stopping}, timeout=wait, return_when="FIRST_COMPLETED")
        stopping.cancel()
        if not imported.done():
            imported.cancel()
            if not self._stop.is_set():
                log.warning("litellm is still importing after %.0fs; turns wait for it", wait)
        elif (failure := imported.exception()) is not None:
            log.error("litellm failed to import: %s: %s", type(failure).__name__, failure)

    async def _start_once(self, name: str, ch: Channel, delay: float) -> bool:
        """One attempt; True when the channel is up (a failure is logged with the wait
        before the next, ``delay``).  A taken address stops the daemon."""
        try:
            await ch.start(self.conversation.on_inbound)
        except asyncio.CancelledError:
            raise
        except Exception as e:
            self._set_state(name, "retrying", str(e))
            if address_in_use(e):
                self._fatal = PortInUse(f"channel {name} cannot start: {e}{holder_hint(ch)}")
                log.error("%s", self._fatal)
                self._stop.set()
            elif isinstance(e, ChannelError):
                log.error("channel %s failed to start: %s; retrying in %.0fs", name, e, delay)
            else:
                log.exception("channel %s failed to start: %s; retrying in %.0fs", name, e, delay)
            return False
        log.info("channel %s started", name)
        self._set_state(name, "connected")
        if name not in self.up:
            self.up.append(name)
        self.on_change()
        return True

    async def _supervise(self, name: str, ch: Channel, started: asyncio.Event) -> None:
        """Start the channel, retrying with backoff; restart it if it later dies on its own."""
        backoff = Backoff(1.0, self.timeouts.retry_max)
        while not self._stop.is_set():
            if await self._start_once(name, ch, backoff.peek()):
                started.set()
                up_since = time.monotonic()
                err = await ch.wait_closed()
                if self._stop.is_set():
                    return
                if time.monotonic() - up_since > self.timeouts.retry_max:
                    backoff.reset()  # it ran for a while: not a crash loop
                reason = f"{type(err).__name__}: {err}" if err is not None else "closed"
                log.error(
                    "channel %s stopped unexpectedly (%s); restarting in %.0fs",
                    name,
                    reason,
                    backoff.peek(),
                )
                await self._stop_one(name, ch)
                self._set_state(name, "retrying", reason)
            started.set()  # do not hold up start-up for a broken channel
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stop.wait(), backoff.next())

    async def _watch_pairing(self) -> None:
        """Act on pairing approvals made with ``chela pairing approve`` (another process):
        tell the sender and answer the message that asked."""
        while not self._stop.is_set():
            try:
                for channel, sender in self.store.take_new_approvals():
                    if not await self.conversation.pairing_approved(channel, sender):
                        log.info(
                            "pairing approved channel=%s sender=%s (no held message to answer)",
                            channel,
                            sender,
                        )
            except Exception as e:
                if not disk_full(e):  # a full disk is said once, by the store's alarm
                    log.exception("pairing approvals check failed")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stop.wait(), PAIRING_POLL)

    def _set_state(self, name: str, state: str, error: str = "") -> None:
        """Record a channel's state and publish ``channel.state`` when it changed."""
        before = self.states.get(name, {}).get("state")
        self.states[name] = {"state": state, "error": error}
        if state != before:
            self.notices.publish("channel.state", {"id": name, "state": state})

    def channel_states(self) -> dict[str, dict[str, str]]:
        """Each channel's state for the Control UI: starting, connected,
        retrying or stopped, with its last error."""
        idle = {"state": "starting", "error": ""}
        out = {name: self.states.get(name, idle) for name in self.labels.values()}
        for key, ch in self.channels.items():
            name, own = self.labels[key], ch.own_state()
            if own and out[name]["state"] == "connected":
                out[name] = {"state": own.split(":")[0], "error": own}
        return out

    def request_stop(self) -> None:
        self._stop.set()

    def _on_signal(self) -> None:
        """SIGTERM/SIGINT: the first stops with grace (turns in progress may finish, sends
        in flight too); a second one while stopping ends the grace at once."""
        if self._stop.is_set():
            self._now.set()
        else:
            self.request_stop()

    async def run(self) -> int:
        """``chela run``: hold the state-dir lock (raises ``bot.app.lock.LockHeld``), start,
        wait for SIGTERM/SIGINT, stop.  Raises ``PortInUse`` when a listen address is taken."""
        from bot.app.lock import StateLock

        cfg = self.cfg
        lock = StateLock(cfg.agent.state_dir)
        lock.acquire()
        try:
            loop = asyncio.get_running_loop()
            for sig in (signal.SIGTERM, signal.SIGINT):
                with contextlib.suppress(NotImplementedError):
                    loop.add_signal_handler(sig, self._on_signal)
            keys = self.channels if self.built_channels else self._configured(cfg)
            names = list(labels(keys).values())
            for line in startup_lines(cfg, names):
                (log.warning if line.startswith("no config file") else log.info)(line)
            started = time.time()
            self.on_change = lambda: lock.update(**self._lock_info(started))
            self.on_change()
            try:
                await self.start()
                await self._stop.wait()
            finally:
                await self.stop()
        finally:
            lock.release()
        return 0

    @staticmethod
    def _configured(cfg: Config) -> list[str]:
        """The adapter keys of every enabled channel account."""
        return [account_key(name, account) for name, account in enabled_accounts(cfg)]

    def _lock_info(self, started: float) -> dict:
        """What ``chela status`` reads: the channels up now, and whether start-up is over."""
        return {
            "started": started,
            "ready": self.ready,
            "config": str(self.cfg.source or ""),
            "channels": list(self.up),
            "http": self.cfg.channels.http.listen if "http" in self.up else "",
            "heartbeat_every": self.cfg.heartbeat.every_seconds,
        }

    async def stop(self) -> None:
        """Stop taking turns, then leave every component in the reverse of its start order."""
        self._stop.set()
        self.conversation.stop_accepting()
        pdf = sys.modules.get("bot.media.pdf")  # no document read without it
        if pdf is not None and (killed := pdf.stop_all()):  # bounded work never delays shutdown
            log.info("stopping: %d document read(s) cut short", killed)
        await self._stack.aclose()
        log.info("stopped")

    async def _drain(self) -> None:
        wait = self.timeouts.drain
        log.info(
            "stopping: no new turns; waiting up to %.0fs for turns in progress "
            "(Ctrl-C again stops now)",
            wait,
        )
        drained = asyncio.ensure_future(self.lanes.drain(wait))
        if await self._cut_short(drained):
            log.warning(
                "stopping now: turns in progress cut short: %d; their messages stay stored "
                "and are answered after restart",
                self.lanes.running(),
            )
            await self.lanes.drain(0)
        if not await drained and not self._now.is_set():
            log.warning(
                "some turns did not finish; their messages stay stored and are answered after restart"
            )

    async def _stop_outbox(self) -> None:  # sends in flight finish; unsent rows stay stored
        stopped = asyncio.ensure_future(self.outbox.stop(grace=self.timeouts.outbox_grace))
        if await self._cut_short(stopped):
            log.warning("stopping now: replies not sent yet stay stored and are sent after restart")
            await self.outbox.stop(grace=0)
        await stopped

    async def _cut_short(self, graceful: asyncio.Future) -> bool:
        """Wait for ``graceful`` or a second signal, whichever comes first: True when the
        signal came (or had come) first and ``graceful`` is still going."""
        now = asyncio.ensure_future(self._now.wait())
        try:
            await asyncio.wait((graceful, now), return_when=asyncio.FIRST_COMPLETED)
        finally:
            now.cancel()
        return not graceful.done()

    async def _stop_channels(self) -> None:
        """Every channel at once, each bounded by ``timeouts.channel_stop``."""
        for t in self._tasks:
            t.cancel()
        await asyncio.gather(
            *(self._stop_one(self.labels[k], ch) for k, ch in self.channels.items())
        )

    async def _stop_one(self, name: str, ch: Channel) -> None:
        self._set_state(name, "stopped")
        try:
            await asyncio.wait_for(ch.stop(), self.timeouts.channel_stop)
        except asyncio.CancelledError:
            raise
        except Exception as e:
            log.warning("channel %s did not stop cleanly: %s", name, e or type(e).__name__)
