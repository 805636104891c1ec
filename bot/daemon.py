"""Wiring and lifecycle: config → store, channels, outbox, approvals, agent, router, scheduler."""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import logging
import signal
import time
from typing import TYPE_CHECKING, Any

from bot import owner_route
from bot.agent.turn import Agent
from bot.approvals import Approvals
from bot.config import Config
from bot.delivery import send
from bot.delivery.outbox import Outbox
from bot.heartbeat import CronService, Scheduled
from bot.media import pdf
from bot.router import Router
from bot.sessions import SessionLanes
from bot.store import Store, StoreError
from channels.base import Channel, ChannelError

log = logging.getLogger("chela.daemon")

SHUTDOWN_GRACE = 10.0
PAIRING_POLL = 2.0  # seconds between looks for approvals made by `chela pairing approve`
RETRY_MAX = 60.0
IMPORT_WAIT = 30.0  # seconds "ready" waits for litellm's import before it is logged anyway


if TYPE_CHECKING:
    from bot.mcp import McpManager


class SecretMissing(Exception):
    pass


def channel_class(name: str) -> type[Channel]:
    """The adapter class of a channel id (imported on demand: platform SDKs are heavy)."""
    from bot.channel_specs import SPECS, TERMINAL_ADAPTER

    if name == "terminal":
        module, _, attr = TERMINAL_ADAPTER.partition(":")
        cls: type[Channel] = getattr(importlib.import_module(module), attr)
        return cls
    return SPECS[name].adapter_class()


def build_channel(cfg: Config, name: str) -> Channel:
    """One adapter from its config section.  Raises ``SecretMissing`` naming the env var."""
    from bot.channel_specs import SPECS

    spec = SPECS.get(name)
    if spec is None:
        raise ValueError(f"channel {name} is not built from the config")
    secret: dict[str, str] = {}
    for key, env in spec.secrets(cfg).items():
        secret[key] = cfg.secret(env)
        if not secret[key]:
            raise SecretMissing(
                f"channels.{name}.{key}: environment variable {env or '(unset)'} is empty"
            )
    # each adapter takes its own keyword arguments; the base class declares none of them
    cls: Any = spec.adapter_class()
    return cls(**spec.kwargs(cfg, spec.section(cfg), secret, cfg.media_dir))


def enabled_channels(cfg: Config) -> list[str]:
    from bot.channel_specs import SPECS

    return [name for name, spec in SPECS.items() if spec.section(cfg).enabled]


def heartbeat_schedule(cfg: Config) -> str:
    hb = cfg.heartbeat
    if hb.every_seconds <= 0:
        return "off"
    out = f"every {hb.every}, target {hb.target}"
    if hb.active_hours:
        out += f", active {hb.active_hours.start}-{hb.active_hours.end}"
    return out


def startup_lines(cfg: Config, channels: list[str]) -> list[str]:
    """What ``chela run`` says first: where everything is and what will run."""
    lines = [
        f"config file: {cfg.source}"
        if cfg.source
        else "no config file found (looked at --config, $CHELA_CONFIG, ./config.toml, ~/.chela/config.toml): "
        "running on defaults; create one with `chela onboard`",
        f"workspace: {cfg.agent.workspace}",
        f"state dir: {cfg.agent.state_dir}",
        f"channels: {', '.join(channels) or 'none'}",
        f"heartbeat: {heartbeat_schedule(cfg)}",
    ]
    h = cfg.channels.http
    lines.append(
        f"HTTP API: http://{h.listen}/v1/chat/completions" if h.enabled else "HTTP API: off"
    )
    return lines


