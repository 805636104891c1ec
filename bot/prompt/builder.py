"""The system-prompt builder: ``build_prompt(ctx) -> PromptResult``.

A pure function of the ``PromptContext`` and the workspace files it reads.  It never
looks at the clock, the network or global state, so two builds from the same context and
unchanged files are byte-identical.
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass, field
from typing import Any

from bot.config.channels import platform

from . import texts
from .aieos import aieos_name, load_aieos, render_aieos
from .context import PromptContext, ToolSpec
from .parts import (
    HARDWARE_TOOLS,
    _one_line,
    effective_mode,
    ordered_tools,
    owner_label,
    runtime_line,
    tool_line,
    tool_schema_json,
)
from .result import FileReport, PromptResult, SectionReport, SkillReport, ToolReport
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


@dataclass
class _Build:
    """One build in progress: the context, what was loaded for it, and the sections so far."""

    ctx: PromptContext
    mode: str
    workspace: str
    deps: Deps
    out: _Sections
    result: PromptResult
    tools: list[ToolSpec]
    names: set[str]
    per_file: int
    files: list[LoadedFile] = field(default_factory=list)
    by_name: dict[str, LoadedFile] = field(default_factory=dict)
    aieos: dict[str, Any] | None = None

    @property
    def full(self) -> bool:
        return self.mode == "full"

    @property
    def guest(self) -> bool:
        return self.ctx.trust == "guest"

    @property
    def tz(self) -> str:
        return self.ctx.timezone.strip()

    def add(self, report_heading: str, lines: list[str], heading: str | None = None) -> str:
        return self.out.add(report_heading, lines, heading)

    def fixed(self, name: str, lines: tuple[str, ...] | list[str]) -> None:
        """A section of fixed lines under ``## <name>``."""
        self.out.add(name, list(lines), f"## {name}")


def build_prompt(ctx: PromptContext) -> PromptResult:
    """The system prompt for ``ctx``: the sections of ``SECTIONS``, in order."""
    mode = effective_mode(ctx)
    deps: Deps = {}
    tools = ordered_tools(ctx.tools)
    b = _Build(
        ctx=ctx,
        mode=mode,
        workspace=os.path.abspath(os.path.expanduser(str(ctx.workspace))),
        deps=deps,
        out=_Sections(),
        result=PromptResult(text="", deps=deps, mode=mode),
        tools=tools,
        names={t.name.strip().lower() for t in tools},
        per_file=COMPACT_MAX_CHARS if ctx.compact_context else ctx.bootstrap_max_chars,
    )
    if mode == "none":
        b.add("Identity", [texts.IDENTITY_LINE])
        return _finish(b.result, b.out)
    _load_files(b)
    for section in SECTIONS:
        section(b)
    return _finish(b.result, b.out)


def _load_aieos(b: _Build) -> tuple[frozenset[str], tuple[str, LoadedFile] | None]:
    """The AIEOS identity, when configured and renderable: it replaces IDENTITY.md and SOUL.md."""
    ctx = b.ctx
    if ctx.identity_format != "aieos":
        return frozenset(), None
    aieos = load_aieos(ctx.aieos_path, ctx.aieos_inline, b.workspace, b.deps)
    if aieos is None:
        return frozenset(), None
    body = render_aieos(aieos)
    if not body:
        log.warning("AIEOS identity has nothing to render; using the Markdown files")
        return frozenset(), None
    b.aieos = aieos
    path = (
        os.path.abspath(os.path.join(b.workspace, os.path.expanduser(ctx.aieos_path)))
        if ctx.aieos_path
        else ""
    )
    raw = (
        len(ctx.aieos_inline) if not ctx.aieos_path else len(json.dumps(aieos, ensure_ascii=False))
    )
    b.result.identity_source = "aieos"
    return frozenset({"IDENTITY.md", "SOUL.md"}), (
        "SOUL.md",
        LoadedFile("Identity", path, "ok", raw, body),
    )


def _load_files(b: _Build) -> None:
    skip, replacement = _load_aieos(b)
    b.files = load_bootstrap(
        b.workspace,
        session_kind=b.ctx.session_kind,
        per_file=b.per_file,
        total=b.ctx.bootstrap_total_max_chars,
        skip=skip,
        default_soul=texts.DEFAULT_SOUL,
        deps=b.deps,
        replacement=replacement,
        guest=b.guest,
    )
    b.by_name = {f.name: f for f in b.files}


