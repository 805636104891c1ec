"""One descriptor per channel: its config section, its secrets, its adapter and how the adapter
is built from the section.  The rest of the core asks this table instead of spelling channel
names, so adding a channel is one adapter package, one config member and one entry here.

Secrets are derived from the section's ``*_env`` fields (the config names environment variables,
never values); a descriptor only says which of them a mode can do without.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from bot.config import Config
    from channels.base import Channel


def env_fields(section: Any) -> dict[str, str]:
    """``{key: environment variable}`` for every ``*_env`` field of a config section."""
    return {
        key: getattr(section, key)
        for key in type(section).model_fields
        if key.endswith("_env") and isinstance(getattr(section, key), str)
    }


@dataclass(frozen=True)
class ChannelSpec:
    name: str  # the channel id, its config member (`[channels.<name>]`) and session-key part
    title: str  # how people write it
    adapter: str  # "module:Class", imported only when the channel is built (SDKs are heavy)
    # adapter keyword arguments from (config, its section, secrets by key, media dir)
    kwargs: Callable[[Config, Any, dict[str, str], Path], dict[str, Any]]
    messaging: bool = True  # a chat platform (heartbeat/cron target, pairing, group rules)
    owner_id_hint: str = ""  # what `chela onboard` asks for as the owner's id
    # *_env keys a section can do without (given the section): Slack's mode picks one of two
    optional_secrets: Callable[[Any], set[str]] = field(default=lambda _s: set())

    def section(self, cfg: Config) -> Any:
        return getattr(cfg.channels, self.name)

    def secrets(self, cfg: Config) -> dict[str, str]:
        """The secrets this channel cannot start without, as ``{key: env var}``."""
        if not self.messaging:
            return {}
        section = self.section(cfg)
        skip = self.optional_secrets(section)
        return {k: v for k, v in env_fields(section).items() if k not in skip}

    def adapter_class(self) -> type[Channel]:
        module, _, attr = self.adapter.partition(":")
        cls: type[Channel] = getattr(importlib.import_module(module), attr)
        return cls


# ------------------------------------------------------------------------- the adapters
def _telegram(cfg: Config, t: Any, secret: dict[str, str], media: Path) -> dict[str, Any]:
    from bot.router import COMMANDS

    return {
        "token": secret["token_env"],
        "api_base": t.api_base,
        "media_dir": media,
        "poll_timeout": t.poll_timeout,
        "chunk_limit": t.text_chunk_limit,
        "commands": [(n, c.help) for n, c in COMMANDS.items()],  # the chat's command menu
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
    from bot.http_token import ensure_http_token
    from channels.util import parse_listen

    host, port = parse_listen(h.listen)
    # always a token (SPEC §9.4); an unset token_env raises ConfigError, which start() lets through
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
            "Telegram",
            "channels.telegram:TelegramChannel",
            _telegram,
            owner_id_hint="your numeric Telegram user id",
        ),
        ChannelSpec(
            "discord",
            "Discord",
            "channels.discord:DiscordChannel",
            _discord,
            owner_id_hint="your numeric Discord user id (Developer Mode > Copy User ID)",
        ),
        ChannelSpec(
            "slack",
            "Slack",
            "channels.slack:SlackChannel",
            _slack,
            owner_id_hint="your Slack member id (U...)",
            optional_secrets=lambda s: (
                {"signing_secret_env"} if s.mode == "socket" else {"app_token_env"}
            ),
        ),
        ChannelSpec(
            "signal",
            "Signal",
            "channels.signal:SignalChannel",
            _signal,
            owner_id_hint="your phone number (+...) or Signal UUID",
        ),
        ChannelSpec("http", "HTTP API", "channels.http:HttpChannel", _http, messaging=False),
    )
}

MESSAGING = tuple(n for n, s in SPECS.items() if s.messaging)  # telegram, discord, slack, signal
CONFIGURED = tuple(SPECS)  # every channel with a [channels.<name>] section
TERMINAL_ADAPTER = "channels.terminal:TerminalChannel"  # `chela chat`: no config section


def title(name: str) -> str:
    spec = SPECS.get(name)
    return spec.title if spec else name.capitalize()
