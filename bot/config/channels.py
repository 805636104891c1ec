"""``[channels.<name>]``: one section per channel, and what the rest of Chela reads from them.

The names of the channels, which of them are messaging channels (heartbeat and cron targets,
pairing, group rules), their titles and their secrets are derived from the sections here;
``bot/app/channels.py`` (the app's descriptors: adapters and how to build them) imports them.
What else differs per platform is pure data on its section class (``platform(name)``): the
prompt's formatting hint and after-user note, how the owner route addresses a direct chat;
bot/prompt and bot/owner_route read it there, so they name no platform.
Secrets are the sections' ``*_env`` fields (the config names environment variables, never
values); a section only says which of them its settings can do without.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, Literal

from pydantic import Field, field_validator, model_validator

from channels.util import parse_listen

from .base import Model, as_strs, ids_only


def env_fields(section: Any) -> dict[str, str]:
    """``{key: environment variable}`` for every ``*_env`` field of a config section."""
    return {
        key: getattr(section, key)
        for key in type(section).model_fields
        if key.endswith("_env") and isinstance(getattr(section, key), str)
    }


class ChannelPolicy(Model):
    """What every messaging channel's section has: who may talk, where, and how it replies."""

    TITLE: ClassVar[str] = ""  # how people write the channel's name
    # the platform can edit the bot's own messages (its adapter's Capabilities.edit, checked
    # by tests/unit/app/test_channel_specs.py): what a live preview (streaming = "partial") needs
    EDITS: ClassVar[bool] = False
    # what the model is told about how the platform renders a reply (the prompt's Channel
    # Capabilities section; "" = the generic line)
    FORMAT: ClassVar[str] = ""
    # a system message sent right after the user's message on this platform
    AFTER_USER: ClassVar[tuple[str, ...]] = ()
    # how the platform addresses a user's direct chat by their id ("{}": the id itself)
    DIRECT_CHAT: ClassVar[str] = "{}"
    # the owner's numbers (``owner.numbers``) are owner ids on this platform too
    OWNER_NUMBERS: ClassVar[bool] = False
    # the channel has a subcommand of its own, ``chela <name>`` (the module bot/cli/<name>.py)
    COMMAND: ClassVar[bool] = False

    enabled: bool = False
    dm_policy: Literal["pairing", "allowlist", "open", "disabled"] = "pairing"
    allow_from: list[str] = Field(default_factory=list)  # the owner's user ids on this channel
    group_policy: Literal["open", "allowlist", "disabled"] = "allowlist"
    groups: list[str] = Field(default_factory=list)
    owner_groups: list[str] = Field(default_factory=list)  # groups whose turns run as the owner
    require_mention: bool = True
    reactions: Literal["off", "ack", "minimal", "extensive"] = "minimal"
    reply_to_mode: Literal["off", "first", "all"] = "off"
    text_chunk_limit: int = Field(4000, ge=100)
    # "partial": a live preview of the reply while the model writes it, one message edited
    # at most once a second, replaced by the final reply (Telegram, Discord, Slack)
    streaming: Literal["off", "partial"] = "off"
    # more accounts of the channel ([channels.<name>.accounts.<account>]), each merged over
    # this table (bot/config/agents.py); every section narrows it to its own class
    accounts: Mapping[str, ChannelPolicy] = Field(default_factory=dict)

    @field_validator("allow_from", "groups", "owner_groups", mode="before")
    @classmethod
    def _strs(cls, v: Any) -> Any:
        return as_strs(v)

    @field_validator("allow_from", "owner_groups")
    @classmethod
    def _ids(cls, v: list[str]) -> list[str]:
        return ids_only(v, "allow_from and owner_groups")

    def optional_secrets(self) -> set[str]:
        """The ``*_env`` keys this section can do without (given its other settings)."""
        return set()

    def required_secrets(self) -> dict[str, str]:
        """The secrets the channel cannot start without, as ``{key: env var}``."""
        skip = self.optional_secrets()
        return {k: v for k, v in env_fields(self).items() if k not in skip}

    def owner_only(self) -> bool:
        """The platform lets only the account's owner write to it (every sender is the owner)."""
        return False

    def needs(self) -> tuple[str, str, str] | None:
        """What these settings need installed beyond the core: (the key asking for it, the
        module to import, the optional extra that brings it); None for nothing."""
        return None

    def connection(self) -> dict[str, str]:
        """What names the platform connection (two accounts of a channel never share one of
        these): the token variables it needs, as ``{key: value}``."""
        return {k: v for k, v in self.required_secrets().items() if v}


