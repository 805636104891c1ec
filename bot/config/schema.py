"""The whole config (:class:`Config`) and its smaller sections: session, heartbeat, owner,
delivery, media, plugins, cron.  The larger sections have modules of their own (agent, tools,
channels)."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, PrivateAttr, field_validator, model_validator

from .agent import AgentConfig, AgentOverrides
from .backup import BackupConfig
from .outage import OutageConfig
from .base import Model, as_strs, ids_only
from .bindings import Binding
from .channels import ChannelsConfig, check_target
from .heartbeat import HeartbeatConfig
from .memory import MemoryConfig
from .durations import parse_duration
from .env_values import Secrets, collect, env_names
from .tools import McpConfig, ToolsConfig
from .triggers import HookConfig, MailConfig
from .ui import UiConfig


class SessionConfig(Model):
    dm_scope: Literal["main", "per-peer", "per-channel-peer"] = "main"
    max_concurrent_turns: int = Field(8, ge=1, le=1000)


class OwnerConfig(Model):
    numbers: list[str] = Field(default_factory=list)
    display: Literal["raw", "hash"] = "raw"
    hash_secret_env: str = ""

    @field_validator("numbers", mode="before")
    @classmethod
    def _strs(cls, v: Any) -> Any:
        return as_strs(v)

    @field_validator("numbers")
    @classmethod
    def _ids(cls, v: list[str]) -> list[str]:
        return ids_only(v, "owner numbers")


class DeliveryConfig(Model):
    """``[delivery]``: how long the outbox keeps retrying a message the
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


class MediaConfig(Model):
    """``[media]``: images, voice notes and files reaching the model."""

    vision: Literal["auto", "on", "off"] = "auto"  # auto = litellm's supports_vision for the model
    image_max_px: int = Field(1568, ge=64, le=8192)  # long side of an image sent to the model
    images_in_history: int = Field(2, ge=0, le=50)  # user turns that still carry image bytes
    transcription_model: str = ""  # e.g. "openai/whisper-1"; "" = voice notes are not heard
    transcription_api_base: str = ""  # "" = agent.api_base
    # the env var holding the transcription endpoint's own key: "" = the
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


class PluginConfig(Model):
    module: str


class CronJob(Model):
    """A ``[[cron]]`` job: exactly one of ``at``, ``every``, ``schedule``."""

    name: str
    prompt: str
    at: str = ""  # ISO 8601; without an offset in agent.timezone
    every: str = ""  # a duration, at least 10 s
    schedule: str = ""  # crontab (5 fields) in agent.timezone
    catch_up: str = "1h"  # 0s = never catch up
    target: str = "last"
    to: str = ""
    agent: str = ""  # the agent whose turn it is; "" = the default agent

    @model_validator(mode="before")
    @classmethod
    def _no_in(cls, data: Any) -> Any:
        if isinstance(data, dict) and "in" in data:
            raise ValueError(
                "'in' is not accepted in [[cron]] (a relative time in a file has no 'now'): "
                'use at = "YYYY-MM-DDTHH:MM" instead'
            )
        return data

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not re.fullmatch(r"[A-Za-z0-9_.-]{1,64}", v):
            raise ValueError("use letters, digits, '.', '-' or '_'")
        return v

    @field_validator("target")
    @classmethod
    def _target(cls, v: str) -> str:
        return check_target(v)

    @field_validator("at")
    @classmethod
    def _at(cls, v: str) -> str:
        if v:
            from datetime import datetime

            try:
                datetime.fromisoformat(v.strip())
            except ValueError:
                raise ValueError(
                    f"bad time {v!r}: use an ISO 8601 date-time such as 2026-11-27T07:30"
                ) from None
        return v

    @field_validator("every")
    @classmethod
    def _every(cls, v: str) -> str:
        if v and parse_duration(v) < 10:
            raise ValueError(f"every = {v!r} is too short: at least 10s")
        return v

    @field_validator("catch_up")
    @classmethod
    def _catch_up(cls, v: str) -> str:
        parse_duration(v)
        return v

    @field_validator("schedule")
    @classmethod
    def _schedule(cls, v: str) -> str:
        if not v:
            return v
        from apscheduler.triggers.cron import CronTrigger

        try:
            CronTrigger.from_crontab(v)
        except ValueError as e:
            raise ValueError(f"bad crontab expression {v!r}: {e}") from None
        return v

    @model_validator(mode="after")
    def _one_kind(self) -> CronJob:
        given = [k for k in ("at", "every", "schedule") if getattr(self, k)]
        if len(given) != 1:
            raise ValueError(
                f"job {self.name!r} needs exactly one of at, every or schedule"
                + (f" (has {', '.join(given)})" if given else "")
            )
        return self

    @property
    def kind(self) -> str:
        return "at" if self.at else "every" if self.every else "schedule"

    @property
    def spec(self) -> str:
        return self.at or self.every or self.schedule

    @property
    def catch_up_seconds(self) -> float:
        return parse_duration(self.catch_up)


class Config(Model):
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
    ui: UiConfig = Field(default_factory=UiConfig)
    backup: BackupConfig = Field(default_factory=BackupConfig)
    outage: OutageConfig = Field(default_factory=OutageConfig)
    memory: MemoryConfig = Field(default_factory=MemoryConfig)  # search by meaning
    # more agents ([agents.<id>]) and which of them answers what ([[bindings]]): bot/config/agents.py
    agents: dict[str, AgentOverrides] = Field(default_factory=dict)
    bindings: list[Binding] = Field(default_factory=list)
    hooks: list[HookConfig] = Field(default_factory=list)  # signed webhooks (triggers.py)
    mail: list[MailConfig] = Field(default_factory=list)  # IMAP accounts watched (triggers.py)

    # where it was loaded from (not a TOML key)
    source: Path | None = Field(default=None, exclude=True)
    _secrets: Secrets | None = PrivateAttr(default=None)

    # -- secrets ---------------------------------------------------------------------
    @staticmethod
    def secret(env_name: str) -> str:
        """The value of a secret named by an ``*_env`` key ("" when unset)."""
        return os.environ.get(env_name, "") if env_name else ""

    def channel_secrets(self, name: str) -> dict[str, str]:
        """The secrets a messaging channel cannot start without, as ``{key: env var}``
        (for Slack only the ones its mode uses); from its section (bot/config/channels.py)."""
        return self.channels.required_secrets(name)

    def secret_env_names(self) -> list[str]:
        """Every environment variable the config names as a secret (bot/config/env_values.py)."""
        return env_names(self)

    @property
    def secrets(self) -> Secrets:
        """The secrets registry of bot/config/env_values.py, filled by ``parse_config``."""
        if self._secrets is None:
            self._secrets = collect(self.secret_env_names())
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
