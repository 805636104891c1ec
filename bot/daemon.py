"""Wiring and lifecycle: config → store, agent, router, channels, scheduler."""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import logging
import signal
import time

from bot.agent.turn import Agent
from bot.config import Config
from channels.util import parse_listen
from bot.heartbeat import CronService, Scheduled
from bot.router import Router
from bot.sessions import SessionLanes
from bot.store import Store, StoreError
from channels.base import Channel, ChannelError, OutboundMessage

log = logging.getLogger("chela.daemon")

SHUTDOWN_GRACE = 10.0
PAIRING_POLL = 2.0  # seconds between looks for approvals made by `chela pairing approve`
RETRY_MAX = 60.0


class SecretMissing(Exception):
    pass


ADAPTERS = {
    "telegram": "channels.telegram:TelegramChannel",
    "discord": "channels.discord:DiscordChannel",
    "slack": "channels.slack:SlackChannel",
    "signal": "channels.signal:SignalChannel",
    "http": "channels.http:HttpChannel",
    "terminal": "channels.terminal:TerminalChannel",
}


def channel_class(name: str) -> type[Channel]:
    """The adapter class of a channel id (imported on demand: platform SDKs are heavy)."""
    module, _, attr = ADAPTERS[name].partition(":")
    return getattr(importlib.import_module(module), attr)


def build_channel(cfg: Config, name: str) -> Channel:
    """One adapter from its config section.  Raises ``SecretMissing`` naming the env var."""
    ch = cfg.channels
    media = cfg.media_dir
    cls = channel_class(name)

    secret: dict[str, str] = {}
    for key, env in cfg.channel_secrets(name).items():
        secret[key] = cfg.secret(env)
        if not secret[key]:
            raise SecretMissing(
                f"channels.{name}.{key}: environment variable {env or '(unset)'} is empty"
            )

    if name == "telegram":
        t = ch.telegram
        from bot.router import COMMANDS

        return cls(
            token=secret["token_env"],
            api_base=t.api_base,
            media_dir=media,
            poll_timeout=t.poll_timeout,
            chunk_limit=t.text_chunk_limit,
            commands=[(n, c.help) for n, c in COMMANDS.items()],
        )  # the chat's command menu
    if name == "discord":
        d = ch.discord
        return cls(
            token=secret["token_env"],
            api_base=d.api_base,
            gateway_url=d.gateway_url,
            media_dir=media,
            chunk_limit=d.text_chunk_limit,
        )
    if name == "slack":
        s = ch.slack
        return cls(
            mode=s.mode,
            bot_token=secret["bot_token_env"],
            app_token=secret.get("app_token_env", ""),
            signing_secret=secret.get("signing_secret_env", ""),
            api_base=s.api_base,
            listen=s.listen,
            media_dir=media,
            chunk_limit=s.text_chunk_limit,
        )
    if name == "signal":
        g = ch.signal
        return cls(
            account=g.account,
            http_url=g.api_base or g.http_url,
            media_dir=media,
            chunk_limit=g.text_chunk_limit,
        )
    if name == "http":
        from bot.http_token import ensure_http_token

        h = ch.http
        host, port = parse_listen(h.listen)
        # always a token (SPEC §9.4); an unset token_env raises ConfigError, which start() lets through
        token = ensure_http_token(cfg)
        hint = f"in ${h.token_env}" if h.token_env else f"in {cfg.http_token_path}"
        return cls(
            host=host,
            port=port,
            token=token,
            model_name=f"chela/{cfg.agent.id}",
            allowed_origins=h.allowed_origins,
            token_hint=hint,
        )
    raise ValueError(f"channel {name} is not built from the config")


def enabled_channels(cfg: Config) -> list[str]:
    return [
        n
        for n in ("telegram", "discord", "slack", "signal", "http")
        if getattr(cfg.channels, n).enabled
    ]


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
        self.agent: Agent | None = None
        self.router: Router | None = None
        self.scheduled: Scheduled | None = None
        self.cron: CronService | None = None
        self.mcp = None  # bot.mcp.McpManager when [[mcp.servers]] are configured

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
        self.agent = Agent(cfg, self.store, hooks=hooks, send_message=self._message_tool)
        if cfg.mcp.servers:
            from bot.mcp import McpManager, default_log_dir

            self.mcp = McpManager(
                cfg.mcp.servers, log_dir=default_log_dir(cfg), on_change=self.agent.refresh_tools
            )
            self.agent.mcp = self.mcp
        if self._given_channels is not None:
            self.channels = dict(self._given_channels)
        else:
            for name in enabled_channels(cfg):
                try:
                    self.channels[name] = build_channel(cfg, name)
                except SecretMissing as e:
                    log.error("channel %s not started: %s", name, e)
        self.router = Router(cfg, self.store, self.agent, self.lanes, self.channels)
        if cfg.tools.exec.security == "ask":
            from bot.approvals import Approvals

            self.agent.approvals = Approvals(self.router.notify, self.router.owner_route)
        self.scheduled = Scheduled(cfg, self.store, self.agent, self.lanes, self.router)
        self.cron = CronService(cfg, self.store, self.scheduled)
        if "cron" in cfg.tools.enabled:
            self.agent.cron_api = self.cron

    async def _message_tool(self, channel: str, to: str, text: str) -> str:
        if channel not in self.channels:
            return f"Error: channel {channel!r} is not running (running: {', '.join(self.channels) or 'none'})"
        ok = await self.router.deliver(channel, OutboundMessage(chat_id=to, text=text))
        return "sent" if ok else "Error: the message could not be delivered"

    # ---------------------------------------------------------------------- lifecycle
    async def start(self) -> None:
        t0 = time.perf_counter()
        self._build()
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
            await self.router.recover()
            self._supervisors.append(
                asyncio.create_task(self._watch_pairing(), name="pairing-approvals")
            )
        if self.use_scheduler:
            self.cron.start()
        # import litellm off the start-up path so the first turn does not pay for it
        from bot.agent.llm import warm_up

        asyncio.get_running_loop().run_in_executor(None, warm_up)
        log.info("ready in %.0f ms", (time.perf_counter() - t0) * 1000)

    async def _supervise(self, name: str, ch: Channel, started: asyncio.Event) -> None:
        """Start the channel, retrying with backoff; restart it if it later dies on its own."""
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
        if self.cron:
            self.cron.shutdown()
        if self.lanes is not None:
            finished = await self.lanes.drain(SHUTDOWN_GRACE)
            if not finished:
                log.warning(
                    "some turns did not finish; their messages stay stored and are answered after restart"
                )
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
