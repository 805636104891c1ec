"""read / write / edit: file tools confined to the workspace.

Paths are first checked with ``resolve_in_workspace`` (which gives the familiar
"outside the workspace" refusals), but the actual I/O never trusts a path string:
it starts from an open handle on the file root and walks each component with
``dir_fd=`` and ``O_NOFOLLOW``, so a symlink swapped in after the check (by an
earlier ``exec``, say) makes the operation fail instead of leaving the workspace.

* read follows symlinks only as far as ``resolve_in_workspace`` resolved them
  (a link to another place inside the workspace keeps working); the walk over the
  resolved path then refuses any link it meets.
* write and edit refuse a path that goes through any symlink.  Files are replaced
  atomically via an exclusive, randomly named ``O_NOFOLLOW`` temp file in the same
  directory (``bot.fs.write_at``); new files are 0600 and new directories 0700
  whatever the umask, an overwritten file keeps its mode.

The handle walk, the no-follow read and the atomic write are ``bot.fs``'s: the one
helper every write, read or send under a guest's directory goes through.
"""

from __future__ import annotations

import asyncio
import os
import stat
from pathlib import Path

from bot import fs

from .base import (
    Tool,
    ToolContext,
    ToolError,
    arg_bool,
    arg_int,
    arg_str,
    display_path,
    resolve_in_workspace,
    schema,
)

MAX_READ_BYTES = 10 * 1024 * 1024


class _Target:
    """A checked path: the real file root and the components below it."""

    def __init__(self, path: str, root: Path, resolved: Path, parts: tuple[str, ...]):
        self.path = path  # as the model wrote it (for messages)
        self.root = root
        self.resolved = resolved
        self.parts = parts


def _lexical_parts(file_root: Path, path: str) -> tuple[str, ...] | None:
    """Components of ``path`` below the file root, normalised without touching the
    disk; None when the path does not lexically lie inside the root."""
    try:
        return fs.parts_under(file_root, path.strip())
    except ValueError:
        return None


def _target(ctx: ToolContext, path: str, *, writing: bool) -> _Target:
    resolved = resolve_in_workspace(ctx.file_root, path)
    root = Path(ctx.file_root).resolve()
    parts = tuple(resolved.relative_to(root).parts)
    if writing and _lexical_parts(ctx.file_root, path) != parts:
        raise ToolError(
            f"path {path!r} goes through a symbolic link; writing through links is not allowed"
            f" (its real path is {display_path(ctx.file_root, resolved)})"
        )
    return _Target(path, root, resolved, parts)


def _link_error(t: _Target, name: str) -> ToolError:
    return ToolError(
        f"path {t.path!r} goes through a symbolic link ({name}); refusing to follow it"
    )


def _open_parent(t: _Target, *, create: bool) -> int:
    """An fd for the directory holding ``t``'s last component, walked without following
    links from the file root.  With ``create`` missing directories are made 0700."""
    root = fs.open_root(t.root)
    try:
        return fs.open_dir(root, t.parts[:-1], create=create)
    except fs.LinkRefused as e:
        raise _link_error(t, e.name) from None
    finally:
        os.close(root)


def _too_large() -> ToolError:
    return ToolError(
        f"file is larger than {MAX_READ_BYTES // (1024 * 1024)} MiB; read a slice with exec instead"
    )


def _read_at(t: _Target, dir_fd: int) -> str:
    if not t.parts:
        raise ToolError("that path is a directory, not a file")
    try:
        data = fs.read_at(dir_fd, t.parts[-1], MAX_READ_BYTES)
    except FileNotFoundError:
        raise ToolError("file not found") from None
    except fs.LinkRefused as e:
        raise _link_error(t, e.name) from None
    except IsADirectoryError:
        raise ToolError("that path is a directory, not a file") from None
    except fs.NotRegularFile:
        raise ToolError("not a regular file") from None
    except fs.FileTooLarge:
        raise _too_large() from None
    if b"\x00" in data[:8192]:
        raise ToolError("file looks binary; not shown")
    return data.decode("utf-8", errors="replace")


