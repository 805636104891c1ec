"""The small pieces of the prompt: tool order and lines, the owner label, the Runtime line."""

from __future__ import annotations

import hashlib
import hmac
import json

from .context import PromptContext, ToolSpec

CORE_TOOL_ORDER = (
    "read",
    "write",
    "edit",
    "apply_patch",
    "grep",
    "find",
    "ls",
    "exec",
    "process",
    "web_search",
    "web_fetch",
    "browser",
    "canvas",
    "nodes",
    "cron",
    "message",
    "gateway",
    "agents_list",
    "sessions_list",
    "sessions_history",
    "sessions_send",
    "sessions_spawn",
    "subagents",
    "session_status",
    "image",
)
_CORE_INDEX = {n: i for i, n in enumerate(CORE_TOOL_ORDER)}
HARDWARE_TOOLS = frozenset(
    {
        "gpio_read",
        "gpio_write",
        "arduino_upload",
        "hardware_memory_map",
        "hardware_board_info",
        "hardware_memory_read",
        "hardware_capabilities",
    }
)
TOOL_LINE_MAX = 160


def effective_mode(ctx: PromptContext) -> str:
    """Sub-agent and cron sessions never get more than the minimal prompt."""
    if ctx.session_kind in ("subagent", "cron") and ctx.mode == "full":
        return "minimal"
    return ctx.mode


def ordered_tools(tools: tuple[ToolSpec, ...] | list[ToolSpec]) -> list[ToolSpec]:
    """Core tools in their fixed order, then the rest by lower-cased name; names
    de-duplicated case-insensitively (first spelling wins)."""
    seen: set[str] = set()
    uniq: list[ToolSpec] = []
    for t in tools:
        key = t.name.strip().lower()
        if not key or key in seen:
            continue
        seen.add(key)
        uniq.append(t)
    core = sorted(
        (t for t in uniq if t.name.strip().lower() in _CORE_INDEX),
        key=lambda t: _CORE_INDEX[t.name.strip().lower()],
    )
    rest = sorted(
        (t for t in uniq if t.name.strip().lower() not in _CORE_INDEX),
        key=lambda t: (t.name.strip().lower(), t.name),
    )
    return core + rest


def tool_line(tool: ToolSpec, cut: bool) -> str:
    summary = " ".join(tool.summary.split())
    name = tool.name.strip()
    line = f"- {name}: {summary}" if summary else f"- {name}"
    if cut and len(line) > TOOL_LINE_MAX:
        line = line[: TOOL_LINE_MAX - 1] + "…"
    return line


def tool_schema_json(tool: ToolSpec) -> str:
    return json.dumps(tool.parameters, sort_keys=True, ensure_ascii=False)


def owner_label(number: str, display: str, secret: str) -> str:
    number = number.strip()
    if display != "hash":
        return number
    if secret:
        return hmac.new(secret.encode(), number.encode(), hashlib.sha256).hexdigest()[:12]
    return hashlib.sha256(number.encode()).hexdigest()[:12]


def runtime_line(ctx: PromptContext) -> str:
    rt = ctx.runtime
    parts: list[tuple[str, str]] = [
        ("agent", ctx.agent_id),
        ("host", rt.host),
        ("repo", rt.repo),
    ]
    if rt.os:
        parts.append(("os", f"{rt.os} ({rt.arch})" if rt.arch else rt.os))
    parts += [
        ("python", rt.python),
        ("model", ctx.model),
        ("default_model", ctx.default_model),
        ("shell", rt.shell),
    ]
    channel = ctx.channel.strip().lower()
    if channel:
        parts.append(("channel", channel))
        caps = sorted({c.strip().lower() for c in ctx.capabilities if c.strip()})
        parts.append(("capabilities", ",".join(caps) if caps else "none"))
    parts.append(("thinking", ctx.thinking.strip() or "off"))
    return "Runtime: " + " | ".join(
        f"{k}={' '.join(str(v).split())}" for k, v in parts if str(v).strip()
    )


def _one_line(value: str) -> str:
    return " ".join(value.split())
