"""The channel registry: one row per channel, naming its config section, its adapter class and
the typed function from the section to the adapter's Settings.  The rest of the core asks this
table instead of spelling channel names.

Adding a channel is one package under ``channels/`` (adapter + a frozen ``Settings`` whose
``open()`` builds the adapter), one section class in ``bot/config/channels.py`` and one row
here; ``tests/architecture/test_channel_checklist.py`` names any step left out (see
CONTRIBUTING.md, "Add a channel").

What is pure data about a channel lives with its section in the config (bot/config/channels.py:
the channel names, which are messaging channels, titles, the secrets a section needs, whether
the platform edits messages, the prompt's formatting hint, how a direct chat is addressed:
``bot.config.channels.platform(name)``, which the layers below the app read).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

from bot.app import probes
from bot.config.base import Model
from bot.config import agent_ids, channel_accounts
from bot.config.channels import (
    CONFIGURED,
    MESSAGING,
    ChannelPolicy,
    DiscordConfig,
    HttpConfig,
    SignalConfig,
    SlackConfig,
    TelegramConfig,
    WhatsAppConfig,
    env_fields,
    title,
)
from bot.app.channel_ports import cursor_ports, media_fetch
from channels.base import DEFAULT_ACCOUNT, account_key, cursor_key, labels

if TYPE_CHECKING:
    from bot.config import Config
    from bot.store import Store
    from channels.base import Channel
    from channels.discord.settings import DiscordSettings
    from channels.http.settings import HttpSettings, Mounts
    from channels.signal.settings import SignalSettings
    from channels.slack.settings import SlackSettings
    from channels.telegram.settings import TelegramSettings
    from channels.whatsapp.settings import WhatsAppSettings

__all__ = [
    "CONFIGURED",
    "MESSAGING",
    "SPECS",
    "TERMINAL_ADAPTER",
    "AdapterSettings",
    "ChannelSpec",
    "Given",
    "Setting",
    "env_fields",
    "labels",
    "title",
]

SectionT = TypeVar("SectionT", bound=Model)


@dataclass(frozen=True)
class Setting:
    """A key of the channel's section that ``chela onboard`` asks for, besides its secrets
    and the owner's id: ``flag`` is the onboard flag's name (``--signal-account`` is
    ``signal_account``), ``question`` what is asked ("" = a flag only), ``needed`` why the
    channel cannot go without it ("" = optional), ``always``: written even when empty,
    ``help``: the flag's help when it is not the question."""

    key: str
    flag: str
    question: str = ""
    default: str = ""
    needed: str = ""
    always: bool = True
    help: str = ""
    notes: tuple[tuple[str, str], ...] = ()  # (value, what onboarding says when it is chosen)

    def flag_help(self, channel: str) -> str:
        """The onboard flag's ``--help`` line."""
        text = self.help or self.question
        if self.default:
            text += f" (default {self.default})"
        return text + (f" (needed for {channel})" if self.needed else "")


@dataclass(frozen=True)
class Given(Generic[SectionT]):
    """What a row's ``make_settings`` reads: the config, the channel's own section, its
    secrets by key (each checked non-empty), the media dir, and what the app adds."""

    cfg: Config
    section: SectionT
    secrets: Mapping[str, str]
    media_dir: Path
    mounts: Mounts | None = None  # the HTTP channel's sub-applications (the Control UI)
    account: str = DEFAULT_ACCOUNT  # which account of the channel ``section`` is
    store: Store | None = None  # the daemon's (a poll-based account's cursor); None: send-only


class AdapterSettings(Protocol):
    """An adapter's Settings (``channels/<name>/settings.py``): a frozen value whose
    ``open()`` builds the adapter from it."""

    def open(self) -> Channel: ...


