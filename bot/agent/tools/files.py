"""read / write / edit: file tools confined to the workspace."""

from __future__ import annotations

import asyncio
from pathlib import Path

from .base import Tool, ToolContext, ToolError, arg_bool, arg_int, arg_str, display_path, resolve_in_workspace, schema

MAX_READ_BYTES = 10 * 1024 * 1024


def _read_text(p: Path) -> str:
    if not p.exists():
        raise ToolError("file not found")
    if p.is_dir():
        raise ToolError("that path is a directory, not a file")
    if p.stat().st_size > MAX_READ_BYTES:
        raise ToolError(f"file is larger than {MAX_READ_BYTES // (1024 * 1024)} MiB; read a slice with exec instead")
    data = p.read_bytes()
    if b"\x00" in data[:8192]:
        raise ToolError("file looks binary; not shown")
    return data.decode("utf-8", errors="replace")


async def _read(ctx: ToolContext, args: dict) -> str:
    path = arg_str(args, "path")
    offset = arg_int(args, "offset", 1, minimum=1) or 1
    limit = arg_int(args, "limit", None, minimum=1)
    p = resolve_in_workspace(ctx.file_root, path)
    try:
        text = await asyncio.to_thread(_read_text, p)
    except ToolError as e:
        raise ToolError(f"{e} ({path})") from None
    except OSError as e:
        raise ToolError(f"cannot read {path}: {e.strerror or e}") from None
    if offset == 1 and limit is None:
        return text if text else "(empty file)"
    lines = text.splitlines(keepends=True)
    total = len(lines)
    if offset > total:
        return f"(the file has only {total} lines)"
    end = total if limit is None else min(total, offset - 1 + limit)
    out = "".join(lines[offset - 1 : end])
    if end < total:
        out = out.rstrip("\n") + f"\n[... lines {offset}-{end} of {total}; continue with offset={end + 1}]"
    return out


def _write_file(p: Path, content: str) -> int:
    p.parent.mkdir(parents=True, exist_ok=True)
    data = content.encode("utf-8")
    tmp = p.with_name(f".{p.name}.chela-tmp")
    tmp.write_bytes(data)
    tmp.replace(p)
    return len(data)


async def _write(ctx: ToolContext, args: dict) -> str:
    path = arg_str(args, "path")
    content = args.get("content")
    if content is None:
        raise ToolError("missing required argument 'content'")
    if not isinstance(content, str):
        raise ToolError("argument 'content' must be a string")
    p = resolve_in_workspace(ctx.file_root, path)
    if p.is_dir():
        raise ToolError(f"{path} is a directory")
    try:
        n = await asyncio.to_thread(_write_file, p, content)
    except OSError as e:
        raise ToolError(f"cannot write {path}: {e.strerror or e}") from None
    return f"Wrote {n} bytes to {display_path(ctx.file_root, p)}."


def _edit_file(p: Path, old: str, new: str, replace_all: bool) -> int:
    text = _read_text(p)
    count = text.count(old)
    if count == 0:
        raise ToolError("old_text was not found in the file (it must match exactly, including whitespace)")
    if count > 1 and not replace_all:
        raise ToolError(f"old_text occurs {count} times; include more surrounding text to make it unique, or set replace_all")
    text = text.replace(old, new) if replace_all else text.replace(old, new, 1)
    _write_file(p, text)
    return count if replace_all else 1


async def _edit(ctx: ToolContext, args: dict) -> str:
    path = arg_str(args, "path")
    old = args.get("old_text")
    new = args.get("new_text")
    if not isinstance(old, str) or old == "":
        raise ToolError("argument 'old_text' must be a non-empty string")
    if not isinstance(new, str):
        raise ToolError("argument 'new_text' must be a string")
    replace_all = arg_bool(args, "replace_all")
    p = resolve_in_workspace(ctx.file_root, path)
    try:
        n = await asyncio.to_thread(_edit_file, p, old, new, replace_all)
    except ToolError as e:
        raise ToolError(f"{e} ({path})") from None
    except OSError as e:
        raise ToolError(f"cannot edit {path}: {e.strerror or e}") from None
    return f"Edited {display_path(ctx.file_root, p)}: replaced {n} occurrence{'s' if n != 1 else ''}."


READ = Tool(
    "read",
    "Read a text file from the workspace (optionally a range of lines).",
    schema(
        {
            "path": {"type": "string", "description": "File path, relative to the workspace."},
            "offset": {"type": "integer", "description": "First line to return (1-based).", "minimum": 1},
            "limit": {"type": "integer", "description": "Maximum number of lines to return.", "minimum": 1},
        },
        ["path"],
    ),
    _read,
)

WRITE = Tool(
    "write",
    "Create or overwrite a workspace file with the given content (parent folders are created).",
    schema(
        {
            "path": {"type": "string", "description": "File path, relative to the workspace."},
            "content": {"type": "string", "description": "The complete new file content."},
        },
        ["path", "content"],
    ),
    _write,
)

EDIT = Tool(
    "edit",
    "Change a workspace file by replacing an exact piece of text with new text.",
    schema(
        {
            "path": {"type": "string", "description": "File path, relative to the workspace."},
            "old_text": {"type": "string", "description": "Text to find; must match exactly and be unique unless replace_all."},
            "new_text": {"type": "string", "description": "Replacement text."},
            "replace_all": {"type": "boolean", "description": "Replace every occurrence instead of exactly one.", "default": False},
        },
        ["path", "old_text", "new_text"],
    ),
    _edit,
)