class TelegramConfig(ChannelPolicy):
    TITLE: ClassVar[str] = "Telegram"
    EDITS: ClassVar[bool] = True
    FORMAT: ClassVar[str] = (
        "Markdown is converted to Telegram HTML: bold, italics, inline code, code blocks and "
        "links work; tables and nested lists do not. Long replies are split at about 4000 "
        "characters."
    )
    AFTER_USER: ClassVar[tuple[str, ...]] = (
        "Sending files on Telegram: to attach something, write a marker with its local path or URL:",
        "[IMAGE:<path-or-url>] for pictures, [DOCUMENT:<path-or-url>] for any file, "
        "[VIDEO:<path-or-url>], [AUDIO:<path-or-url>] for music or recordings, "
        "[VOICE:<path-or-url>] for a voice note.",
        "Use one marker per attachment. Keep your words outside the markers; they are removed "
        "from the text and the files are sent after it.",
        "Never put a marker inside a code block or inline code, or it is sent as plain text.",
        "Local paths must be inside the workspace.",
    )

    token_env: str = "TELEGRAM_BOT_TOKEN"
    api_base: str = "https://api.telegram.org"
    poll_timeout: int = Field(30, ge=1, le=120)
    text_chunk_limit: int = Field(4000, ge=100, le=4096)
    # more accounts of the channel, each merged over this table (bot/config/agents.py)
    accounts: Mapping[str, TelegramConfig] = Field(default_factory=dict)


class DiscordConfig(ChannelPolicy):
    TITLE: ClassVar[str] = "Discord"
    EDITS: ClassVar[bool] = True
    FORMAT: ClassVar[str] = (
        "Discord renders Markdown natively. Messages are split at 2000 characters, so keep "
        "replies compact and avoid tables."
    )
    DIRECT_CHAT: ClassVar[str] = "user:{}"  # the adapter opens a DM channel for ``user:<id>``

    token_env: str = "DISCORD_BOT_TOKEN"
    api_base: str = ""
    gateway_url: str = ""
    reactions: Literal["off", "ack", "minimal", "extensive"] = "off"
    text_chunk_limit: int = Field(2000, ge=100, le=2000)
    # more accounts of the channel, each merged over this table (bot/config/agents.py)
    accounts: Mapping[str, DiscordConfig] = Field(default_factory=dict)


class SlackConfig(ChannelPolicy):
    TITLE: ClassVar[str] = "Slack"
    EDITS: ClassVar[bool] = True
    FORMAT: ClassVar[str] = (
        "Markdown is converted to Slack mrkdwn: bold, italics, code and links work; headings "
        "and tables do not."
    )

    mode: Literal["socket", "http"] = "socket"
    bot_token_env: str = "SLACK_BOT_TOKEN"
    app_token_env: str = "SLACK_APP_TOKEN"
    signing_secret_env: str = "SLACK_SIGNING_SECRET"
    api_base: str = "https://slack.com/api/"
    listen: str = "127.0.0.1:3000"
    reactions: Literal["off", "ack", "minimal", "extensive"] = "off"
    # more accounts of the channel, each merged over this table (bot/config/agents.py)
    accounts: Mapping[str, SlackConfig] = Field(default_factory=dict)

    @field_validator("listen")
    @classmethod
    def _listen(cls, v: str) -> str:
        parse_listen(v)
        return v

    def optional_secrets(self) -> set[str]:
        """Socket mode needs no signing secret, HTTP mode no app token."""
        return {"signing_secret_env"} if self.mode == "socket" else {"app_token_env"}

    def connection(self) -> dict[str, str]:
        """The token variables, and in HTTP mode the address Slack posts to."""
        own = super().connection()
        return own | {"listen": self.listen} if self.mode == "http" else own