@dataclass(frozen=True)
class ChannelSpec(Generic[SectionT]):
    name: str  # the channel id, its config member (`[channels.<name>]`) and session-key part
    section: type[SectionT]  # its section class in bot/config/channels.py
    adapter: Callable[[], type[Channel]]  # its adapter class, imported when asked (SDKs are heavy)
    make_settings: Callable[[Given[SectionT]], AdapterSettings]  # section → adapter Settings
    owner_id_hint: str = ""  # what `chela onboard` asks for as the owner's id
    settings: tuple[Setting, ...] = ()  # what `chela onboard` asks for besides
    # `chela doctor`'s authenticated request (bot.app.probes)
    # (session, config, the account's section, the account's name)
    probe: Callable[[Any, Config, Any, str], Awaitable[probes.Probe]] | None = None
    loggers: tuple[str, ...] = ()  # its SDK's loggers, too chatty at INFO (set to WARNING)

    @property
    def title(self) -> str:
        """How people write it (the section's TITLE)."""
        return title(self.name)

    @property
    def messaging(self) -> bool:
        """A chat platform (heartbeat/cron target, pairing, group rules)."""
        return self.name in MESSAGING

    def section_of(self, cfg: Config) -> SectionT:
        """This channel's section of ``cfg`` (``cfg.channels.<name>``)."""
        section = getattr(cfg.channels, self.name)
        if not isinstance(section, self.section):
            raise TypeError(f"channels.{self.name} is not a {self.section.__name__}")
        return section

    def account_section(self, cfg: Config, account: str = DEFAULT_ACCOUNT) -> SectionT:
        """The section of one account: the channel's own for ``default``, else the
        account's table merged over it.  Raises ``ValueError`` for an account the config
        does not have (or has disabled)."""
        if account == DEFAULT_ACCOUNT:
            return self.section_of(cfg)
        section = channel_accounts(cfg, self.name).get(account)
        if not isinstance(section, self.section):
            raise ValueError(f"channels.{self.name} has no enabled account {account!r}")
        return section

    def accounts(self, cfg: Config) -> list[str]:
        """The names of this channel's enabled accounts, ``default`` first (the HTTP API
        has only its own table)."""
        if self.messaging:
            return list(channel_accounts(cfg, self.name))
        return [DEFAULT_ACCOUNT] if getattr(self.section_of(cfg), "enabled", False) else []

    def secrets(self, cfg: Config, account: str = DEFAULT_ACCOUNT) -> dict[str, str]:
        """The secrets this channel's ``account`` cannot start without, as ``{key: env var}``."""
        if account == DEFAULT_ACCOUNT:
            return cfg.channel_secrets(self.name)
        section = self.account_section(cfg, account)
        return section.required_secrets() if isinstance(section, ChannelPolicy) else {}

    def adapter_class(self) -> type[Channel]:
        return self.adapter()

    def build(
        self,
        cfg: Config,
        mounts: Mounts | None = None,
        account: str = DEFAULT_ACCOUNT,
        store: Store | None = None,
    ) -> Channel:
        """The adapter of one account from its section.  Raises ``SecretMissing`` naming
        the env var."""
        where = f"channels.{self.name}"
        if account != DEFAULT_ACCOUNT:
            where += f".accounts.{account}"
        secret: dict[str, str] = {}
        for key, env in self.secrets(cfg, account).items():
            secret[key] = cfg.secret(env)
            if not secret[key]:
                raise SecretMissing(
                    f"{where}.{key}: environment variable {env or '(unset)'} is empty"
                )
        section = self.account_section(cfg, account)
        given = Given(cfg, section, secret, cfg.media_dir, mounts, account, store)
        return self.make_settings(given).open()


class SecretMissing(Exception):
    pass


# ------------------------------------------------------------------------- the adapters
def telegram_menu() -> list[tuple[str, str]]:
    """The chat's command menu, read when the adapter publishes it (after its first poll:
    the command table imports most of the core, which the first poll does not need)."""
    from bot.conversation.commands import menu

    return menu()


def _telegram_adapter() -> type[Channel]:
    from channels.telegram import TelegramChannel

    return TelegramChannel


def _telegram(g: Given[TelegramConfig]) -> TelegramSettings:
    from channels.telegram.settings import TelegramSettings

    return TelegramSettings(
        token=g.secrets["token_env"],
        api_base=g.section.api_base,
        media_dir=g.media_dir,
        poll_timeout=g.section.poll_timeout,
        chunk_limit=g.section.text_chunk_limit,
        commands=telegram_menu,
        account=g.account,
    )


