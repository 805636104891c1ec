"""``chela init``: starter workspace files from ``bot/templates/*.md``.

Existing files are never overwritten.  BOOTSTRAP.md (the first-run conversation guide) is
written only into a brand-new workspace, and the fact that it was written is recorded in
``<workspace>/.chela/workspace-state.json`` so it never comes back after the user (or the
agent) deletes it.
"""

from __future__ import annotations

import json
import logging
import os
from importlib import resources
from typing import Any
from pathlib import Path

from bot.fs import FILE_MODE, private_dir, write_private

log = logging.getLogger(__name__)

STARTER_FILES = ("AGENTS.md", "SOUL.md", "TOOLS.md", "IDENTITY.md", "USER.md", "HEARTBEAT.md")
BOOTSTRAP_FILE = "BOOTSTRAP.md"
# Any of these present means the workspace is already in use (not brand-new).
_EXISTING_HINTS = (BOOTSTRAP_FILE, "MEMORY.md", "memory.md", "memory")
STATE_DIR = ".chela"
STATE_FILE = "workspace-state.json"


def template_text(name: str) -> str:
    return resources.files("bot").joinpath("templates", name).read_text(encoding="utf-8")


def _state_path(workspace: Path) -> Path:
    return workspace / STATE_DIR / STATE_FILE


def read_state(workspace: Path) -> dict[str, Any]:
    try:
        data = json.loads(_state_path(workspace).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _write_state(workspace: Path, state: dict[str, Any]) -> None:
    path = _state_path(workspace)
    private_dir(path.parent)
    write_private(path, (json.dumps(state, indent=2, sort_keys=True) + "\n").encode("utf-8"))


def _write_new(path: Path, text: str) -> bool:
    """Create ``path`` (0600) with ``text`` unless something is already there (race-free;
    O_EXCL also refuses to create through a symlink left at ``path``)."""
    try:
        fd = os.open(
            path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, FILE_MODE
        )
    except FileExistsError:
        return False
    os.fchmod(fd, FILE_MODE)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(text)
    return True


def init_workspace(path: Path) -> list[Path]:
    """Create missing starter files; return the files created (in creation order)."""
    workspace = Path(os.path.expanduser(str(path))).absolute()
    private_dir(workspace)  # 0700, as are any parents created for it
    state = read_state(workspace)
    brand_new = not any(os.path.lexists(workspace / n) for n in STARTER_FILES + _EXISTING_HINTS)

    created: list[Path] = []
    for name in STARTER_FILES:
        target = workspace / name
        if _write_new(target, template_text(name)):
            created.append(target)

    if brand_new and not state.get("bootstrap_written"):
        target = workspace / BOOTSTRAP_FILE
        if _write_new(target, template_text(BOOTSTRAP_FILE)):
            created.append(target)
        state["bootstrap_written"] = True
        _write_state(workspace, state)
    elif (workspace / BOOTSTRAP_FILE).exists() and not state.get("bootstrap_written"):
        # A BOOTSTRAP.md we did not write: remember it so deleting it is final too.
        state["bootstrap_written"] = True
        _write_state(workspace, state)
    for p in created:
        log.info("created %s", p)
    return created