def _read_text(t: _Target) -> str:
    try:
        dfd = _open_parent(t, create=False)
    except FileNotFoundError:
        raise ToolError("file not found") from None
    except NotADirectoryError:
        raise ToolError("file not found") from None
    try:
        return _read_at(t, dfd)
    finally:
        os.close(dfd)


def _check_not_dir(t: _Target, dir_fd: int | None = None) -> None:
    if not t.parts:
        raise ToolError(f"{t.path} is a directory")
    if dir_fd is not None:
        try:
            st = os.stat(t.parts[-1], dir_fd=dir_fd, follow_symlinks=False)
        except FileNotFoundError:
            return
        if stat.S_ISDIR(st.st_mode):
            raise ToolError(f"{t.path} is a directory")


async def _read(ctx: ToolContext, args: dict) -> str:
    path = arg_str(args, "path")
    offset = arg_int(args, "offset", 1, minimum=1) or 1
    limit = arg_int(args, "limit", None, minimum=1)
    t = _target(ctx, path, writing=False)
    try:
        text = await asyncio.to_thread(_read_text, t)
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
        out = (
            out.rstrip("\n")
            + f"\n[... lines {offset}-{end} of {total}; continue with offset={end + 1}]"
        )
    return out


def _write_file(t: _Target, content: str) -> int:
    _check_not_dir(t)
    data = content.encode("utf-8")
    dfd = _open_parent(t, create=True)
    try:
        _check_not_dir(t, dfd)
        fs.write_at(dfd, t.parts[-1], data, keep_mode=True)
    finally:
        os.close(dfd)
    return len(data)


async def _write(ctx: ToolContext, args: dict) -> str:
    path = arg_str(args, "path")
    content = args.get("content")
    if content is None:
        raise ToolError("missing required argument 'content'")
    if not isinstance(content, str):
        raise ToolError("argument 'content' must be a string")
    t = _target(ctx, path, writing=True)
    if t.resolved.is_dir():
        raise ToolError(f"{path} is a directory")
    try:
        n = await asyncio.to_thread(_write_file, t, content)
    except OSError as e:
        raise ToolError(f"cannot write {path}: {e.strerror or e}") from None
    return f"Wrote {n} bytes to {display_path(ctx.file_root, t.resolved)}."


def _edit_file(t: _Target, old: str, new: str, replace_all: bool) -> int:
    try:
        dfd = _open_parent(t, create=False)
    except (FileNotFoundError, NotADirectoryError):
        raise ToolError("file not found") from None
    try:
        # read and replace through the same directory handle
        text = _read_at(t, dfd)
        count = text.count(old)
        if count == 0:
            raise ToolError(
                "old_text was not found in the file (it must match exactly, including whitespace)"
            )
        if count > 1 and not replace_all:
            raise ToolError(
                f"old_text occurs {count} times; include more surrounding text to make it unique, or set replace_all"
            )
        text = text.replace(old, new) if replace_all else text.replace(old, new, 1)
        fs.write_at(dfd, t.parts[-1], text.encode("utf-8"), keep_mode=True)
    finally:
        os.close(dfd)
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
    t = _target(ctx, path, writing=True)
    try:
        n = await asyncio.to_thread(_edit_file, t, old, new, replace_all)
    except ToolError as e:
        raise ToolError(f"{e} ({path})") from None
    except OSError as e:
        raise ToolError(f"cannot edit {path}: {e.strerror or e}") from None
    return f"Edited {display_path(ctx.file_root, t.resolved)}: replaced {n} occurrence{'s' if n != 1 else ''}."


READ = Tool(
    "read",
    "Read a text file from the workspace (optionally a range of lines).",
    schema(
        {
            "path": {"type": "string", "description": "File path, relative to the workspace."},
            "offset": {
                "type": "integer",
                "description": "First line to return (1-based).",
                "minimum": 1,
            },
            "limit": {
                "type": "integer",
                "description": "Maximum number of lines to return.",
                "minimum": 1,
            },
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
            "old_text": {
                "type": "string",
                "description": "Text to find; must match exactly and be unique unless replace_all.",
            },
            "new_text": {"type": "string", "description": "Replacement text."},
            "replace_all": {
                "type": "boolean",
                "description": "Replace every occurrence instead of exactly one.",
                "default": False,
            },
        },
        ["path", "old_text", "new_text"],
    ),
    _edit,
)
