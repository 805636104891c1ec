"""The UI's files: ``bot/ui/static/`` as installed (package data), served under
``/ui/``; ``/ui/`` itself is ``index.html``.  Only files inside that folder are served: no
path with a ``..`` or hidden part, no symbolic link out of it."""

from __future__ import annotations

from pathlib import Path

from aiohttp import web

from bot.ui.errors import ui_error

STATIC = Path(__file__).resolve().parent / "static"


def register(app: web.Application, root: Path = STATIC) -> None:
    """Add the file routes; call it after the API's (its pattern excludes ``api/``)."""

    async def index(request: web.Request) -> web.StreamResponse:
        return _file(root, "index.html")

    async def asset(request: web.Request) -> web.StreamResponse:
        return _file(root, request.match_info["name"])

    app.router.add_get("/", index)
    app.router.add_get(r"/{name:(?!api/)[A-Za-z0-9_./-]+}", asset)


def _file(root: Path, name: str) -> web.StreamResponse:
    parts = name.split("/")
    if any(not p or p.startswith(".") for p in parts):
        return ui_error(404, "not_found", f"no file {name}")
    path = root.joinpath(*parts)
    try:
        real = path.resolve(strict=True)
    except (OSError, RuntimeError):
        return ui_error(404, "not_found", f"no file {name}")
    if not real.is_file() or not real.is_relative_to(root.resolve()):
        return ui_error(404, "not_found", f"no file {name}")
    return web.FileResponse(real, headers={"Cache-Control": "no-cache"})
