"""The TOML configuration: schema, validation and loading (the bottom of ``bot/``).

This is the one place that knows the config keys.  Every error names the
TOML key path, e.g. ``channels.telegram.dm_policy``.  Secrets are never read from the
TOML itself: a key ending in ``_env`` names the environment variable that holds one.

The package imports nothing of ``bot`` (docs/architecture.md rule 2, checked by
tests/architecture/test_config_is_the_bottom.py); its modules, by job:

* ``schema`` -- :class:`Config` and the smaller sections; ``agent``, ``tools`` and
  ``channels`` -- the larger sections (``channels`` also names the channels and their secrets);
* ``base`` -- the strict section base and the id-list checks;
* ``durations`` -- ``"30m"`` to seconds; ``clock`` -- ``HH:MM`` and time zones;
* ``load`` -- path, TOML, validation errors with the key path;
* ``secrets`` -- the registry of every value taken from the environment;
* ``describe`` -- the risky-but-valid settings ``chela check`` warns about.
* ``agents`` -- ``[agents.<id>]``, channel accounts, their views and checks; ``bindings`` --
  ``[[bindings]]`` (which agent answers what) and their checks; ``heartbeat`` -- ``[heartbeat]``;
* ``providers`` -- what a model string's prefix says: litellm routes it, its key variable.
"""

from __future__ import annotations

from channels.base import DEFAULT_ACCOUNT

from .agent import AgentConfig, AgentOverrides, CompactionConfig, FallbackModel
from .agents import (
    account_toml_key,
    agent_config,
    agent_ids,
    channel_accounts,
)
from .bindings import Binding
from .channels import (
    CONFIGURED,
    MESSAGING,
    TARGETS,
    ChannelPolicy,
    ChannelsConfig,
    DiscordConfig,
    HttpConfig,
    SignalConfig,
    SlackConfig,
    TelegramConfig,
)
from .describe import config_warnings
from .durations import parse_duration
from .load import ConfigError, load_config, parse_config, resolve_config_path
from .heartbeat import ActiveHours, HeartbeatConfig
from .schema import (
    Config,
    CronJob,
    DeliveryConfig,
    MediaConfig,
    OwnerConfig,
    PluginConfig,
    SessionConfig,
)
from .tools import (
    DEFAULT_EXEC_ALLOW,
    DEFAULT_TOOLS,
    OWNER_ONLY_TOOLS,
    ExecConfig,
    McpConfig,
    McpServerConfig,
    ToolsConfig,
    WebConfig,
)

__all__ = [
    "CONFIGURED",
    "DEFAULT_ACCOUNT",
    "DEFAULT_EXEC_ALLOW",
    "DEFAULT_TOOLS",
    "MESSAGING",
    "OWNER_ONLY_TOOLS",
    "TARGETS",
    "ActiveHours",
    "AgentConfig",
    "AgentOverrides",
    "Binding",
    "ChannelPolicy",
    "ChannelsConfig",
    "CompactionConfig",
    "Config",
    "ConfigError",
    "CronJob",
    "DeliveryConfig",
    "DiscordConfig",
    "ExecConfig",
    "FallbackModel",
    "HeartbeatConfig",
    "HttpConfig",
    "McpConfig",
    "McpServerConfig",
    "MediaConfig",
    "OwnerConfig",
    "PluginConfig",
    "SessionConfig",
    "SignalConfig",
    "SlackConfig",
    "TelegramConfig",
    "ToolsConfig",
    "WebConfig",
    "account_toml_key",
    "agent_config",
    "agent_ids",
    "channel_accounts",
    "config_warnings",
    "load_config",
    "parse_config",
    "parse_duration",
    "resolve_config_path",
]