def _front_matter(b: _Build, name: str) -> dict[str, Any]:
    return b.by_name[name].front_matter if name in b.by_name else {}


# ---- 1. identity
def _identity(b: _Build) -> None:
    lines = [texts.IDENTITY_LINE]
    if b.aieos is not None:
        name, emoji = aieos_name(b.aieos)
        creature = vibe = ""
    else:
        fm = _front_matter(b, "IDENTITY.md")
        name, emoji = fm_value(fm, "name"), fm_value(fm, "emoji")
        creature, vibe = fm_value(fm, "creature"), fm_value(fm, "vibe")
    if name:
        lines.append(f"Your name is {name} {emoji}." if emoji else f"Your name is {name}.")
    if creature:
        lines.append(f"You are a {creature}.")
    if vibe:
        lines.append(f"Your vibe: {vibe}.")
    user_name = fm_value(_front_matter(b, "USER.md"), "name")
    if user_name:
        lines.append(f"The user's name is {user_name}.")
    b.add("Identity", lines)


# ---- 2. tooling
def _tooling(b: _Build) -> None:
    lines = [texts.TOOLING_INTRO] if b.tools else [texts.TOOLING_NONE]
    for t in b.tools:
        line = tool_line(t, b.ctx.native_tools)
        lines.append(line)
        schema = json.dumps(t.openai_schema(), sort_keys=True, ensure_ascii=False)
        b.result.tools.append(ToolReport(t.name.strip(), len(line), len(schema)))
    b.result.tool_schema_chars = sum(t.schema_chars for t in b.result.tools)
    lines.append(texts.TOOLING_TOOLS_MD)
    b.result.tool_list_chars = len(b.add("Tooling", lines, "## Tooling"))


# ---- 2a. the text tool protocol (models without native tool calls)
def _tool_protocol(b: _Build) -> None:
    if b.ctx.native_tools:
        return
    lines = list(texts.TOOL_PROTOCOL_INTRO)
    lines += [f"- {t.name.strip()}: {tool_schema_json(t)}" for t in b.tools] or [
        "(no tools registered)"
    ]
    b.add("Tool Use Protocol", lines, "## Tool Use Protocol")


# ---- 2b. hardware
def _hardware(b: _Build) -> None:
    if b.names & HARDWARE_TOOLS:
        b.fixed("Hardware Access", texts.HARDWARE_LINES)


# ---- 3/4. tool call style, safety
def _style_and_safety(b: _Build) -> None:
    b.fixed("Tool Call Style", texts.TOOL_CALL_STYLE_LINES)
    b.fixed("Safety", texts.SAFETY_LINES)


# ---- 5. CLI quick reference
def _cli_reference(b: _Build) -> None:
    if "gateway" in b.names:
        b.fixed("Chela CLI Quick Reference", texts.CLI_QUICK_REFERENCE)


# ---- 6. skills (full, owner)
def _skills(b: _Build) -> None:
    if not b.full or b.guest:
        return
    skills, listed = load_skills(b.workspace, b.deps)
    b.result.listed_dirs = tuple(listed)
    if not skills:
        return
    blocks = [skill_xml(s) for s in skills]
    b.result.skills = [
        SkillReport(s.name, s.location, len(x)) for s, x in zip(skills, blocks, strict=True)
    ]
    lines = [*texts.SKILLS_LINES, "<available_skills>", *blocks, "</available_skills>"]
    b.result.skills_chars = len(b.add("Skills (mandatory)", lines, "## Skills (mandatory)"))


# ---- 7. memory recall
def _memory_recall(b: _Build) -> None:
    if not b.full or not b.names & {"memory_search", "memory_get"}:
        return
    lines = []
    if "memory_search" in b.names:
        lines.append(texts.MEMORY_RECALL_SEARCH)
    if "memory_get" in b.names:
        lines.append(texts.MEMORY_RECALL_GET)
    lines.append(texts.MEMORY_RECALL_EMPTY)
    b.add("Memory Recall", lines, "## Memory Recall")


