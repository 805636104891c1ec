"""The TOML configuration: schema, validation and loading.

This is the one place that knows the config keys (SPEC §1.1).  Every error names the
TOML key path, e.g. ``channels.telegram.dm_policy``.  Secrets are never read from the
TOML itself: a key ending in ``_env`` names the environment variable that holds one.
"""

from __future__ import annotations

import os
import re
import tomllib
from pathlib import Path
from typing import Any, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from bot.heartbeat_rules import parse_duration
from channels.util import is_loopback, parse_listen
from bot.channel_specs import MESSAGING
from bot import secrets as secrets_registry
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator
from pydantic import PrivateAttr


class ConfigError(Exception):
    """A config problem; the message names the TOML key path."""


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_default=True)


def _hhmm(value: str, *, allow_24: bool) -> str:
    m = re.fullmatch(r"(\d{2}):(\d{2})", value or "")
    if not m:
        raise ValueError(f"bad time {value!r}: use HH:MM")
    h, mi = int(m[1]), int(m[2])
    if (h, mi) == (24, 0) and allow_24:
        return value
    if h > 23 or mi > 59:
        raise ValueError(
            f"bad time {value!r}: hours 00-23 and minutes 00-59"
            + (" (or 24:00)" if allow_24 else "")
        )
    return value


def _check_zone(value: str) -> str:
    if value:
        try:
            ZoneInfo(value)
        except (ZoneInfoNotFoundError, ValueError):
            raise ValueError(f"unknown IANA time zone {value!r}") from None
    return value


# --------------------------------------------------------------------------------- agent
class CompactionConfig(_Model):
    """``[agent.compaction]``: token-budgeted history and summaries (SPEC §10)."""

    enabled: bool = True
    context_window: int = Field(0, ge=0)  # 0 = from the model's metadata, else 32000
    threshold: float = Field(0.8, gt=0.1, le=1.0)
    keep_recent_tokens: int = Field(8000, ge=0)
    summary_max_tokens: int = Field(1200, ge=64)
    model: str = ""  # "" = agent.model

    @field_validator("context_window")
    @classmethod
    def _window(cls, v: int) -> int:
        if 0 < v < 1000:
            raise ValueError("use 0 (from the model's metadata) or at least 1000 tokens")
        return v