def _discord_adapter() -> type[Channel]:
    from channels.discord import DiscordChannel

    return DiscordChannel


def _discord(g: Given[DiscordConfig]) -> DiscordSettings:
    from channels.discord.settings import DiscordSettings

    return DiscordSettings(
        token=g.secrets["token_env"],
        api_base=g.section.api_base,
        gateway_url=g.section.gateway_url,
        media_dir=g.media_dir,
        chunk_limit=g.section.text_chunk_limit,
        account=g.account,
    )


def _slack_adapter() -> type[Channel]:
    from channels.slack import SlackChannel

    return SlackChannel


def _slack(g: Given[SlackConfig]) -> SlackSettings:
    from channels.slack.settings import SlackSettings

    return SlackSettings(
        mode=g.section.mode,
        bot_token=g.secrets["bot_token_env"],
        app_token=g.secrets.get("app_token_env", ""),
        signing_secret=g.secrets.get("signing_secret_env", ""),
        api_base=g.section.api_base,
        listen=g.section.listen,
        media_dir=g.media_dir,
        chunk_limit=g.section.text_chunk_limit,
        account=g.account,
    )


def _signal_adapter() -> type[Channel]:
    from channels.signal import SignalChannel

    return SignalChannel


def _signal(g: Given[SignalConfig]) -> SignalSettings:
    from channels.signal.settings import SignalSettings

    return SignalSettings(
        account=g.section.account,
        http_url=g.section.api_base or g.section.http_url,
        media_dir=g.media_dir,
        chunk_limit=g.section.text_chunk_limit,
        account_name=g.account,
    )


def _whatsapp_adapter() -> type[Channel]:
    from channels.whatsapp import WhatsAppChannel

    return WhatsAppChannel


def _whatsapp(g: Given[WhatsAppConfig]) -> WhatsAppSettings:
    from bot.app.lock import StateLock
    from channels.whatsapp.linked.session import lock_name, session_path
    from channels.whatsapp.settings import WhatsAppSettings

    w = g.section
    old_file = g.cfg.agent.state_dir / "whatsapp" / f"{g.account}.offset"  # before the store
    load, save = cursor_ports(g.store, cursor_key("whatsapp", g.account), old_file)
    # a linked device: its session, and who wrote to it (bot/app/lock.py, the store)
    session_db = session_path(g.cfg.agent.state_dir, g.account)
    memory_key = f"whatsapp.linked.{account_key('whatsapp', g.account)}"
    return WhatsAppSettings(
        api_key=g.secrets.get("api_key_env", ""),  # none on a linked device
        api_base=w.api_base,
        load_cursor=load,
        save_cursor=save,
        fetch=media_fetch(g.cfg.tools.web.allow_private_hosts),
        transport=w.transport,
        poll_timeout=w.poll_timeout,
        chunk_limit=w.text_chunk_limit,
        per_window=w.sends_per_minute,
        polls_per_window=w.polls_per_minute,
        window=w.rate_window,
        account=g.account,
        session_db=session_db,
        session_lock=StateLock(session_db.parent, lock_name(session_db)),
        load_memory=lambda: g.store.get(memory_key) if g.store else None,
        save_memory=lambda v: g.store.put(memory_key, v) if g.store else None,
        owners=(*w.allow_from, *g.cfg.owner.numbers),
        group_policy=w.group_policy,
        groups=(*w.groups, *w.owner_groups),
    )


def _http_adapter() -> type[Channel]:
    from channels.http import HttpChannel

    return HttpChannel


def _http(g: Given[HttpConfig]) -> HttpSettings:
    from bot.app.http_token import ensure_http_token
    from channels.http.settings import HttpSettings
    from channels.util import parse_listen

    h = g.section
    host, port = parse_listen(h.listen)
    # always a token; an unset token_env raises ConfigError, which start() lets through
    token = ensure_http_token(g.cfg)
    hint = f"in ${h.token_env}" if h.token_env else f"in {g.cfg.http_token_path}"
    return HttpSettings(
        host=host,
        port=port,
        token=token,
        model_name=f"chela/{g.cfg.agent.id}",
        more_models=tuple(f"chela/{a}" for a in agent_ids(g.cfg)[1:]),
        allowed_origins=tuple(h.allowed_origins),
        token_hint=hint,
        mounts=g.mounts,
    )


