"""The ``/context`` size report, for the chat command and ``chela context``."""

from __future__ import annotations

import json
import os
from typing import Any, Literal

from .result import PromptResult
from .context import PromptContext
from .workspace import COMPACT_MAX_CHARS

TOP_N = 5


def _limits(ctx: PromptContext) -> tuple[int, int]:
    per_file = COMPACT_MAX_CHARS if ctx.compact_context else ctx.bootstrap_max_chars
    return per_file, ctx.bootstrap_total_max_chars


def context_data(result: PromptResult, ctx: PromptContext) -> dict[str, Any]:
    per_file, total = _limits(ctx)
    tools_by_size = sorted(result.tools, key=lambda t: (-t.schema_chars, t.name))
    skills_by_size = sorted(result.skills, key=lambda s: (-s.chars, s.name))
    return {
        "workspace": os.path.abspath(os.path.expanduser(str(ctx.workspace))),
        "mode": result.mode,
        "limits": {"per_file_chars": per_file, "total_chars": total},
        "system_prompt": {"chars": result.chars, "approx_tokens": result.approx_tokens},
        "project_context_chars": result.project_context_chars,
        "files": [
            {
                "name": f.name,
                "path": f.path,
                "status": f.status,
                "raw_chars": f.raw_chars,
                "injected_chars": f.injected_chars,
            }
            for f in result.files
        ],
        "project_files": [
            {
                "name": f.name,
                "path": f.path,
                "status": f.status,
                "raw_chars": f.raw_chars,
                "injected_chars": f.injected_chars,
            }
            for f in result.project_files
        ],
        "skills": {
            "count": len(result.skills),
            "chars": result.skills_chars,
            "items": [
                {"name": s.name, "location": s.location, "chars": s.chars} for s in skills_by_size
            ],
        },
        "tools": {
            "count": len(result.tools),
            "list_chars": result.tool_list_chars,
            "schema_chars": result.tool_schema_chars,
            "items": [
                {"name": t.name, "line_chars": t.line_chars, "schema_chars": t.schema_chars}
                for t in tools_by_size
            ],
        },
        "sections": [{"heading": s.heading, "chars": s.chars} for s in result.sections],
    }


def _file_line(f: dict[str, Any]) -> str:
    return f"- {f['name']}: {f['status'].upper()} | raw {f['raw_chars']} chars | injected {f['injected_chars']} chars"


def context_report(
    result: PromptResult,
    ctx: PromptContext,
    kind: Literal["list", "detail", "json"] = "list",
    usage: dict[str, Any] | None = None,
) -> str:
    """``usage``: a session's token use against its budget (bot.agent.compaction), when known."""
    data = context_data(result, ctx)
    if usage is not None:
        data["tokens"] = dict(usage)
    if kind == "json":
        return json.dumps(data, indent=2, ensure_ascii=False)
    lim = data["limits"]
    lines = [
        f"Workspace: {data['workspace']}",
        f"Limits: {lim['per_file_chars']} chars per file | {lim['total_chars']} chars total",
        f"System prompt: {data['system_prompt']['chars']} chars (~{data['system_prompt']['approx_tokens']} tokens)",
        f"Project Context: {data['project_context_chars']} chars",
        "Bootstrap files:",
    ]
    lines += [_file_line(f) for f in data["files"]] or ["- (none)"]
    if data["project_files"]:
        lines.append("Project files:")
        lines += [_file_line(f) for f in data["project_files"]]
    sk, tl = data["skills"], data["tools"]
    lines.append(f"Skills: {sk['count']} ({sk['chars']} chars)")
    lines.append(f"Tool list: {tl['list_chars']} chars ({tl['count']} tools)")
    lines.append(f"Tool schemas: {tl['schema_chars']} chars")
    if usage is not None:
        lines.append(
            f"Session tokens: {usage['used']} of {usage['budget']} for history (window {usage['window']}: "
            f"system {usage['system_tokens']}, tools {usage['tool_tokens']}, answer reserve "
            f"{usage['reserve']}; summary {usage['summary_tokens']}, {usage['history_messages']} messages; "
            f"compacts at {usage['threshold_tokens']})"
        )
    if kind == "detail":
        lines.append("Largest tool schemas:")
        lines += [f"- {t['name']}: {t['schema_chars']} chars" for t in tl["items"][:TOP_N]] or [
            "- (none)"
        ]
        lines.append("Largest skills:")
        lines += [f"- {s['name']}: {s['chars']} chars" for s in sk["items"][:TOP_N]] or ["- (none)"]
        lines.append("Sections:")
        lines += [f"- {s['heading']}: {s['chars']} chars" for s in data["sections"]]
    return "\n".join(lines)