class FallbackModel(_Model):
    """An entry of ``agent.fallbacks`` written as a table."""

    model: str
    api_base: str = ""
    api_key_env: str = ""

    @field_validator("model")
    @classmethod
    def _model(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("empty model string")
        return v.strip()


class AgentConfig(_Model):
    id: str = "main"
    name: str = "Chela"
    workspace: Path = Path("~/.chela/workspace")
    state_dir: Path = Path("~/.chela")
    model: str = "openai/gpt-4o-mini"
    api_base: str = ""
    api_key_env: str = ""
    prompt_mode: Literal["full", "minimal", "none"] = "full"
    timezone: str = ""
    thinking: str = "off"
    native_tools: bool = True
    reasoning_tags: bool = False
    max_tool_iterations: int = Field(20, ge=1, le=200)
    bootstrap_max_chars: int = Field(20000, ge=64)
    bootstrap_total_max_chars: int = Field(150000, ge=64)
    compact_context: bool = False
    history_limit: int = Field(50, ge=1, le=10000)
    history_max_chars: int = Field(200_000, ge=1000)
    identity_format: Literal["markdown", "aieos"] = "markdown"
    aieos_path: str = ""
    aieos_inline: str = ""
    project_dir: str = ""
    docs_path: str = ""
    llm_timeout_seconds: float = Field(120, gt=0)
    llm_max_retries: int = Field(3, ge=0, le=10)
    # SPEC §12: tried in order when the model before fails after its retries
    # (each a "provider/model" string or a table with model, api_base, api_key_env)
    fallbacks: list[FallbackModel] = Field(default_factory=list)
    cooldown: str = "5m"  # a model that failed is skipped this long, then tried again
    daily_cost_limit_usd: float = Field(0, ge=0)  # all turns of a day; 0 = no limit
    guest_daily_cost_limit_usd: float = Field(0, ge=0)  # guests' turns together; 0 = no limit
    models: dict[str, str] = Field(default_factory=dict)
    compaction: CompactionConfig = Field(default_factory=CompactionConfig)

    @field_validator("fallbacks", mode="before")
    @classmethod
    def _fallbacks(cls, v: Any) -> Any:
        if isinstance(v, list):
            return [{"model": f} if isinstance(f, str) else f for f in v]
        return v

    @field_validator("cooldown")
    @classmethod
    def _cooldown(cls, v: str) -> str:
        parse_duration(v)
        return v

    @property
    def cooldown_seconds(self) -> float:
        return parse_duration(self.cooldown)

    def fallback_models(self) -> list[FallbackModel]:
        """``fallbacks`` (a string entry is a model without api_base/api_key_env of its own)."""
        return list(self.fallbacks)

    @field_validator("id")
    @classmethod
    def _id(cls, v: str) -> str:
        if not re.fullmatch(r"[A-Za-z0-9_-]{1,64}", v):
            raise ValueError("use letters, digits, '-' or '_' (at most 64)")
        return v

    @field_validator("workspace", "state_dir")
    @classmethod
    def _expand(cls, v: Path) -> Path:
        return Path(os.path.expandvars(str(v))).expanduser()

    @field_validator("timezone")
    @classmethod
    def _tz(cls, v: str) -> str:
        return _check_zone(v)


class SessionConfig(_Model):
    dm_scope: Literal["main", "per-peer", "per-channel-peer"] = "main"
    max_concurrent_turns: int = Field(8, ge=1, le=1000)


class ActiveHours(_Model):
    start: str
    end: str
    timezone: str = ""

    @field_validator("start")
    @classmethod
    def _start(cls, v: str) -> str:
        return _hhmm(v, allow_24=False)

    @field_validator("end")
    @classmethod
    def _end(cls, v: str) -> str:
        return _hhmm(v, allow_24=True)

    @field_validator("timezone")
    @classmethod
    def _tz(cls, v: str) -> str:
        return _check_zone(v)


TARGETS = ("none", "last", *MESSAGING)


def _target(value: str) -> str:
    if value not in TARGETS:
        raise ValueError(f"unknown target {value!r}: use one of {', '.join(TARGETS)}")
    return value


class HeartbeatConfig(_Model):
    every: str = "30m"
    prompt: str = ""
    target: str = "last"
    to: str = ""
    ack_max_chars: int = Field(300, ge=0)
    active_hours: ActiveHours | None = None

    @field_validator("target")
    @classmethod
    def _target(cls, v: str) -> str:
        return _target(v)

    @field_validator("every")
    @classmethod
    def _every(cls, v: str) -> str:
        parse_duration(v)
        return v

    @property
    def every_seconds(self) -> float:
        return parse_duration(self.every)


DEFAULT_EXEC_ALLOW = ["ls", "cat", "grep", "head", "tail", "wc", "find", "sort", "python3", "git"]


class ExecConfig(_Model):
    security: Literal["deny", "allowlist", "ask", "full"] = "allowlist"
    allow: list[str] = Field(default_factory=lambda: list(DEFAULT_EXEC_ALLOW))
    sandbox: Literal["on", "off"] = "on"
    network: bool = False
    timeout_seconds: float = Field(60, gt=0)


DEFAULT_TOOLS = [
    "read",
    "write",
    "edit",
    "exec",
    "memory_search",
    "memory_get",
    "message",
    "session_status",
]
# Tools a guest turn never gets, whatever tools.guest says (SPEC §9).
OWNER_ONLY_TOOLS = frozenset({"memory_search", "memory_get", "cron"})


class WebConfig(_Model):
    """``[tools.web]``: web_fetch and web_search (SPEC §14)."""

    allow_private_hosts: list[str] = Field(
        default_factory=list
    )  # host names, IPs or CIDRs allowed anyway
    max_redirects: int = Field(5, ge=0, le=20)
    max_bytes: int = Field(2_000_000, ge=1000)  # a longer body is cut
    max_chars: int = Field(20_000, ge=100)  # default web_fetch max_chars
    timeout_seconds: float = Field(20, gt=0)
    user_agent: str = "Mozilla/5.0 (compatible; Chela/0.1; +https://github.com/chela)"
    search_provider: Literal["auto", "brave", "tavily", "searxng", "duckduckgo"] = "auto"
    brave_api_key_env: str = "BRAVE_API_KEY"
    tavily_api_key_env: str = "TAVILY_API_KEY"
    brave_api_base: str = "https://api.search.brave.com"
    tavily_api_base: str = "https://api.tavily.com"
    searxng_url: str = ""
    duckduckgo_url: str = "https://html.duckduckgo.com"

    @field_validator("allow_private_hosts")
    @classmethod
    def _hosts(cls, v: list[str]) -> list[str]:
        import ipaddress

        out = []
        for raw in v:
            x = raw.strip().lower()
            if not x:
                raise ValueError("an empty host")
            if "/" in x:
                try:
                    ipaddress.ip_network(x, strict=False)
                except ValueError:
                    raise ValueError(f"{x!r} is not a valid CIDR") from None
            out.append(x)
        return out


class ToolsConfig(_Model):
    enabled: list[str] = Field(default_factory=lambda: list(DEFAULT_TOOLS))
    guest: list[str] = Field(default_factory=lambda: ["session_status"])
    exec: ExecConfig = Field(default_factory=ExecConfig)
    web: WebConfig = Field(default_factory=WebConfig)

    @field_validator("guest")
    @classmethod
    def _guest(cls, v: list[str]) -> list[str]:
        bad = [t for t in v if t in OWNER_ONLY_TOOLS]
        if bad:
            raise ValueError(
                f"{', '.join(bad)} can never be given to guests (owner-only tools: "
                f"{', '.join(sorted(OWNER_ONLY_TOOLS))})"
            )
        return v


def _ids_only(v: list[str], what: str) -> list[str]:
    """Entries that name people or chats must be immutable platform ids (SPEC §9.1)."""
    for x in v:
        if x.strip().startswith("@"):
            raise ValueError(
                f"{x!r} is a username; {what} take ids only (usernames can be changed or taken by "
                "someone else). To find an id, have that person message the bot: the pairing "
                "reply shows their user id, and `chela pairing list` lists it"
            )
        if not x.strip():
            raise ValueError("an empty id")
    return [x.strip() for x in v]


def _as_strs(v: Any) -> Any:
    # ids are often written as TOML integers; keep them as strings
    if isinstance(v, list):
        return [str(x) for x in v]
    return v


class OwnerConfig(_Model):
    numbers: list[str] = Field(default_factory=list)
    display: Literal["raw", "hash"] = "raw"
    hash_secret_env: str = ""

    @field_validator("numbers", mode="before")
    @classmethod
    def _strs(cls, v: Any) -> Any:
        return _as_strs(v)

    @field_validator("numbers")
    @classmethod
    def _ids(cls, v: list[str]) -> list[str]:
        return _ids_only(v, "owner numbers")


# ------------------------------------------------------------------------------ channels
class ChannelPolicy(_Model):
    enabled: bool = False
    dm_policy: Literal["pairing", "allowlist", "open", "disabled"] = "pairing"
    allow_from: list[str] = Field(default_factory=list)  # the owner's user ids on this channel
    group_policy: Literal["open", "allowlist", "disabled"] = "allowlist"
    groups: list[str] = Field(default_factory=list)
    owner_groups: list[str] = Field(
        default_factory=list
    )  # groups whose turns run as the owner (§9)
    require_mention: bool = True
    reactions: Literal["off", "ack", "minimal", "extensive"] = "minimal"
    reply_to_mode: Literal["off", "first", "all"] = "off"
    text_chunk_limit: int = Field(4000, ge=100)
    # "partial": a live preview of the reply while the model writes it, one message edited
    # at most once a second, replaced by the final reply (SPEC §12; Telegram, Discord, Slack)
    streaming: Literal["off", "partial"] = "off"

    @field_validator("allow_from", "groups", "owner_groups", mode="before")
    @classmethod
    def _strs(cls, v: Any) -> Any:
        return _as_strs(v)

    @field_validator("allow_from", "owner_groups")
    @classmethod
    def _ids(cls, v: list[str]) -> list[str]:
        return _ids_only(v, "allow_from and owner_groups")


class TelegramConfig(ChannelPolicy):
    token_env: str = "TELEGRAM_BOT_TOKEN"
    api_base: str = "https://api.telegram.org"
    poll_timeout: int = Field(30, ge=1, le=120)
    text_chunk_limit: int = Field(4000, ge=100, le=4096)


class DiscordConfig(ChannelPolicy):
    token_env: str = "DISCORD_BOT_TOKEN"
    api_base: str = ""
    gateway_url: str = ""
    reactions: Literal["off", "ack", "minimal", "extensive"] = "off"
    text_chunk_limit: int = Field(2000, ge=100, le=2000)


class SlackConfig(ChannelPolicy):
    mode: Literal["socket", "http"] = "socket"
    bot_token_env: str = "SLACK_BOT_TOKEN"
    app_token_env: str = "SLACK_APP_TOKEN"
    signing_secret_env: str = "SLACK_SIGNING_SECRET"
    api_base: str = "https://slack.com/api/"
    listen: str = "127.0.0.1:3000"
    reactions: Literal["off", "ack", "minimal", "extensive"] = "off"

    @field_validator("listen")
    @classmethod
    def _listen(cls, v: str) -> str:
        parse_listen(v)
        return v


class SignalConfig(ChannelPolicy):
    account: str = ""
    http_url: str = "http://127.0.0.1:8080"
    api_base: str = ""  # alias of http_url, for symmetry with the other channels

    @model_validator(mode="after")
    def _account(self) -> SignalConfig:
        if self.enabled and not self.account:
            raise ValueError("channels.signal.account must be set when the channel is enabled")
        return self


class HttpConfig(_Model):
    enabled: bool = False
    listen: str = "127.0.0.1:8787"
    token_env: str = ""  # "" = a generated token in <state_dir>/http-token
    allowed_origins: list[str] = Field(
        default_factory=list
    )  # browser origins allowed to call (§9.4)

    @field_validator("listen")
    @classmethod
    def _listen(cls, v: str) -> str:
        parse_listen(v)
        return v


class ChannelsConfig(_Model):
    telegram: TelegramConfig = Field(default_factory=TelegramConfig)
    discord: DiscordConfig = Field(default_factory=DiscordConfig)
    slack: SlackConfig = Field(default_factory=SlackConfig)
    signal: SignalConfig = Field(default_factory=SignalConfig)
    http: HttpConfig = Field(default_factory=HttpConfig)


class DeliveryConfig(_Model):
    """``[delivery]`` (SPEC §4.5): how long the outbox keeps retrying a message the
    platform did not accept (5xx, 429, a dropped connection, a timeout)."""

    max_age: str = "1h"  # a message not delivered within this is given up (logged)

    @field_validator("max_age")
    @classmethod
    def _max_age(cls, v: str) -> str:
        if parse_duration(v) <= 0:
            raise ValueError(f"invalid duration {v!r}: must be more than 0")
        return v

    @property
    def max_age_seconds(self) -> float:
        return parse_duration(self.max_age)


class MediaConfig(_Model):
    """``[media]`` (SPEC §11, §9.4): images, voice notes and files reaching the model."""

    vision: Literal["auto", "on", "off"] = "auto"  # auto = litellm's supports_vision for the model
    image_max_px: int = Field(1568, ge=64, le=8192)  # long side of an image sent to the model
    images_in_history: int = Field(2, ge=0, le=50)  # user turns that still carry image bytes
    transcription_model: str = ""  # e.g. "openai/whisper-1"; "" = voice notes are not heard
    transcription_api_base: str = ""  # "" = agent.api_base
    # the env var holding the transcription endpoint's own key (SPEC §9.5): "" = the
    # agent's key only when the endpoint is the agent's; another base gets a placeholder
    transcription_api_key_env: str = ""
    tts_model: str = ""  # e.g. "openai/tts-1"; "" = no spoken replies
    tts_api_base: str = ""  # "" = transcription_api_base, else agent.api_base
    tts_api_key_env: str = ""  # the same rule for the speech endpoint
    tts_voice: str = "alloy"
    max_download_mb: float = Field(20, gt=0)  # inbound attachments over this are not downloaded
    max_document_chars: int = Field(20000, ge=0)  # longer documents are saved, not inlined
    retention_days: float = Field(30, gt=0)  # downloaded media older than this is pruned

    @field_validator("transcription_api_key_env", "tts_api_key_env")
    @classmethod
    def _env_name(cls, v: str) -> str:
        # the name of a variable, never the key itself (secrets are not in the TOML)
        if v and not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]{0,127}", v):
            raise ValueError("the name of an environment variable (letters, digits, '_')")
        return v


