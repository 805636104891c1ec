"""One descriptor per channel: its config section, its adapter and how the adapter is built
from the section.  The rest of the core asks this table instead of spelling channel names, so
adding a channel is one adapter package, one config section and one entry here.

What is pure data about a channel lives with its section in the config (bot/config/channels.py:
the channel names, which are messaging channels, titles, the secrets a section needs, whether
the platform edits messages, the prompt's formatting hint, how a direct chat is addressed:
``bot.config.channels.platform(name)``, which the layers below the app read) and is imported
from there; this table adds the adapters.
"""

from __future__ import annotations

import importlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bot.app import probes
from bot.config.channels import CONFIGURED, MESSAGING, env_fields, title

if TYPE_CHECKING:
    from bot.config import Config
    from channels.base import Channel

__all__ = [
    "CONFIGURED",
    "MESSAGING",
    "SPECS",
    "TERMINAL_ADAPTER",
    "ChannelSpec",
    "Setting",
    "env_fields",
    "title",
]


@dataclass(frozen=True)
class Setting:
    """A key of the channel's section that ``chela onboard`` asks for, besides its secrets
    and the owner's id: ``flag`` is the onboard flag's name (``--signal-account`` is
    ``signal_account``), ``question`` what is asked ("" = a flag only), ``needed`` why the
    channel cannot go without it ("" = optional), ``always``: written even when empty."""

    key: str
    flag: str
    question: str = ""
    default: str = ""
    needed: str = ""
    always: bool = True


@dataclass(frozen=True)
class ChannelSpec:
    name: str  # the channel id, its config member (`[channels.<name>]`) and session-key part
    adapter: str  # "module:Class", imported only when the channel is built (SDKs are heavy)
    # adapter keyword arguments from (config, its section, secrets by key, media dir)
    kwargs: Callable[[Config, Any, dict[str, str], Path], dict[str, Any]]
    owner_id_hint: str = ""  # what `chela onboard` asks for as the owner's id
    settings: tuple[Setting, ...] = ()  # what `chela onboard` asks for besides
    # `chela doctor`'s authenticated request (bot.app.probes)
    probe: Callable[[Any, Config], Awaitable[probes.Probe]] | None = None
    # `chela run` starts it once the core exists (bot.app.build.AFTER_CORE): it needs the
    # conversation, or it takes a message from the platform for good on receipt
    after_core: bool = False

    @property
    def title(self) -> str:
        """How people write it (the section's TITLE)."""
        return title(self.name)

    @property
    def messaging(self) -> bool:
        """A chat platform (heartbeat/cron target, pairing, group rules)."""
        return self.name in MESSAGING

    def section(self, cfg: Config) -> Any:
        return getattr(cfg.channels, self.name)

    def secrets(self, cfg: Config) -> dict[str, str]:
        """The secrets this channel cannot start without, as ``{key: env var}``."""
        return cfg.channel_secrets(self.name)

    def adapter_class(self) -> type[Channel]:
        module, _, attr = self.adapter.partition(":")
        cls: type[Channel] = getattr(importlib.import_module(module), attr)
        return cls


# ------------------------------------------------------------------------- the adapters
def telegram_menu() -> list[tuple[str, str]]:
    """The chat's command menu, read when the adapter publishes it (after its first poll:
    the command table imports most of the core, which the first poll does not need)."""
    from bot.conversation.commands import menu

    return menu()


def _telegram(cfg: Config, t: Any, secret: dict[str, str], media: Path) -> dict[str, Any]:
    return {
        "token": secret["token_env"],
        "api_base": t.api_base,
        "media_dir": media,
        "poll_timeout": t.poll_timeout,
        "chunk_limit": t.text_chunk_limit,
        "commands": telegram_menu,  # the chat's command menu
    }


def _discord(cfg: Config, d: Any, secret: dict[str, str], media: Path) -> dict[str, Any]:
    return {
        "token": secret["token_env"],
        "api_base": d.api_base,
        "gateway_url": d.gateway_url,
        "media_dir": media,
        "chunk_limit": d.text_chunk_limit,
    }


