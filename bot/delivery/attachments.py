"""Attachments a reply names: each local target checked against the turn's
roots and, for a guest, copied once into the daemon's staging dir, so what is sent is the
bytes that were checked.  Does file I/O, so it lives beside delivery, not among the pure
reply rules of bot/rules/replies.py."""

from __future__ import annotations

import mimetypes
import os
from collections.abc import Callable
from pathlib import Path
from urllib.parse import unquote, urlparse

from bot import fs
from channels.base import MediaItem


def _basename(target: str) -> str:
    if target.lower().startswith(("http://", "https://")):
        path = unquote(urlparse(target).path)
        return os.path.basename(path.rstrip("/")) or "file"
    return os.path.basename(target.rstrip("/\\")) or target


MAX_STAGED_BYTES = 50 * 1024 * 1024  # the largest attachment any channel uploads


def resolve_media(
    items: list[MediaItem], roots: list[Path], stage: Path | None = None
) -> tuple[list[MediaItem], list[str]]:
    """Check media targets before delivery.

    URLs pass.  A local path (absolute, ``~``-relative, ``file://``, or relative → resolved
    against ``roots[0]``) must exist, be a regular file and — following symlinks — lie inside
    one of ``roots``.  Anything else becomes a note ``[attachment unavailable: <basename>]``.
    Returned items have absolute targets, ``name`` and (when guessable) ``mime`` filled.

    With ``stage`` (a guest's turn: ``roots[0]`` is a directory the guest can write) a local file is instead read once through the root's handle with no symbolic
    link followed at any component (``bot.fs.copy_out``) and copied into ``stage``, a
    directory only the daemon writes; the returned target is that copy, so what the
    outbox sends later, retries included, is exactly the bytes checked here.
    """
    if not items:  # most replies: no root to resolve (a few system calls each)
        return [], []
    ok: list[MediaItem] = []
    notes: list[str] = []
    check = _staged(roots[0], stage) if stage is not None and roots else _inside(roots)
    for item in items:
        target = item.target.strip()
        name = item.name or _basename(target)
        if target.lower().startswith(("http://", "https://")):
            mime = item.mime or (mimetypes.guess_type(urlparse(target).path)[0] or "")
            ok.append(MediaItem(kind=item.kind, target=target, name=name, mime=mime))
            continue
        path_text = target
        if path_text.lower().startswith("file://"):
            path_text = unquote(urlparse(path_text).path)
        real: Path | None = None
        try:
            p: Path | None = Path(path_text).expanduser()
            if p is not None and not p.is_absolute():
                p = (Path(roots[0]).expanduser() / p) if roots else None
            if p is not None:
                real = check(p)
        except (OSError, RuntimeError, ValueError):
            real = None
        if real is None:
            notes.append(f"[attachment unavailable: {name}]")
            continue
        shown = item.name or (p.name if stage is not None and p is not None else real.name)
        mime = item.mime or (mimetypes.guess_type(shown)[0] or "")
        ok.append(MediaItem(kind=item.kind, target=str(real), name=shown, mime=mime))
    return ok, notes


def _inside(roots: list[Path]) -> Callable[[Path], Path | None]:
    """The check for roots only the owner writes: the real path of a regular file inside
    one of ``roots`` (links followed), else None."""
    resolved_roots: list[Path] = []
    for root in roots:
        try:
            resolved_roots.append(Path(root).expanduser().resolve())
        except (OSError, RuntimeError):
            continue

    def check(p: Path) -> Path | None:
        candidate = p.resolve(strict=True)
        if candidate.is_file() and any(candidate.is_relative_to(r) for r in resolved_roots):
            return candidate
        return None

    return check


def _staged(root: Path, stage: Path) -> Callable[[Path], Path | None]:
    """The check for a root a guest can write: a private copy of the file, read through
    the root's handle with no link followed (``bot.fs``); raises when refused."""
    root = Path(root).expanduser()
    return lambda p: fs.copy_out(root, p, stage, MAX_STAGED_BYTES)
