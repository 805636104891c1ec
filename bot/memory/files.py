"""Which files are an agent's memory: ``MEMORY.md`` (or ``memory.md``) and ``memory/**/*.md``
inside its workspace (a link leading out of it is not followed)."""

from __future__ import annotations

from pathlib import Path

MAX_FILE_BYTES = 2 * 1024 * 1024  # a larger file is indexed as empty


def memory_files(workspace: Path) -> list[Path]:
    """The memory files of a workspace, in a stable order, all inside the workspace."""
    root = Path(workspace).resolve()
    out: list[Path] = []
    seen: set[Path] = set()

    def add(p: Path) -> None:
        try:
            r = p.resolve()
        except OSError:
            return
        if r in seen or not r.is_file() or not r.is_relative_to(root):
            return
        seen.add(r)
        out.append(r)

    for name in ("MEMORY.md", "memory.md"):
        add(root / name)
    mdir = root / "memory"
    if mdir.is_dir():
        for p in sorted(mdir.rglob("*.md")):
            add(p)
    return out


def relative(root: Path, p: Path) -> str:
    """``p`` as the tools show it: relative to the workspace, with forward slashes."""
    try:
        return p.relative_to(root).as_posix() or "."
    except ValueError:
        return str(p)