def _slack(cfg: Config, s: Any, secret: dict[str, str], media: Path) -> dict[str, Any]:
    return {
        "mode": s.mode,
        "bot_token": secret["bot_token_env"],
        "app_token": secret.get("app_token_env", ""),
        "signing_secret": secret.get("signing_secret_env", ""),
        "api_base": s.api_base,
        "listen": s.listen,
        "media_dir": media,
        "chunk_limit": s.text_chunk_limit,
    }


def _signal(cfg: Config, g: Any, secret: dict[str, str], media: Path) -> dict[str, Any]:
    return {
        "account": g.account,
        "http_url": g.api_base or g.http_url,
        "media_dir": media,
        "chunk_limit": g.text_chunk_limit,
    }


def _http(cfg: Config, h: Any, secret: dict[str, str], media: Path) -> dict[str, Any]:
    from bot.app.http_token import ensure_http_token
    from channels.util import parse_listen

    host, port = parse_listen(h.listen)
    # always a token; an unset token_env raises ConfigError, which start() lets through
    token = ensure_http_token(cfg)
    hint = f"in ${h.token_env}" if h.token_env else f"in {cfg.http_token_path}"
    return {
        "host": host,
        "port": port,
        "token": token,
        "model_name": f"chela/{cfg.agent.id}",
        "allowed_origins": h.allowed_origins,
        "token_hint": hint,
    }


SPECS: dict[str, ChannelSpec] = {
    s.name: s
    for s in (
        ChannelSpec(
            "telegram",
            "channels.telegram:TelegramChannel",
            _telegram,
            owner_id_hint="your numeric Telegram user id",
            settings=(Setting("api_base", "telegram_api_base", always=False),),
            probe=probes.telegram,
        ),
        ChannelSpec(
            "discord",
            "channels.discord:DiscordChannel",
            _discord,
            owner_id_hint="your numeric Discord user id (Developer Mode > Copy User ID)",
            probe=probes.discord,
        ),
        ChannelSpec(
            "slack",
            "channels.slack:SlackChannel",
            _slack,
            owner_id_hint="your Slack member id (U...)",
            probe=probes.slack,
        ),
        ChannelSpec(
            "signal",
            "channels.signal:SignalChannel",
            _signal,
            owner_id_hint="your phone number (+...) or Signal UUID",
            settings=(
                Setting(
                    "account",
                    "signal_account",
                    "the bot's Signal number (+...)",
                    needed="the bot's Signal number",
                ),
                Setting(
                    "http_url",
                    "signal_url",
                    "signal-cli daemon --http URL",
                    default="http://127.0.0.1:8080",
                ),
            ),
            probe=probes.signal,
            after_core=True,  # signal-cli hands each envelope over once
        ),
        ChannelSpec("http", "channels.http:HttpChannel", _http, after_core=True),  # the UI
    )
}

TERMINAL_ADAPTER = "channels.terminal:TerminalChannel"  # `chela chat`: no config section


class SecretMissing(Exception):
    pass


def channel_class(name: str) -> type[Channel]:
    """The adapter class of a channel id (imported on demand: platform SDKs are heavy)."""
    if name == "terminal":
        module, _, attr = TERMINAL_ADAPTER.partition(":")
        cls: type[Channel] = getattr(importlib.import_module(module), attr)
        return cls
    return SPECS[name].adapter_class()


def build_channel(cfg: Config, name: str, **ports: Any) -> Channel:
    """One adapter from its config section (``ports``: what the app adds, e.g. the HTTP
    channel's sub-applications).  Raises ``SecretMissing`` naming the env var."""
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
    return cls(**spec.kwargs(cfg, spec.section(cfg), secret, cfg.media_dir), **ports)


def enabled_channels(cfg: Config) -> list[str]:
    return [name for name, spec in SPECS.items() if spec.section(cfg).enabled]