class McpServerConfig(_Model):
    """One ``[[mcp.servers]]`` entry (SPEC §14): stdio (``command``) or streamable HTTP (``url``)."""

    name: str
    enabled: bool = True
    command: str = ""
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)  # "${VAR}" is taken from Chela's environment
    cwd: str = ""
    url: str = ""
    headers_env: dict[str, str] = Field(
        default_factory=dict
    )  # header name -> env var holding its value
    enabled_tools: list[str] = Field(default_factory=list)  # empty = all
    disabled_tools: list[str] = Field(default_factory=list)
    timeout_seconds: float = Field(60, gt=0)  # per tool call
    connect_timeout_seconds: float = Field(30, gt=0)

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not re.fullmatch(r"[A-Za-z0-9-]+(_[A-Za-z0-9-]+)*", v) or len(v) > 32:
            raise ValueError(
                "use letters, digits, '-' or single '_' (at most 32); "
                "tools are named <server>__<tool>"
            )
        return v

    @model_validator(mode="after")
    def _transport(self) -> McpServerConfig:
        if bool(self.command) == bool(self.url):
            raise ValueError(
                "set either command (a stdio server) or url (a streamable HTTP server)"
            )
        if self.url and not re.match(r"https?://", self.url):
            raise ValueError("url must start with http:// or https://")
        return self


