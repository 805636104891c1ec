"""The system-prompt builder (SPEC §2): ``build_prompt(ctx) -> PromptResult``.

A pure function of the ``PromptContext`` and the workspace files it reads.  It never
looks at the clock, the network or global state, so two builds from the same context and
unchanged files are byte-identical.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import os
from dataclasses import dataclass, field
from typing import Any

from . import texts
from .aieos import aieos_name, load_aieos, render_aieos
from .context import PromptContext, ToolSpec
from .skills import load_skills, skill_xml
from .workspace import (
    BOOTSTRAP_ORDER,
    COMPACT_MAX_CHARS,
    Deps,
    LoadedFile,
    fm_value,
    load_bootstrap,
    project_files,
)

log = logging.getLogger(__name__)

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


# --------------------------------------------------------------------------- result types


@dataclass
class SectionReport:
    heading: str
    chars: int


@dataclass
class FileReport:
    name: str
    path: str
    status: str  # ok | truncated | missing | default
    raw_chars: int
    injected_chars: int


@dataclass
class SkillReport:
    name: str
    location: str
    chars: int  # size of its <skill> entry in the prompt


@dataclass
class ToolReport:
    name: str
    line_chars: int  # its line in ## Tooling
    schema_chars: int  # JSON of its function schema (what a native tool API gets)


@dataclass(eq=False)
class PromptResult:
    text: str
    sections: list[SectionReport] = field(default_factory=list)
    files: list[FileReport] = field(default_factory=list)
    deps: dict[str, tuple[int, int] | None] = field(default_factory=dict)
    project_files: list[FileReport] = field(default_factory=list)
    skills: list[SkillReport] = field(default_factory=list)
    tools: list[ToolReport] = field(default_factory=list)
    skills_chars: int = 0  # the whole ## Skills section
    tool_list_chars: int = 0  # the whole ## Tooling section
    tool_schema_chars: int = 0  # sum of ToolReport.schema_chars
    project_context_chars: int = 0
    listed_dirs: tuple[str, ...] = ()  # directories whose listing shaped the prompt
    mode: str = "full"  # effective mode
    identity_source: str = "markdown"  # markdown | aieos

    @property
    def chars(self) -> int:
        return len(self.text)

    @property
    def approx_tokens(self) -> int:
        return len(self.text) // 4

    def to_json(self) -> dict[str, Any]:
        return {
            "prompt": self.text,
            "sections": [{"heading": s.heading, "chars": s.chars} for s in self.sections],
            "files": [
                {
                    "name": f.name,
                    "path": f.path,
                    "status": f.status,
                    "raw_chars": f.raw_chars,
                    "injected_chars": f.injected_chars,
                }
                for f in self.files
            ],
            "chars": self.chars,
            "approx_tokens": self.approx_tokens,
        }


# --------------------------------------------------------------------------- helpers


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


# --------------------------------------------------------------------------- builder


class _Sections:
    def __init__(self) -> None:
        self.items: list[tuple[str, str]] = []

    def add(self, report_heading: str, lines: list[str], heading: str | None = None) -> str:
        body = [ln for ln in lines if ln is not None]
        if heading is not None:
            body = [heading, *body]
        text = "\n".join(body).strip("\n")
        if text:
            self.items.append((report_heading, text))
        return text


def build_prompt(ctx: PromptContext) -> PromptResult:
    mode = effective_mode(ctx)
    workspace = os.path.abspath(os.path.expanduser(str(ctx.workspace)))
    deps: Deps = {}
    out = _Sections()
    result = PromptResult(text="", deps=deps, mode=mode)

    if mode == "none":
        out.add("Identity", [texts.IDENTITY_LINE])
        return _finish(result, out)

    full = mode == "full"
    guest = ctx.trust == "guest"
    per_file = COMPACT_MAX_CHARS if ctx.compact_context else ctx.bootstrap_max_chars
    tools = ordered_tools(ctx.tools)
    names = {t.name.strip().lower() for t in tools}

    # ---- identity source (AIEOS or Markdown) and bootstrap files
    aieos = None
    if ctx.identity_format == "aieos":
        aieos = load_aieos(ctx.aieos_path, ctx.aieos_inline, workspace, deps)
        if aieos is not None:
            body = render_aieos(aieos)
            if not body:
                log.warning("AIEOS identity has nothing to render; using the Markdown files")
                aieos = None
    skip: frozenset[str] = frozenset()
    replacement = None
    if aieos is not None:
        skip = frozenset({"IDENTITY.md", "SOUL.md"})
        path = (
            os.path.abspath(os.path.join(workspace, os.path.expanduser(ctx.aieos_path)))
            if ctx.aieos_path
            else ""
        )
        raw = (
            len(ctx.aieos_inline)
            if not ctx.aieos_path
            else len(json.dumps(aieos, ensure_ascii=False))
        )
        replacement = ("SOUL.md", LoadedFile("Identity", path, "ok", raw, body))
        result.identity_source = "aieos"

    files = load_bootstrap(
        workspace,
        session_kind=ctx.session_kind,
        per_file=per_file,
        total=ctx.bootstrap_total_max_chars,
        skip=skip,
        default_soul=texts.DEFAULT_SOUL,
        deps=deps,
        replacement=replacement,
        guest=guest,
    )
    by_name = {f.name: f for f in files}

    # ---- 1. identity
    id_lines = [texts.IDENTITY_LINE]
    if aieos is not None:
        name, emoji = aieos_name(aieos)
        creature = vibe = ""
    else:
        fm = by_name["IDENTITY.md"].front_matter if "IDENTITY.md" in by_name else {}
        name, emoji = fm_value(fm, "name"), fm_value(fm, "emoji")
        creature, vibe = fm_value(fm, "creature"), fm_value(fm, "vibe")
    if name:
        id_lines.append(f"Your name is {name} {emoji}." if emoji else f"Your name is {name}.")
    if creature:
        id_lines.append(f"You are a {creature}.")
    if vibe:
        id_lines.append(f"Your vibe: {vibe}.")
    user_fm = by_name["USER.md"].front_matter if "USER.md" in by_name else {}
    user_name = fm_value(user_fm, "name")
    if user_name:
        id_lines.append(f"The user's name is {user_name}.")
    out.add("Identity", id_lines)

    # ---- 2. tooling
    cut = ctx.native_tools
    lines = [texts.TOOLING_INTRO] if tools else [texts.TOOLING_NONE]
    for t in tools:
        line = tool_line(t, cut)
        lines.append(line)
        result.tools.append(
            ToolReport(
                t.name.strip(),
                len(line),
                len(json.dumps(t.openai_schema(), sort_keys=True, ensure_ascii=False)),
            )
        )
    result.tool_schema_chars = sum(t.schema_chars for t in result.tools)
    lines.append(texts.TOOLING_TOOLS_MD)
    result.tool_list_chars = len(out.add("Tooling", lines, "## Tooling"))

    # ---- 2a. text tool protocol
    if not ctx.native_tools:
        lines = list(texts.TOOL_PROTOCOL_INTRO)
        lines += [f"- {t.name.strip()}: {tool_schema_json(t)}" for t in tools] or [
            "(no tools registered)"
        ]
        out.add("Tool Use Protocol", lines, "## Tool Use Protocol")

    # ---- 2b. hardware
    if names & HARDWARE_TOOLS:
        out.add("Hardware Access", list(texts.HARDWARE_LINES), "## Hardware Access")

    # ---- 3/4
    out.add("Tool Call Style", list(texts.TOOL_CALL_STYLE_LINES), "## Tool Call Style")
    out.add("Safety", list(texts.SAFETY_LINES), "## Safety")

    # ---- 5. CLI quick reference
    if "gateway" in names:
        out.add(
            "Chela CLI Quick Reference",
            list(texts.CLI_QUICK_REFERENCE),
            "## Chela CLI Quick Reference",
        )

    # ---- 6. skills (full only)
    if full and not guest:
        skills, listed = load_skills(workspace, deps)
        result.listed_dirs = tuple(listed)
        if skills:
            blocks = [skill_xml(s) for s in skills]
            result.skills = [
                SkillReport(s.name, s.location, len(b)) for s, b in zip(skills, blocks, strict=True)
            ]
            lines = [
                *list(texts.SKILLS_LINES),
                "<available_skills>",
                *blocks,
                "</available_skills>",
            ]
            result.skills_chars = len(out.add("Skills (mandatory)", lines, "## Skills (mandatory)"))

    # ---- 7. memory recall
    if full and names & {"memory_search", "memory_get"}:
        lines = []
        if "memory_search" in names:
            lines.append(texts.MEMORY_RECALL_SEARCH)
        if "memory_get" in names:
            lines.append(texts.MEMORY_RECALL_GET)
        lines.append(texts.MEMORY_RECALL_EMPTY)
        out.add("Memory Recall", lines, "## Memory Recall")

    # ---- 8. self-update
    if full and "gateway" in names:
        out.add("Chela Self-Update", list(texts.SELF_UPDATE_LINES), "## Chela Self-Update")

    # ---- 9. model aliases
    if full and ctx.model_aliases:
        lines = [texts.MODEL_ALIASES_INTRO]
        lines += [f"- {_one_line(a)}: {_one_line(m)}" for a, m in ctx.model_aliases if a.strip()]
        out.add("Model Aliases", lines, "## Model Aliases")

    # ---- 10. date/time hint
    tz = ctx.timezone.strip()
    if tz:
        out.add("Date/Time Hint", [texts.DATE_TIME_HINT])

    # ---- 11. workspace
    root = os.path.abspath(str(ctx.file_root)) if guest and ctx.file_root else workspace
    out.add(
        "Workspace",
        [texts.WORKSPACE_LINE.format(path=root), *texts.WORKSPACE_LINES],
        "## Workspace",
    )

    # ---- 12. documentation
    if full and ctx.docs_path.strip():
        docs = os.path.abspath(os.path.expanduser(ctx.docs_path.strip()))
        out.add(
            "Documentation", [ln.format(path=docs) for ln in texts.DOCS_LINES], "## Documentation"
        )

    # ---- 13. sandbox
    if ctx.sandbox_enabled:
        out.add("Sandbox", list(texts.SANDBOX_LINES), "## Sandbox")

    # ---- 14. authorized senders
    owners = [n for n in ctx.owner_numbers if n.strip()]
    if full and owners and not guest:
        lines = [texts.AUTHORIZED_SENDERS_INTRO]
        lines += [f"- {owner_label(n, ctx.owner_display, ctx.owner_hash_secret)}" for n in owners]
        if ctx.owner_display == "hash":
            lines.append(texts.AUTHORIZED_SENDERS_HASH_NOTE)
        lines.append(texts.AUTHORIZED_SENDERS_NOTE)
        out.add("Authorized Senders", lines, "## Authorized Senders")

    # ---- 15. current date & time (zone only)
    if tz:
        out.add("Current Date & Time", [f"Time zone: {tz}"], "## Current Date & Time")

    # ---- 16. workspace files header
    out.add(
        "Workspace Files (injected)",
        list(texts.WORKSPACE_FILES_LINES),
        "## Workspace Files (injected)",
    )

    # ---- 17/18/19 full-only conversation sections
    if full:
        out.add("Reply Tags", list(texts.REPLY_TAGS_LINES), "## Reply Tags")
        lines = list(texts.MESSAGING_LINES)
        if "message" in names:
            lines += ["### message tool", *texts.MESSAGE_TOOL_LINES]
        out.add("Messaging", lines, "## Messaging")
        if ctx.tts_hint.strip():
            out.add("Voice (TTS)", [texts.VOICE_INTRO, ctx.tts_hint.strip()], "## Voice (TTS)")

    # ---- 20. group chat / subagent context
    extra = ctx.extra_context.strip()
    if extra:
        heading = "Group Chat Context" if full else "Subagent Context"
        out.add(heading, [extra], f"## {heading}")

    # ---- 21. reactions
    if ctx.reactions in ("minimal", "extensive"):
        chan = ctx.channel.strip().lower() or "this channel"
        tmpl = texts.REACTIONS_MINIMAL if ctx.reactions == "minimal" else texts.REACTIONS_EXTENSIVE
        out.add("Reactions", [tmpl.format(channel=chan)], "## Reactions")

    # ---- 22. reasoning format
    if ctx.reasoning_tags:
        out.add("Reasoning Format", list(texts.REASONING_LINES), "## Reasoning Format")

    # ---- 23. project context
    exclude = {
        os.path.realpath(os.path.join(workspace, n)) for n in (*BOOTSTRAP_ORDER, "memory.md")
    }
    proj: list[LoadedFile] = []
    if ctx.project_dir.strip() and not guest:
        proj = project_files(
            ctx.project_dir.strip(), per_file=per_file, exclude_real=exclude, deps=deps
        )
    injected = [f for f in files if f.content] + proj
    if injected:
        lines = ["# Project Context", texts.PROJECT_CONTEXT_LOADED]
        if aieos is not None:
            lines.append(texts.PROJECT_CONTEXT_AIEOS)
        elif "SOUL.md" in by_name and by_name["SOUL.md"].content:
            lines.append(texts.PROJECT_CONTEXT_SOUL)
        for f in injected:
            lines += [f"## {f.name}", f.content]
        result.project_context_chars = len(out.add("Project Context", lines))
    result.files = [
        FileReport(f.name, f.path, f.status, f.raw_chars, f.injected_chars) for f in files
    ]
    result.project_files = [
        FileReport(f.name, f.path, f.status, f.raw_chars, f.injected_chars) for f in proj
    ]

    # ---- 24. silent replies
    if full:
        out.add("Silent Replies", list(texts.SILENT_LINES), "## Silent Replies")

    # ---- 25. heartbeats
    if full and ctx.heartbeat_enabled:
        prompt = _one_line(ctx.heartbeat_prompt) or texts.DEFAULT_HEARTBEAT_PROMPT
        out.add(
            "Heartbeats",
            [ln.format(prompt=prompt) for ln in texts.HEARTBEAT_LINES],
            "## Heartbeats",
        )

    # ---- 25a. channel capabilities
    channel = ctx.channel.strip().lower()
    if channel:
        caps = {c.strip().lower() for c in ctx.capabilities}
        kind = {"direct": " (direct chat)", "group": " (group chat)"}.get(ctx.chat_type, "")
        lines = [
            f"Channel: {channel}{kind}.",
            texts.CHANNEL_FORMAT.get(channel, texts.CHANNEL_FORMAT_DEFAULT),
        ]
        lines.append(texts.CHANNEL_MEDIA if "media" in caps else texts.CHANNEL_NO_MEDIA)
        if "reactions" in caps:
            lines.append(texts.CHANNEL_REACTIONS)
        if "threads" in caps:
            lines.append(texts.CHANNEL_THREADS)
        if "inline_buttons" in caps:
            lines.append(texts.CHANNEL_BUTTONS)
        out.add("Channel Capabilities", lines, "## Channel Capabilities")

    # ---- 26. runtime
    out.add("Runtime", [runtime_line(ctx)], "## Runtime")
    return _finish(result, out)


def _finish(result: PromptResult, out: _Sections) -> PromptResult:
    result.text = "\n".join(text for _, text in out.items)
    result.sections = [SectionReport(h, len(t)) for h, t in out.items]
    return result