# ---- 8. self-update
def _self_update(b: _Build) -> None:
    if b.full and "gateway" in b.names:
        b.fixed("Chela Self-Update", texts.SELF_UPDATE_LINES)


# ---- 9. model aliases
def _model_aliases(b: _Build) -> None:
    aliases = b.ctx.model_aliases
    if not b.full or not aliases:
        return
    lines = [texts.MODEL_ALIASES_INTRO]
    lines += [f"- {_one_line(a)}: {_one_line(m)}" for a, m in aliases if a.strip()]
    b.add("Model Aliases", lines, "## Model Aliases")


# ---- 10. date/time hint
def _date_time_hint(b: _Build) -> None:
    if b.tz:
        b.add("Date/Time Hint", [texts.DATE_TIME_HINT])


# ---- 11. workspace (a guest's own directory for a guest)
def _workspace(b: _Build) -> None:
    ctx = b.ctx
    root = os.path.abspath(str(ctx.file_root)) if b.guest and ctx.file_root else b.workspace
    b.add(
        "Workspace",
        [texts.WORKSPACE_LINE.format(path=root), *texts.WORKSPACE_LINES],
        "## Workspace",
    )


# ---- 12. documentation
def _documentation(b: _Build) -> None:
    if not b.full or not b.ctx.docs_path.strip():
        return
    docs = os.path.abspath(os.path.expanduser(b.ctx.docs_path.strip()))
    b.add("Documentation", [ln.format(path=docs) for ln in texts.DOCS_LINES], "## Documentation")


# ---- 13. sandbox
def _sandbox(b: _Build) -> None:
    if b.ctx.sandbox_enabled:
        b.fixed("Sandbox", texts.SANDBOX_LINES)


# ---- 14. authorized senders (full, owner)
def _authorized_senders(b: _Build) -> None:
    ctx = b.ctx
    owners = [n for n in ctx.owner_numbers if n.strip()]
    if not b.full or not owners or b.guest:
        return
    lines = [texts.AUTHORIZED_SENDERS_INTRO]
    lines += [f"- {owner_label(n, ctx.owner_display, ctx.owner_hash_secret)}" for n in owners]
    if ctx.owner_display == "hash":
        lines.append(texts.AUTHORIZED_SENDERS_HASH_NOTE)
    lines.append(texts.AUTHORIZED_SENDERS_NOTE)
    b.add("Authorized Senders", lines, "## Authorized Senders")


# ---- 15. current date & time (the zone only: the prompt stays cacheable)
def _current_time(b: _Build) -> None:
    if b.tz:
        b.add("Current Date & Time", [f"Time zone: {b.tz}"], "## Current Date & Time")


# ---- 16. workspace files header
def _workspace_files(b: _Build) -> None:
    b.fixed("Workspace Files (injected)", texts.WORKSPACE_FILES_LINES)


# ---- 17/18/19. reply tags, messaging, voice (full)
def _conversation(b: _Build) -> None:
    if not b.full:
        return
    b.fixed("Reply Tags", texts.REPLY_TAGS_LINES)
    lines = list(texts.MESSAGING_LINES)
    if "message" in b.names:
        lines += ["### message tool", *texts.MESSAGE_TOOL_LINES]
    b.add("Messaging", lines, "## Messaging")
    if b.ctx.tts_hint.strip():
        b.add("Voice (TTS)", [texts.VOICE_INTRO, b.ctx.tts_hint.strip()], "## Voice (TTS)")


# ---- 20. group chat / subagent context
def _extra_context(b: _Build) -> None:
    extra = b.ctx.extra_context.strip()
    if extra:
        heading = "Group Chat Context" if b.full else "Subagent Context"
        b.add(heading, [extra], f"## {heading}")


# ---- 21. reactions
def _reactions(b: _Build) -> None:
    level = b.ctx.reactions
    if level not in ("minimal", "extensive"):
        return
    chan = b.ctx.channel.strip().lower() or "this channel"
    tmpl = texts.REACTIONS_MINIMAL if level == "minimal" else texts.REACTIONS_EXTENSIVE
    b.add("Reactions", [tmpl.format(channel=chan)], "## Reactions")


# ---- 22. reasoning format
def _reasoning(b: _Build) -> None:
    if b.ctx.reasoning_tags:
        b.fixed("Reasoning Format", texts.REASONING_LINES)