class McpConfig(_Model):
    servers: list[McpServerConfig] = Field(default_factory=list)

    @field_validator("servers")
    @classmethod
    def _unique(cls, v: list[McpServerConfig]) -> list[McpServerConfig]:
        seen: set[str] = set()
        for s in v:
            if s.name.lower() in seen:
                raise ValueError(f"two servers are named {s.name!r}")
            seen.add(s.name.lower())
        return v


class PluginConfig(_Model):
    module: str


class CronJob(_Model):
    name: str
    schedule: str
    prompt: str
    target: str = "last"
    to: str = ""

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not re.fullmatch(r"[A-Za-z0-9_.-]{1,64}", v):
            raise ValueError("use letters, digits, '.', '-' or '_'")
        return v

    @field_validator("target")
    @classmethod
    def _target(cls, v: str) -> str:
        return _target(v)

    @field_validator("schedule")
    @classmethod
    def _schedule(cls, v: str) -> str:
        from apscheduler.triggers.cron import CronTrigger

        try:
            CronTrigger.from_crontab(v)
        except ValueError as e:
            raise ValueError(f"bad crontab expression {v!r}: {e}") from None
        return v


class Config(_Model):
    agent: AgentConfig = Field(default_factory=AgentConfig)
    session: SessionConfig = Field(default_factory=SessionConfig)
    heartbeat: HeartbeatConfig = Field(default_factory=HeartbeatConfig)
    tools: ToolsConfig = Field(default_factory=ToolsConfig)
    owner: OwnerConfig = Field(default_factory=OwnerConfig)
    channels: ChannelsConfig = Field(default_factory=ChannelsConfig)
    media: MediaConfig = Field(default_factory=MediaConfig)
    delivery: DeliveryConfig = Field(default_factory=DeliveryConfig)
    plugins: list[PluginConfig] = Field(default_factory=list)
    cron: list[CronJob] = Field(default_factory=list)
    mcp: McpConfig = Field(default_factory=McpConfig)

    # where it was loaded from (not a TOML key)
    source: Path | None = Field(default=None, exclude=True)
    _secrets: secrets_registry.Secrets | None = PrivateAttr(default=None)

    # -- secrets ---------------------------------------------------------------------
    @staticmethod
    def secret(env_name: str) -> str:
        """The value of a secret named by an ``*_env`` key ("" when unset)."""
        return os.environ.get(env_name, "") if env_name else ""

    def channel_secrets(self, name: str) -> dict[str, str]:
        """The secrets a messaging channel cannot start without, as ``{key: env var}``
        (for Slack only the ones its mode uses); from its descriptor in bot/channel_specs."""
        from bot.channel_specs import SPECS

        spec = SPECS.get(name)
        return spec.secrets(self) if spec is not None else {}

    def secret_env_names(self) -> list[str]:
        """Every environment variable the config names as a secret (bot/secrets.py)."""
        return secrets_registry.env_names(self)

    @property
    def secrets(self) -> secrets_registry.Secrets:
        """The secrets registry of bot/secrets.py, filled by ``parse_config``."""
        if self._secrets is None:
            self._secrets = secrets_registry.collect(self.secret_env_names())
        return self._secrets

    def secret_values(self) -> list[str]:
        """Every secret value that is set: the registry's values."""
        return list(self.secrets)

    @property
    def media_dir(self) -> Path:
        return self.agent.state_dir / "media"

    @property
    def guests_dir(self) -> Path:
        return self.agent.state_dir / "guests"

    @property
    def http_token_path(self) -> Path:
        return self.agent.state_dir / "http-token"

    @property
    def db_path(self) -> Path:
        return self.agent.state_dir / "chela.sqlite3"


