"""``GET /ui/api/sessions/{key}/media/{id}``: an image of one session's own stored messages
( "images come only from the session's own media through an authenticated
``/ui/api/`` route").

An image id is ``<message row id>-<n>``: the n-th image of that stored message, never a
path.  A user message's images are the references intake stored with it (the resized copy
in the media dir, or in a guest's own directory); an assistant message's are the image
markers of its reply, resolved as delivery resolves them (the workspace or the media
dir for an owner session, the guest's directory for a guest's).  What is served:

- only a file a message of *that* session references (another session's id: 404);
- only below the roots the session may send from, read through the root's handle with no
  symbolic link followed at any component (``bot.fs``, §9.5): a link out is a 404;
- only an image type from :data:`IMAGE_TYPES` whose bytes are that type (SVG never), with
  ``X-Content-Type-Options: nosniff`` and ``Content-Disposition: inline``.

Every refusal is the same 404, so an answer tells nothing about the file system.  The
route sits behind the UI's guard like every ``/ui/api/`` route (cookie and ``X-Chela-CSRF``),
so the page reads the bytes with ``fetch`` and shows them through a ``blob:`` URL."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any

from aiohttp import web

from bot import fs
from bot.rules.admission import guest_dir
from bot.ui.api.common import guarded, not_found, session_trust, state
from bot.ui.api.images import image_refs

IMAGE_TYPES = {  # served type → how its bytes begin (SVG is not an image here: it is a page)
    "image/jpeg": (b"\xff\xd8\xff",),
    "image/png": (b"\x89PNG\r\n\x1a\n",),
    "image/gif": (b"GIF87a", b"GIF89a"),
    "image/webp": (b"RIFF",),
}
_BY_SUFFIX = {
    ".jpg": "image/jpeg",
    ".jpeg": "image/jpeg",
    ".png": "image/png",
    ".gif": "image/gif",
    ".webp": "image/webp",
}
MAX_BYTES = 32 * 1024 * 1024  # a stored image is a resized copy; a marker's file is capped too
_ID = re.compile(r"([0-9]{1,18})-([0-9]{1,3})")  # matched whole
_GONE = "no such image in this session"


# ------------------------------------------------------------------------------- reading
def _roots(cfg: Any, key: str) -> list[Path]:
    """Where this session's images may be read from (the first: where a relative marker
    points)."""
    if session_trust(cfg, key) == "guest":
        return [guest_dir(cfg, key)]
    return [Path(cfg.agent.workspace).expanduser(), Path(cfg.media_dir).expanduser()]


def _located(ref: dict[str, str], roots: list[Path]) -> tuple[Path, Path] | None:
    """(root, path) of a reference lying (lexically) inside one of ``roots``."""
    raw = ref.get("path") or ref.get("target") or ""
    if raw.lower().startswith("file://"):
        raw = raw[len("file://") :]
    if not raw or "\x00" in raw:
        return None
    path = Path(raw).expanduser()
    if not path.is_absolute():
        path = roots[0] / path
    for root in roots:
        if fs.root_holding(root, path) is not None:
            return root, path
    return None


def _mime_of(ref: dict[str, str], path: Path) -> str:
    return ref.get("mime") or _BY_SUFFIX.get(path.suffix.lower(), "")


def _read(root: Path, path: Path, mime: str) -> bytes | None:
    try:
        data = fs.read_in(path, MAX_BYTES, root)
    except (OSError, ValueError):
        return None
    if not data.startswith(IMAGE_TYPES[mime]) or (mime == "image/webp" and data[8:12] != b"WEBP"):
        return None  # the bytes are not the type it would be served as
    return data


def _stored_message(store: Any, key: str, rid: int) -> dict | None:
    """Message ``rid`` when the session's transcript lists it (its current epoch, not
    summarised away), decoded; else None."""
    rows = store.transcript_rows(key, before=rid + 1)
    if rows and rows[-1].id == rid and isinstance(rows[-1].data, dict):
        return rows[-1].data
    return None


async def serve(request: web.Request) -> web.StreamResponse:
    ctx = state(request).ctx
    key = request.match_info["key"]
    m = _ID.fullmatch(request.match_info["id"])
    if m is None:  # a path, a dot, anything else: nothing is looked up
        return not_found(_GONE)
    rid, n = int(m.group(1)), int(m.group(2))
    data = _stored_message(ctx.store, key, rid)
    refs = image_refs(data) if data is not None else []
    if n >= len(refs):
        return not_found(_GONE)
    where = _located(refs[n], _roots(ctx.cfg, key))
    if where is None:
        return not_found(_GONE)
    root, path = where
    mime = _mime_of(refs[n], path)
    if mime not in IMAGE_TYPES:
        return not_found(_GONE)
    body = await asyncio.to_thread(_read, root, path, mime)
    if body is None:
        return not_found(_GONE)
    return web.Response(
        body=body,
        content_type=mime,
        headers={"X-Content-Type-Options": "nosniff", "Content-Disposition": "inline"},
    )


def register(app: web.Application) -> None:
    app.router.add_get("/api/sessions/{key}/media/{id}", guarded(serve))