# ---- 23. project context (the bootstrap files, then the project walk)
def _project_context(b: _Build) -> None:
    ws = b.workspace
    exclude = {os.path.realpath(os.path.join(ws, n)) for n in (*BOOTSTRAP_ORDER, "memory.md")}
    proj: list[LoadedFile] = []
    project_dir = b.ctx.project_dir.strip()
    if project_dir and not b.guest:
        proj = project_files(project_dir, per_file=b.per_file, exclude_real=exclude, deps=b.deps)
    injected = [f for f in b.files if f.content] + proj
    if injected:
        lines = ["# Project Context", texts.PROJECT_CONTEXT_LOADED]
        if b.aieos is not None:
            lines.append(texts.PROJECT_CONTEXT_AIEOS)
        elif "SOUL.md" in b.by_name and b.by_name["SOUL.md"].content:
            lines.append(texts.PROJECT_CONTEXT_SOUL)
        for f in injected:
            lines += [f"## {f.name}", f.content]
        b.result.project_context_chars = len(b.add("Project Context", lines))
    b.result.files = [_file_report(f) for f in b.files]
    b.result.project_files = [_file_report(f) for f in proj]


def _file_report(f: LoadedFile) -> FileReport:
    return FileReport(f.name, f.path, f.status, f.raw_chars, f.injected_chars)


# ---- 24. silent replies
def _silent(b: _Build) -> None:
    if b.full:
        b.fixed("Silent Replies", texts.SILENT_LINES)


# ---- 25. heartbeats
def _heartbeats(b: _Build) -> None:
    if not b.full or not b.ctx.heartbeat_enabled:
        return
    prompt = _one_line(b.ctx.heartbeat_prompt) or texts.DEFAULT_HEARTBEAT_PROMPT
    b.add("Heartbeats", [ln.format(prompt=prompt) for ln in texts.HEARTBEAT_LINES], "## Heartbeats")


# ---- 25a. channel capabilities
_CAPABILITY_LINES = (
    ("reactions", texts.CHANNEL_REACTIONS),
    ("threads", texts.CHANNEL_THREADS),
    ("inline_buttons", texts.CHANNEL_BUTTONS),
)


def _format_hint(channel: str) -> str:
    """How the channel renders a reply: its platform section's FORMAT, else the texts'."""
    section = platform(channel)
    if section is not None and section.FORMAT:
        return section.FORMAT
    return texts.CHANNEL_FORMAT.get(channel, texts.CHANNEL_FORMAT_DEFAULT)


def _channel(b: _Build) -> None:
    ctx = b.ctx
    channel = ctx.channel.strip().lower()
    if not channel:
        return
    caps = {c.strip().lower() for c in ctx.capabilities}
    kind = {"direct": " (direct chat)", "group": " (group chat)"}.get(ctx.chat_type, "")
    lines = [
        f"Channel: {channel}{kind}.",
        _format_hint(channel),
        texts.CHANNEL_MEDIA if "media" in caps else texts.CHANNEL_NO_MEDIA,
    ]
    lines += [line for cap, line in _CAPABILITY_LINES if cap in caps]
    b.add("Channel Capabilities", lines, "## Channel Capabilities")


# ---- 26. runtime
def _runtime(b: _Build) -> None:
    b.add("Runtime", [runtime_line(b.ctx)], "## Runtime")


# The prompt's sections, in their fixed order: each adds itself when it applies.
SECTIONS = (
    _identity,
    _tooling,
    _tool_protocol,
    _hardware,
    _style_and_safety,
    _cli_reference,
    _skills,
    _memory_recall,
    _self_update,
    _model_aliases,
    _date_time_hint,
    _workspace,
    _documentation,
    _sandbox,
    _authorized_senders,
    _current_time,
    _workspace_files,
    _conversation,
    _extra_context,
    _reactions,
    _reasoning,
    _project_context,
    _silent,
    _heartbeats,
    _channel,
    _runtime,
)


def _finish(result: PromptResult, out: _Sections) -> PromptResult:
    result.text = "\n".join(text for _, text in out.items)
    result.sections = [SectionReport(h, len(t)) for h, t in out.items]
    return result