def _loc(loc: tuple[int | str, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out


def _format_errors(err: ValidationError) -> str:
    lines = []
    for e in err.errors():
        loc = tuple(p for p in e["loc"] if p not in ("function-after",))
        key = _loc(loc) or "(top level)"
        if e["type"] == "extra_forbidden":
            lines.append(f"{key}: unknown key")
        else:
            msg = e["msg"].removeprefix("Value error, ")
            lines.append(f"{key}: {msg}")
    return "\n".join(lines)


def parse_config(data: dict[str, Any], source: Path | None = None) -> Config:
    try:
        cfg = Config.model_validate(data)
    except ValidationError as e:
        where = f" in {source}" if source else ""
        raise ConfigError(f"invalid config{where}:\n{_format_errors(e)}") from None
    cfg.source = source
    cfg._secrets = secrets_registry.collect(cfg.secret_env_names())  # the registry, filled now
    return cfg


def resolve_config_path(explicit: str | None = None) -> Path | None:
    """``--config`` → ``$CHELA_CONFIG`` → ``./config.toml`` → ``~/.chela/config.toml``."""
    if explicit:
        return Path(explicit).expanduser()
    env = os.environ.get("CHELA_CONFIG")
    if env:
        return Path(env).expanduser()
    for candidate in (Path("config.toml"), Path("~/.chela/config.toml").expanduser()):
        if candidate.is_file():
            return candidate
    return None


def load_config(explicit: str | None = None) -> Config:
    """Load and validate the config; with no file anywhere the defaults are used."""
    path = resolve_config_path(explicit)
    if path is None:
        return parse_config({})
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise ConfigError(f"config file not found: {path}") from None
    except OSError as e:
        raise ConfigError(f"cannot read config file {path}: {e.strerror}") from None
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: the config is not valid UTF-8") from None
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{path}: TOML syntax error: {e}") from None
    return parse_config(data, path)


def config_warnings(cfg: Config) -> list[str]:
    """Risky but valid settings, for ``chela check``."""
    warns: list[str] = []
    chans = cfg.channels
    for name in MESSAGING:
        ch: ChannelPolicy = getattr(chans, name)
        if not ch.enabled:
            continue
        if ch.dm_policy == "open":
            warns.append(f'channels.{name}.dm_policy = "open": anyone who finds the bot can use it')
        if ch.dm_policy == "allowlist" and not ch.allow_from:
            warns.append(
                f'channels.{name}.dm_policy = "allowlist" with an empty allow_from admits nobody'
            )
        if ch.group_policy == "open":
            warns.append(
                f'channels.{name}.group_policy = "open": any group the bot is added to is served'
            )
        if ch.streaming == "partial":
            from bot.channel_specs import SPECS

            if not SPECS[name].adapter_class().capabilities.edit:
                warns.append(
                    f'channels.{name}.streaming = "partial": {SPECS[name].title} cannot edit '
                    "messages, so there is no live preview (replies arrive whole)"
                )
    exec_on = "exec" in cfg.tools.enabled or "exec" in cfg.tools.guest
    if cfg.tools.exec.security == "full" and exec_on:
        warns.append('tools.exec.security = "full": the model may run any shell command')
    if cfg.tools.exec.sandbox == "off" and exec_on:
        warns.append(
            'tools.exec.sandbox = "off": commands run as you, with your files, '
            "the state dir and the network"
        )
    if "exec" in cfg.tools.guest:
        warns.append(
            "tools.guest lists exec: paired friends and group members can run commands "
            "(in their own directory, sandboxed)"
        )
    if chans.http.enabled:
        host, _ = parse_listen(chans.http.listen)
        if not is_loopback(host):
            warns.append(
                f"channels.http.listen = {chans.http.listen!r} is reachable from other machines "
                "(the token is required, but it travels in clear text without TLS)"
            )
    return warns
