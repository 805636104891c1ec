"""Shared types for tools: the per-turn context, the tool record and path confinement."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal
from collections.abc import Awaitable, Callable

ExecSecurity = Literal["deny", "allowlist", "ask", "full"]
Trust = Literal["owner", "guest"]

# The outcome of asking the owner to run a held command (exec security "ask"):
# "approved", "denied", "expired" (no answer in time) or "unavailable" (no way to ask).
Approval = Literal["approved", "denied", "expired", "unavailable"]


class ToolError(Exception):
    """A tool failed in a way the model should hear about (becomes ``Error: <message>``)."""


@dataclass(frozen=True)
class ExecPolicy:
    security: ExecSecurity = "allowlist"
    allow: tuple[str, ...] | list[str] = ()
    timeout_seconds: float = 60.0
    max_output: int = 40000
    # OS sandbox: only the turn's file root is writable, $HOME and the
    # ``hidden`` paths (the state dir) are invisible, /proc is private, no network
    # unless ``network``.  ``sandbox=False`` is the owner's explicit opt-out.
    sandbox: bool = True
    network: bool = False
    hidden: tuple[str, ...] = ()


@dataclass(frozen=True)
class ToolContext:
    """Everything a tool may use during one turn.  Built per turn; never shared mutable state.

    ``file_root`` is where this turn's file tools, exec and media markers work: the
    owner's workspace, or a guest's own directory under the state dir.
    """

    file_root: Path
    trust: Trust = "owner"
    session_key: str = ""
    agent_id: str = "main"
    media_dir: Path | None = None
    timezone: str = ""
    model: str = ""
    exec_policy: ExecPolicy = field(default_factory=ExecPolicy)
    # message tool: (channel, to, text) -> short confirmation text
    send_message: Callable[[str, str, str], Awaitable[str]] | None = None
    # sessions_spawn: (task, label) -> the sub-agent's final text
    spawn_subagent: Callable[[str, str], Awaitable[str]] | None = None
    # session_status extras (session key, message count, usage, ...)
    session_info: Callable[[], dict] | None = None
    # cron store: async add(name, schedule, prompt, target, to) / list() / remove(name)
    cron: Any | None = None
    secrets: tuple[str, ...] = ()
    # exec security "ask": hold a command until the owner answers /approve or /deny
    request_approval: Callable[[str], Awaitable[Approval]] | None = None
    # memory_search: the agent's bot.memory.MemoryIndex (owner turns; by words and, with
    # [memory] embedding_model set, by meaning)
    memory: Any | None = None


@dataclass(frozen=True)
class ToolResult:
    """A tool's answer with images beside its text (a browser screenshot).  ``text`` reaches
    the model like any tool result and should name the files; ``images`` (files the tool
    saved) are shown to a model that can see (bot.agent.loop), never to one that cannot."""

    text: str
    images: tuple[Path, ...] = ()


Handler = Callable[[ToolContext, dict], Awaitable["str | ToolResult"]]


@dataclass(frozen=True)
class Tool:
    name: str
    summary: str  # one line, for the Tooling section and the schema description
    parameters: dict[str, Any]
    handler: Handler


def schema(
    properties: dict[str, Any], required: list[str] | tuple[str, ...] = ()
) -> dict[str, Any]:
    out: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        out["required"] = list(required)
    return out


# --------------------------------------------------------------------------------------
# argument helpers


def arg_str(args: dict, key: str, *, required: bool = True, default: str = "") -> str:
    v = args.get(key)
    if v is None:
        if required:
            raise ToolError(f"missing required argument '{key}'")
        return default
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return str(v)
    if not isinstance(v, str):
        raise ToolError(f"argument '{key}' must be a string")
    if required and not v and default == "":
        raise ToolError(f"argument '{key}' must not be empty")
    return v


def arg_int(
    args: dict, key: str, default: int | None = None, *, minimum: int | None = None
) -> int | None:
    v = args.get(key)
    if v is None or v == "":
        return default
    if isinstance(v, bool):
        raise ToolError(f"argument '{key}' must be an integer")
    try:
        n = int(v)
    except (TypeError, ValueError):
        raise ToolError(f"argument '{key}' must be an integer") from None
    if minimum is not None and n < minimum:
        raise ToolError(f"argument '{key}' must be >= {minimum}")
    return n


def arg_bool(args: dict, key: str, default: bool = False) -> bool:
    v = args.get(key)
    if v is None:
        return default
    if isinstance(v, bool):
        return v
    if isinstance(v, str):
        return v.strip().lower() in ("1", "true", "yes", "on")
    return bool(v)


# --------------------------------------------------------------------------------------
# workspace confinement


def resolve_in_workspace(workspace: Path, path: str) -> Path:
    """Resolve ``path`` (relative to the workspace, or absolute) and require it to stay inside.

    Symlinks are followed before the check, so a link pointing out of the workspace is refused.
    """
    if not isinstance(path, str) or not path.strip():
        raise ToolError("a path is required")
    if "\x00" in path:
        raise ToolError("invalid path")
    root = Path(workspace).resolve()
    p = Path(path.strip())
    candidate = p if p.is_absolute() else root / p
    try:
        resolved = Path(os.path.realpath(candidate))
    except (OSError, RuntimeError) as exc:  # symlink loops
        raise ToolError(f"cannot resolve path {path!r}: {exc}") from None
    if resolved != root and not resolved.is_relative_to(root):
        raise ToolError(
            f"path {path!r} is outside the workspace; only files inside {root} can be used"
        )
    return resolved


def display_path(workspace: Path, p: Path) -> str:
    root = Path(workspace).resolve()
    try:
        return p.relative_to(root).as_posix() or "."
    except ValueError:
        return str(p)