def _rows(*specs: ChannelSpec[Any]) -> dict[str, ChannelSpec[Any]]:
    return {s.name: s for s in specs}


SPECS: dict[str, ChannelSpec[Any]] = _rows(
    ChannelSpec(
        "telegram",
        TelegramConfig,
        _telegram_adapter,
        _telegram,
        loggers=("telegram",),
        owner_id_hint="your numeric Telegram user id",
        settings=(
            Setting(
                "api_base",
                "telegram_api_base",
                always=False,
                help="a self-hosted Telegram Bot API server (default https://api.telegram.org)",
            ),
        ),
        probe=probes.telegram,
    ),
    ChannelSpec(
        "discord",
        DiscordConfig,
        _discord_adapter,
        _discord,
        loggers=("discord",),
        owner_id_hint="your numeric Discord user id (Developer Mode > Copy User ID)",
        probe=probes.discord,
    ),
    ChannelSpec(
        "slack",
        SlackConfig,
        _slack_adapter,
        _slack,
        loggers=("slack_bolt", "slack_sdk"),
        owner_id_hint="your Slack member id (U...)",
        probe=probes.slack,
    ),
    ChannelSpec(
        "signal",
        SignalConfig,
        _signal_adapter,
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
    ),
    ChannelSpec(
        "whatsapp",
        WhatsAppConfig,
        _whatsapp_adapter,
        _whatsapp,
        # the platform lets only the agent's creator write: the creator is the owner
        owner_id_hint="nobody to name: only you, the agent's creator, can write to it",
        settings=(
            Setting(
                "transport",
                "whatsapp_transport",
                "transport: agent_platform (official: an agent from WhatsApp > Settings > "
                "Agents) or linked_device (unofficial: a phone's linked device)",
                default="agent_platform",
                help="how Chela reaches WhatsApp: agent_platform (official; an agent you "
                "create in WhatsApp > Settings > Agents) or linked_device (unofficial)",
                notes=(("linked_device", probes.LINKED_DEVICE_NOTE),),
            ),
            Setting(
                "api_base",
                "whatsapp_api_base",
                always=False,
                help="another Agent Platform address (default https://api.whatsapp.com/agent/v1)",
            ),
        ),
        probe=probes.whatsapp,
    ),
    ChannelSpec("http", HttpConfig, _http_adapter, _http),
)


def _terminal_adapter() -> type[Channel]:
    from channels.terminal import TerminalChannel

    return TerminalChannel


TERMINAL_ADAPTER = _terminal_adapter  # `chela chat`: no config section


def channel_class(name: str) -> type[Channel]:
    """The adapter class of a channel id (imported on demand: platform SDKs are heavy)."""
    if name == "terminal":
        return TERMINAL_ADAPTER()
    return SPECS[name].adapter_class()


def build_channel(
    cfg: Config,
    name: str,
    *,
    mounts: Mounts | None = None,
    account: str = DEFAULT_ACCOUNT,
    store: Store | None = None,
) -> Channel:
    """The adapter of one account of a channel, from its config section (``mounts``: the
    sub-applications the HTTP channel serves beside its API).  Raises ``SecretMissing``
    naming the env var."""
    spec = SPECS.get(name)
    if spec is None:
        raise ValueError(f"channel {name} is not built from the config")
    return spec.build(cfg, mounts, account, store)


def enabled_channels(cfg: Config) -> list[str]:
    return [name for name, spec in SPECS.items() if spec.section_of(cfg).enabled]


def enabled_accounts(cfg: Config) -> list[tuple[str, str]]:
    """Every enabled (channel, account), in the config's order: each is its own adapter
    (its own token, connection, owner and pairing list).  An account that sets
    ``enabled`` runs whatever its channel's own table says."""
    return [(name, acct) for name, spec in SPECS.items() for acct in spec.accounts(cfg)]


def enabled_labels(cfg: Config) -> list[str]:
    """Every enabled channel account as :func:`labels` names it."""
    return list(labels(account_key(n, a) for n, a in enabled_accounts(cfg)).values())
