"""Plain data that fully describes one system-prompt build.

The builder is a pure function of a ``PromptContext`` plus what it reads from the
workspace; nothing here touches the network or global state.  Everything that can vary
per channel runtime context is a field, so the cache key is derived from these values.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

PromptMode = Literal["full", "minimal", "none"]
SessionKind = Literal["main", "subagent", "cron", "heartbeat"]


@dataclass(frozen=True)
class ToolSpec:
    """What the prompt (and the model API) needs to know about one tool."""

    name: str
    summary: str
    parameters: dict[str, Any] = field(
        default_factory=lambda: {"type": "object", "properties": {}}, hash=False, compare=False
    )

    def openai_schema(self) -> dict[str, Any]:
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.summary,
                "parameters": self.parameters,
            },
        }


@dataclass(frozen=True)
class RuntimeInfo:
    """Host facts gathered once at start-up by the caller (never by the builder)."""

    host: str = ""
    repo: str = ""
    os: str = ""
    arch: str = ""
    python: str = ""
    shell: str = ""


@dataclass(frozen=True)
class PromptContext:
    # who and where
    agent_id: str = "main"
    workspace: Path = Path(".")
    mode: PromptMode = "full"
    session_kind: SessionKind = "main"
    # model
    model: str = ""
    default_model: str = ""
    thinking: str = "off"
    model_aliases: tuple[tuple[str, str], ...] = ()
    # tools
    tools: tuple[ToolSpec, ...] = ()
    native_tools: bool = True
    reasoning_tags: bool = False
    sandbox_enabled: bool = False
    # time: IANA zone name, "" when unknown
    timezone: str = ""
    # docs / owners / voice
    docs_path: str = ""
    owner_numbers: tuple[str, ...] = ()
    owner_display: Literal["raw", "hash"] = "raw"
    owner_hash_secret: str = ""  # value, not env name; used only to hash
    tts_hint: str = ""
    # heartbeats
    heartbeat_enabled: bool = False
    heartbeat_prompt: str = ""
    # trust: a guest turn gets only AGENTS/SOUL/TOOLS/IDENTITY, no skills, no
    # owner numbers and no project walk, and its Workspace section names its own directory
    trust: Literal["owner", "guest"] = "owner"
    file_root: Path | None = None  # the guest's directory; None = the workspace
    # channel runtime context
    channel: str = ""  # "" = no channel (CLI prompt inspection, sub-agent)
    account: str = ""
    chat_type: Literal["direct", "group", ""] = ""
    group_id: str = ""
    group_title: str = ""
    capabilities: tuple[str, ...] = ()
    reactions: Literal["off", "ack", "minimal", "extensive"] = "off"
    extra_context: str = ""  # Group Chat Context (full) / Subagent Context (minimal) body
    # bootstrap files
    bootstrap_max_chars: int = 20000
    bootstrap_total_max_chars: int = 150000
    compact_context: bool = False
    identity_format: Literal["markdown", "aieos"] = "markdown"
    aieos_path: str = ""
    aieos_inline: str = ""
    project_dir: str = ""
    # host facts
    runtime: RuntimeInfo = RuntimeInfo()