class SignalConfig(ChannelPolicy):
    TITLE: ClassVar[str] = "Signal"
    FORMAT: ClassVar[str] = (
        "Markdown bold, italics, strikethrough and code are converted to Signal text styles; "
        "links are shown as text (url), and headings become bold lines. Avoid tables."
    )
    OWNER_NUMBERS: ClassVar[bool] = True

    account: str = ""
    http_url: str = "http://127.0.0.1:8080"
    api_base: str = ""  # alias of http_url, for symmetry with the other channels
    # more accounts of the channel, each merged over this table (bot/config/agents.py)
    accounts: Mapping[str, SignalConfig] = Field(default_factory=dict)

    def connection(self) -> dict[str, str]:
        """A Signal account is its number (one signal-cli account per number)."""
        return {"account": self.account} if self.account else {}

    @model_validator(mode="after")
    def _account(self) -> SignalConfig:
        if self.enabled and not self.account:
            raise ValueError("channels.signal.account must be set when the channel is enabled")
        return self


class WhatsAppConfig(ChannelPolicy):
    """``[channels.whatsapp]``: an agent the owner created in WhatsApp (Settings > Agents),
    reached through Meta's Agent Platform with its API key.  Only its creator can write to
    it, so every sender is the owner; no groups, no edits (so no live previews)."""

    TITLE: ClassVar[str] = "WhatsApp"
    COMMAND: ClassVar[bool] = True  # chela whatsapp login|logout|status (a linked device)
    FORMAT: ClassVar[str] = (
        "Markdown is converted to WhatsApp text: bold, italics, strikethrough, inline code "
        "and code blocks work; links are shown as text (url); headings become bold lines. "
        "Avoid tables. Long replies are split at 4096 characters."
    )
    AFTER_USER: ClassVar[tuple[str, ...]] = (
        "Sending files on WhatsApp: write a marker with a local path inside the workspace:",
        "[IMAGE:<path>] for JPEG or PNG pictures, [DOCUMENT:<path>] for any file, "
        "[VIDEO:<path>], [AUDIO:<path>]. Links cannot be sent as files.",
        "Use one marker per attachment, outside code blocks; the files are sent after the text.",
    )

    transport: Literal["agent_platform", "linked_device"] = "agent_platform"
    api_key_env: str = "WHATSAPP_AGENT_API_KEY"
    api_base: str = "https://api.whatsapp.com/agent/v1"
    poll_timeout: int = Field(20, ge=1, le=25)
    text_chunk_limit: int = Field(4096, ge=100, le=4096)
    # the platform's budget per method (sends, statuses, media each) and for polls, over a
    # rolling window; lower them to share a key's budget, never raise them
    sends_per_minute: int = Field(12, ge=1, le=12)
    polls_per_minute: int = Field(15, ge=1, le=15)
    rate_window: float = Field(60.0, gt=0, le=60.0)  # seconds (tests shorten it)
    group_policy: Literal["open", "allowlist", "disabled"] = "disabled"
    # more accounts of the channel, each merged over this table (bot/config/agents.py)
    accounts: Mapping[str, WhatsAppConfig] = Field(default_factory=dict)

    def optional_secrets(self) -> set[str]:
        """A linked device (``transport = "linked_device"``) has a session, not an API key."""
        return {"api_key_env"} if self.transport == "linked_device" else set()

    def needs(self) -> tuple[str, str, str] | None:
        """A linked device needs neonize (and through it the system's libmagic1)."""
        if self.transport == "linked_device":
            return "transport", "neonize.aioze.client", "whatsapp"
        return None

    def owner_only(self) -> bool:
        """Only the agent's creator can write to it: every sender is the owner."""
        return self.transport == "agent_platform"


