"""``GET /ui/api/config/file`` and ``POST /ui/api/config/file``: the config file as text, the
form's common keys, and Save.

Save takes the new text (the raw editor) or ``{"set": {"section.key": value}}`` (the form,
applied to the file's text), with ``base``: the SHA-256 of the file as the page loaded it.
In order: the file changed since (another editor, another process) → 409 and nothing
written; a verdict with errors → 400 with each problem by TOML key and nothing written;
else the old file is kept as ``config.toml.bak`` and the new one replaces it atomically.
The verdict is ``chela check``'s own (the command line hands it down as
``UiContext.config_check``), after two refusals of the page's own: a TOML that does not parse,
and a ``*_env`` key holding a value instead of a variable's name (the secret is never
written, nor repeated in the answer).  The running daemon keeps its config until restarted:
the answer lists the keys that differ from it."""

from __future__ import annotations

import asyncio
import hashlib
import os
import tomllib
from pathlib import Path
from typing import Any

from aiohttp import web

from bot import fs
from bot.config import Config, ConfigError, parse_config
from bot.ui import config_text
from bot.ui.api.common import BadRequest, body, conflict, guarded, state
from bot.ui.context import UiContext
from bot.ui.hub import scrub, secret_values

MAX_CONFIG = 1024 * 1024  # bytes of config.toml read
RESTART_HOW = (
    "restart the daemon to apply them: `systemctl --user restart chela` (the system unit: "
    "`sudo systemctl restart chela`), or stop `chela run` (Ctrl-C) and start it again"
)
Problem = dict[str, str]


def config_path(ctx: UiContext) -> Path | None:
    path = ctx.config_path or ctx.cfg.source
    return Path(path).expanduser() if path else None


def digest(data: bytes | None) -> str | None:
    return hashlib.sha256(data).hexdigest() if data is not None else None


def read_file(path: Path) -> bytes | None:
    """The file's bytes; None when there is none yet."""
    try:
        return fs.read_in(path, MAX_CONFIG)
    except FileNotFoundError:
        return None


def _problem(key: str, message: str) -> Problem:
    return {"key": key, "message": message}


def verdict(
    ctx: UiContext, text: str, path: Path
) -> tuple[list[Problem], list[str], Config | None]:
    """(errors by key, warnings, the parsed config): the page's refusals, then the loader's,
    then ``chela check``'s."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        return [_problem("", f"TOML syntax error: {e}")], [], None
    bad_env = config_text.env_problems(data)
    if bad_env:
        return [_problem(k, f"{k}: {m}") for k, m in bad_env], [], None
    try:
        cfg = parse_config(data, path)
    except ConfigError as e:
        return [_problem(k, m) for k, m in config_text.load_errors(str(e))], [], None
    if ctx.config_check is None:
        why = "this daemon was not started by `chela run`, so `chela check` cannot judge it"
        return [_problem("", why)], [], cfg
    found = ctx.config_check(cfg)
    errors = [_problem(*config_text.by_key(line)) for line in found.errors]
    return errors, list(found.warnings), cfg


def restart(ctx: UiContext, saved: Config | None) -> dict[str, Any]:
    """Which keys of the file differ from the running config: they need a restart."""
    if saved is None:
        return {"needed": False, "keys": [], "how": RESTART_HOW}
    keys = config_text.changed_keys(ctx.cfg.model_dump(mode="json"), saved.model_dump(mode="json"))
    return {"needed": bool(keys), "keys": keys, "how": RESTART_HOW}


def _form(cfg: Config) -> list[dict[str, Any]]:
    rows = []
    for f in config_text.FORM:
        value = config_text.value_at(cfg, f.path)
        row: dict[str, Any] = {"key": f.path, "kind": f.kind, "value": value}
        if f.kind == "env":  # the variable's name and whether it is set, never its value
            row["set"] = bool(value and os.environ.get(str(value)))
        rows.append(row)
    return rows


def _parsed(ctx: UiContext, text: str, path: Path) -> Config | None:
    try:
        return parse_config(tomllib.loads(text), path)
    except (tomllib.TOMLDecodeError, ConfigError):
        return None


async def load(request: web.Request) -> web.Response:
    ctx = state(request).ctx
    path = config_path(ctx)
    if path is None:
        return conflict("the daemon runs on the built-in defaults: no config file to edit")
    raw = read_file(path)
    text = (raw or b"").decode("utf-8", "replace")
    current = _parsed(ctx, text, path) if raw is not None else None
    return web.json_response(
        {
            "path": str(path),
            "exists": raw is not None,
            "text": scrub(text, secret_values(ctx.cfg)),
            "sha256": digest(raw),
            "form": _form(current or ctx.cfg),
            "restart": restart(ctx, current),
        }
    )


def _new_text(data: dict[str, Any], old: bytes | None) -> str:
    if isinstance(data.get("text"), str):
        return str(data["text"])
    changes = data.get("set")
    if not isinstance(changes, dict) or not changes:
        raise BadRequest('give "text" (the whole file) or "set" ({"section.key": value})')
    try:
        return config_text.apply_form((old or b"").decode("utf-8", "replace"), changes)
    except config_text.FormError as e:
        raise BadRequest(str(e)) from None


def _refused(errors: list[Problem], warnings: list[str]) -> web.Response:
    first = errors[0]["message"]
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    message = f"nothing was written: {first}{more}"
    return web.json_response(
        {
            "error": {"code": "bad_request", "message": message, "problems": errors},
            "warnings": warnings,
        },
        status=400,
    )


def _stale(path: Path) -> web.Response:
    return conflict(
        f"{path.name} changed since this page loaded it (another editor or process): "
        "nothing was written; Reload to see the file as it is now, then make the change again"
    )


def write(path: Path, old: bytes | None, new: bytes) -> None:
    """The old file kept as ``<name>.bak``, the new one put in place atomically."""
    root = path.parent
    if old is not None:
        fs.write_under(root, path.with_name(path.name + ".bak"), old)
    fs.write_under(root, path, new, keep_mode=True)


async def save(request: web.Request) -> web.Response:
    ctx = state(request).ctx
    data = await body(request)
    path = config_path(ctx)
    if path is None:
        return conflict("the daemon runs on the built-in defaults: no config file to edit")
    base = data.get("base")
    if base is not None and not isinstance(base, str):
        raise BadRequest("base must be the sha256 the page loaded (or null for no file)")
    old = read_file(path)
    if base != digest(old):
        return _stale(path)
    text = _new_text(data, old)
    errors, warnings, cfg = await asyncio.to_thread(verdict, ctx, text, path)
    if errors:
        return _refused(errors, warnings)
    if digest(read_file(path)) != base:  # changed while the verdict ran
        return _stale(path)
    new = text.encode("utf-8")
    write(path, old, new)
    return web.json_response(
        {
            "path": str(path),
            "sha256": digest(new),
            "warnings": warnings,
            "restart": restart(ctx, cfg),
        }
    )


def register(app: web.Application) -> None:
    app.router.add_get("/api/config/file", guarded(load))
    app.router.add_post("/api/config/file", guarded(save))