class Daemon:
    def __init__(
        self,
        cfg: Config,
        *,
        channels: dict[str, Channel] | None = None,
        scheduler: bool = True,
        receive: bool = True,
    ):
        """``receive=False`` is for one-shot commands next to a running daemon: channels are
        opened for sending only and stored messages are left to the daemon."""
        self.cfg = cfg
        self._given_channels = channels
        self.use_scheduler = scheduler
        self.receive = receive
        self.channels: dict[str, Channel] = {}
        self._supervisors: list[asyncio.Task] = []
        self._started: dict[str, asyncio.Event] = {}
        self._stop = asyncio.Event()
        # built by start(); None until then so stop() is safe at any point
        self.store: Store | None = None
        self.lanes: SessionLanes | None = None
        self.outbox: Outbox | None = None
        self.agent: Agent | None = None
        self.router: Router | None = None
        self.scheduled: Scheduled | None = None
        self.cron: CronService | None = None
        self.mcp: McpManager | None = None  # when [[mcp.servers]] are configured

    # -------------------------------------------------------------------------- build
    def _build(self) -> None:
        from bot.private import private_dir
        from bot.prompt.hooks import load_plugins
        from bot.prompt.init import init_workspace

        cfg = self.cfg
        ws = cfg.agent.workspace
        try:
            if not ws.exists():
                created = init_workspace(ws)
                log.info("created workspace %s with %d starter file(s)", ws, len(created))
            private_dir(cfg.agent.state_dir)
            private_dir(cfg.media_dir)
        except OSError as e:
            where = e.filename or cfg.agent.state_dir
            raise StoreError(
                f"cannot create or use {where}: {e.strerror or e}. agent.workspace and "
                "agent.state_dir must be directories Chela can write"
            ) from None
        self.store = Store(cfg.db_path)
        self.lanes = SessionLanes(cfg.session.max_concurrent_turns)
        hooks = load_plugins([p.module for p in cfg.plugins]) if cfg.plugins else None
        if cfg.channels.http.enabled and self._given_channels is None:
            from bot.http_token import ensure_http_token

            ensure_http_token(
                cfg
            )  # before the agent reads the secrets it scrubs; ConfigError stops start()
        self.channels = self._channels()
        # everything that sends goes through the outbox: built before any of them
        self.outbox = Outbox(self.store, self.channels, max_age=cfg.delivery.max_age_seconds)
        approvals = self._approvals(self.store, self.outbox)
        self.agent = Agent(
            cfg,
            self.store,
            hooks=hooks,
            send_message=send.message_tool(self.outbox),
            approvals=approvals,
        )
        if cfg.mcp.servers:
            from bot.mcp import McpManager, default_log_dir

            self.mcp = McpManager(
                cfg.mcp.servers, log_dir=default_log_dir(cfg), on_change=self.agent.refresh_tools
            )
            self.agent.mcp = self.mcp
        self.router = Router(
            cfg, self.store, self.agent, self.lanes, self.channels, self.outbox, approvals=approvals
        )
        self.scheduled = Scheduled(
            cfg, self.store, self.agent, self.lanes, self.outbox, self.channels
        )
        self.cron = CronService(cfg, self.store, self.scheduled)
        if "cron" in cfg.tools.enabled:
            self.agent.cron_api = self.cron

    def _channels(self) -> dict[str, Channel]:
        if self._given_channels is not None:
            return dict(self._given_channels)
        built: dict[str, Channel] = {}
        for name in enabled_channels(self.cfg):
            try:
                built[name] = build_channel(self.cfg, name)
            except SecretMissing as e:
                log.error("channel %s not started: %s", name, e)
        return built

    def _approvals(self, store: Store, outbox: Outbox) -> Approvals | None:
        """Exec security "ask": held commands wait for the owner, asked in a direct chat."""
        if self.cfg.tools.exec.security != "ask":
            return None
        channels = self.channels
        return Approvals(
            send.notifier(outbox, kind="approval"),
            lambda route, trust: owner_route.ask_route(store, self.cfg, channels, route, trust),
        )

    # ---------------------------------------------------------------------- lifecycle
    async def start(self) -> None:
        t0 = time.perf_counter()
        from bot.agent import preload

        preload.start()  # no-op when the CLI already started it before reading the config
        self._build()
        assert self.router is not None and self.cron is not None and self.outbox is not None
        if self.mcp is not None:
            self.mcp.start()  # connects in the background; start-up never waits for a server
        names = ", ".join(self.channels) or "none"
        log.info(
            "starting agent=%s model=%s channels=%s", self.cfg.agent.id, self.cfg.agent.model, names
        )
        if not self.receive:
            for name, ch in self.channels.items():
                try:
                    await ch.open_for_sending()
                except ChannelError as e:
                    log.error("channel %s cannot send: %s", name, e)
            # this process's own messages only: what the daemon left unsent is the daemon's
            self.outbox.start(recover=False)
        else:
            for name, ch in self.channels.items():
                ev = asyncio.Event()
                self._started[name] = ev
                self._supervisors.append(
                    asyncio.create_task(self._supervise(name, ch, ev), name=f"channel:{name}")
                )
            # give every channel one attempt before recovering stored messages
            if self._started:
                await asyncio.wait(
                    [asyncio.create_task(e.wait()) for e in self._started.values()], timeout=15
                )
            self.outbox.start(recover=True)  # what the last run left unsent goes first
            await self.router.recover()
            self._supervisors.append(
                asyncio.create_task(self._watch_pairing(), name="pairing-approvals")
            )
        if self.use_scheduler:
            self.cron.start()
        # "ready" means a message is answered now: the channels already poll and store what
        # arrives, and litellm's import (begun before the config was read) has to finish before a
        # model call.  Waiting here rather than in the first turn is what makes the first reply
        # after "ready" take one model call.
        imported = asyncio.ensure_future(preload.litellm())
        stopping = asyncio.ensure_future(self._stop.wait())  # SIGTERM meanwhile: stop now
        await asyncio.wait({imported, stopping}, timeout=IMPORT_WAIT, return_when="FIRST_COMPLETED")
        stopping.cancel()
        if not imported.done():
            imported.cancel()
            if not self._stop.is_set():
                log.warning(
                    "litellm is still importing after %.0fs; turns wait for it", IMPORT_WAIT
                )
        elif (failure := imported.exception()) is not None:
            log.error("litellm failed to import: %s: %s", type(failure).__name__, failure)
        if self._stop.is_set():
            return
        log.info("ready in %.0f ms", (time.perf_counter() - t0) * 1000)

    async def _supervise(self, name: str, ch: Channel, started: asyncio.Event) -> None:
        """Start the channel, retrying with backoff; restart it if it later dies on its own."""
        assert self.router is not None
        delay = 1.0
        while not self._stop.is_set():
            try:
                await ch.start(self.router.on_inbound)
            except asyncio.CancelledError:
                raise
            except ChannelError as e:
                log.error("channel %s failed to start: %s (retrying in %.0fs)", name, e, delay)
            except Exception as e:
                log.exception("channel %s failed to start: %s (retrying in %.0fs)", name, e, delay)
            else:
                log.info("channel %s started", name)
                started.set()
                up_since = time.monotonic()
                err = await ch.wait_closed()
                if self._stop.is_set():
                    return
                if time.monotonic() - up_since > RETRY_MAX:
                    delay = 1.0  # it ran for a while: not a crash loop
                reason = f"{type(err).__name__}: {err}" if err is not None else "closed"
                log.error(
                    "channel %s stopped unexpectedly (%s); restarting in %.0fs", name, reason, delay
                )
                try:
                    await asyncio.wait_for(ch.stop(), 10)
                except asyncio.CancelledError:
                    raise
                except Exception as e:
                    log.warning("channel %s did not stop cleanly: %s", name, e)
            started.set()  # do not hold up start-up for a broken channel
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stop.wait(), delay)
            delay = min(delay * 2, RETRY_MAX)

    async def _watch_pairing(self) -> None:
        """Act on pairing approvals made with ``chela pairing approve`` (another process):
        tell the sender and answer the message that asked."""
        assert self.store is not None and self.router is not None
        while not self._stop.is_set():
            try:
                for channel, sender in self.store.take_new_approvals():
                    if not await self.router.pairing_approved(channel, sender):
                        log.info(
                            "pairing approved channel=%s sender=%s (no held message to answer)",
                            channel,
                            sender,
                        )
            except Exception:
                log.exception("pairing approvals check failed")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stop.wait(), PAIRING_POLL)

    def request_stop(self) -> None:
        self._stop.set()

    async def run(self) -> int:
        """``chela run``: hold the state-dir lock (raises ``bot.lock.LockHeld``), start, wait
        for SIGTERM/SIGINT, stop."""
        from bot.lock import StateLock
        from bot.private import private_dir

        cfg = self.cfg
        try:
            private_dir(cfg.agent.state_dir)
        except OSError as e:
            raise StoreError(
                f"cannot create or use {e.filename or cfg.agent.state_dir}: {e.strerror or e}. "
                "agent.state_dir must be a directory Chela can write"
            ) from None
        lock = StateLock(cfg.agent.state_dir)
        lock.acquire()
        try:
            loop = asyncio.get_running_loop()
            for sig in (signal.SIGTERM, signal.SIGINT):
                with contextlib.suppress(NotImplementedError):
                    loop.add_signal_handler(sig, self.request_stop)
            for line in startup_lines(cfg, list(self._given_channels or enabled_channels(cfg))):
                (log.warning if line.startswith("no config file") else log.info)(line)
            await self.start()
            lock.update(
                started=time.time(),
                config=str(cfg.source or ""),
                channels=list(self.channels),
                http=cfg.channels.http.listen if "http" in self.channels else "",
                heartbeat_every=cfg.heartbeat.every_seconds,
            )
            await self._stop.wait()
            await self.stop()
        finally:
            lock.release()
        return 0

    async def stop(self) -> None:
        self._stop.set()
        log.info(
            "stopping: no new turns; waiting up to %.0fs for turns in progress", SHUTDOWN_GRACE
        )
        if self.router is not None:
            self.router.accepting = False
        if killed := pdf.stop_all():  # bounded work never delays shutdown (SPEC §9.5)
            log.info("stopping: %d document read(s) cut short", killed)
        if self.cron:
            self.cron.shutdown()
        if self.lanes is not None:
            finished = await self.lanes.drain(SHUTDOWN_GRACE)
            if not finished:
                log.warning(
                    "some turns did not finish; their messages stay stored and are answered after restart"
                )
        if self.outbox is not None:  # sends in flight finish; unsent rows stay stored
            await self.outbox.stop()
        for t in self._supervisors:
            t.cancel()
        for name, ch in self.channels.items():
            try:
                await asyncio.wait_for(ch.stop(), 5)
            except Exception as e:
                log.warning("channel %s did not stop cleanly: %s", name, e)
        if self.mcp is not None:
            await self.mcp.stop()
        if self.agent is not None:
            self.agent.cache.close()
        if self.store:
            self.store.close()
            self.store = None
        log.info("stopped")