class HttpConfig(Model):
    """``[channels.http]``: the OpenAI-compatible HTTP API (not a messaging channel)."""

    TITLE: ClassVar[str] = "HTTP API"

    enabled: bool = False
    listen: str = "127.0.0.1:8787"
    token_env: str = ""  # "" = a generated token in <state_dir>/http-token
    allowed_origins: list[str] = Field(default_factory=list)  # browser origins allowed to call

    @field_validator("listen")
    @classmethod
    def _listen(cls, v: str) -> str:
        parse_listen(v)
        return v


class ChannelsConfig(Model):
    """One field per channel, in the order every listing shows them; the registry
    (bot/app/channels.py) has one row per field (CONTRIBUTING.md, "Add a channel")."""

    telegram: TelegramConfig = Field(default_factory=TelegramConfig)
    discord: DiscordConfig = Field(default_factory=DiscordConfig)
    slack: SlackConfig = Field(default_factory=SlackConfig)
    signal: SignalConfig = Field(default_factory=SignalConfig)
    whatsapp: WhatsAppConfig = Field(default_factory=WhatsAppConfig)
    http: HttpConfig = Field(default_factory=HttpConfig)

    def required_secrets(self, name: str) -> dict[str, str]:
        """The secrets channel ``name`` cannot start without, as ``{key: env var}`` (for
        Slack only the ones its mode uses; none for the HTTP API or an unknown name)."""
        section = getattr(self, name) if name in SECTIONS else None
        return section.required_secrets() if isinstance(section, ChannelPolicy) else {}


def _sections() -> dict[str, type[ChannelPolicy] | type[HttpConfig]]:
    out: dict[str, type[ChannelPolicy] | type[HttpConfig]] = {}
    for name, info in ChannelsConfig.model_fields.items():
        cls = info.annotation
        if not (isinstance(cls, type) and issubclass(cls, (ChannelPolicy, HttpConfig))):
            raise TypeError(f"channels.{name}: not a channel section")
        out[name] = cls
    return out


SECTIONS = _sections()  # every [channels.<name>] section's class, in the order of the schema
CONFIGURED = tuple(SECTIONS)  # telegram, discord, slack, signal, http
MESSAGING = tuple(n for n, c in SECTIONS.items() if issubclass(c, ChannelPolicy))  # not http
TARGETS = ("none", "last", *MESSAGING)  # where a heartbeat or a cron job's output may go
# the order `chela onboard` offers them in: WhatsApp first (its official Agent Platform needs
# no phone number, server or public address of its own), then the schema's
OFFERED = ("whatsapp", *(n for n in CONFIGURED if n != "whatsapp"))


def title(name: str) -> str:
    """How people write channel ``name`` ("HTTP API"); an unknown name capitalised."""
    cls = SECTIONS.get(name)
    return cls.TITLE if cls is not None else name.capitalize()


def platform(name: str) -> type[ChannelPolicy] | None:
    """The section class of messaging channel ``name`` (exact id), whose class attributes say
    what differs per platform (TITLE, EDITS, FORMAT, AFTER_USER, DIRECT_CHAT, OWNER_NUMBERS);
    None for any other name (the HTTP API, the terminal, an unknown id)."""
    cls = SECTIONS.get(name)
    return cls if cls is not None and issubclass(cls, ChannelPolicy) else None


def check_target(value: str) -> str:
    """``value`` when it is a heartbeat/cron target, else ValueError."""
    if value not in TARGETS:
        raise ValueError(f"unknown target {value!r}: use one of {', '.join(TARGETS)}")
    return value
