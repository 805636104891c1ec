"""``[agent]``: the model, the workspace and state dirs, prompts, limits, fallbacks; and
``[agents.<id>]``, the tables of more agents (read through bot/config/agents.py)."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, field_validator

from .base import Model
from .clock import check_zone
from .durations import parse_duration
from .heartbeat import HeartbeatConfig
from .memory import MemoryConfig
from .tools import ToolsConfig


def window_tokens(v: int) -> int:
    """A context window: 0 (from the model's metadata) or at least 1000 tokens."""
    if 0 < v < 1000:
        raise ValueError("use 0 (from the model's metadata) or at least 1000 tokens")
    return v


class CompactionConfig(Model):
    """``[agent.compaction]``: token-budgeted history and summaries."""

    enabled: bool = True
    context_window: int = Field(0, ge=0)  # 0 = from the model's metadata, else 32000
    threshold: float = Field(0.8, gt=0.1, le=1.0)
    keep_recent_tokens: int = Field(8000, ge=0)
    summary_max_tokens: int = Field(1200, ge=64)
    model: str = ""  # "" = agent.model

    @field_validator("context_window")
    @classmethod
    def _window(cls, v: int) -> int:
        return window_tokens(v)


class FallbackModel(Model):
    """An entry of ``agent.fallbacks`` (or ``[agent.models]``) written as a table."""

    model: str
    api_base: str = ""
    api_key_env: str = ""
    # the model's context window for compaction when a session uses it;
    # 0 = from the model's metadata, else agent.compaction.context_window, else 32000
    context_window: int = Field(0, ge=0)

    @field_validator("context_window")
    @classmethod
    def _window(cls, v: int) -> int:
        return window_tokens(v)

    @field_validator("model")
    @classmethod
    def _model(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("empty model string")
        return v.strip()


class AgentConfig(Model):
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
    # tried in order when the model before fails after its retries
    # (each a "provider/model" string or a table with model, api_base, api_key_env)
    fallbacks: list[FallbackModel] = Field(default_factory=list)
    cooldown: str = "5m"  # a model that failed is skipped this long, then tried again
    daily_cost_limit_usd: float = Field(0, ge=0)  # all turns of a day; 0 = no limit
    guest_daily_cost_limit_usd: float = Field(0, ge=0)  # guests' turns together; 0 = no limit
    # aliases /model may switch a session to ("alias = provider/model" or a table
    # with model, api_base, api_key_env, like a fallback)
    models: dict[str, FallbackModel] = Field(default_factory=dict)
    compaction: CompactionConfig = Field(default_factory=CompactionConfig)

    @field_validator("fallbacks", mode="before")
    @classmethod
    def _fallbacks(cls, v: Any) -> Any:
        if isinstance(v, list):
            return [{"model": f} if isinstance(f, str) else f for f in v]
        return v

    @field_validator("models", mode="before")
    @classmethod
    def _models(cls, v: Any) -> Any:
        if isinstance(v, dict):
            return {k: {"model": m} if isinstance(m, str) else m for k, m in v.items()}
        return v

    def model_aliases(self) -> dict[str, str]:
        """``[agent.models]`` as alias -> model string."""
        return {alias: m.model for alias, m in self.models.items()}

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
        return check_zone(v)


class AgentOverrides(AgentConfig):
    """One ``[agents.<id>]`` table as written: ``model_fields_set`` says which keys it sets.

    A top-level table an agent may have its own of is a field here named as on
    :class:`~bot.config.schema.Config` (``agent_config`` merges every such field)."""

    tools: ToolsConfig | None = None
    heartbeat: HeartbeatConfig | None = None
    memory: MemoryConfig | None = None
