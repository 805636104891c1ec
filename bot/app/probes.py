"""Each chat channel's doctor probe (``chela doctor``): the one authenticated request that
shows its token (or its server) works.  Named by the channel's descriptor
(``bot.app.channels.ChannelSpec.probe``), so ``chela doctor`` names no platform.

A probe takes an aiohttp session, the config and the section of the channel account it
checks (each account has its own token or server) and returns a ``Probe``: whether it
worked, what it saw, and what to do when it did not.  Network errors are the caller's."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:
    from bot.config import Config

DEFAULT_DISCORD_API = "https://discord.com/api/v10"


class Probe(NamedTuple):
    ok: bool
    detail: str
    fix: str = ""


async def _call(session: Any, method: str, url: str, **kw: Any) -> tuple[int, dict | None]:
    async with session.request(method, url, **kw) as r:
        try:
            body = await r.json(content_type=None)
        except ValueError:
            body = None
        return r.status, body if isinstance(body, dict) else None


async def telegram(s: Any, cfg: Config, t: Any) -> Probe:
    status, body = await _call(
        s, "GET", f"{t.api_base.rstrip('/')}/bot{cfg.secret(t.token_env)}/getMe"
    )
    if status == 200 and body and body.get("ok"):
        return Probe(True, f"token accepted (@{body['result'].get('username', '?')})")
    return Probe(
        False,
        f"token rejected by getMe (HTTP {status})",
        f"put the token from @BotFather in ${t.token_env}",
    )


async def discord(s: Any, cfg: Config, d: Any) -> Probe:
    base = (d.api_base or DEFAULT_DISCORD_API).rstrip("/")
    status, body = await _call(
        s, "GET", f"{base}/users/@me", headers={"Authorization": f"Bot {cfg.secret(d.token_env)}"}
    )
    if status == 200 and body:
        return Probe(True, f"token accepted ({body.get('username', '?')})")
    return Probe(
        False,
        f"token rejected by /users/@me (HTTP {status})",
        f"put the bot token from the Discord developer portal in ${d.token_env}",
    )


async def slack(s: Any, cfg: Config, sl: Any) -> Probe:
    status, body = await _call(
        s,
        "POST",
        f"{sl.api_base.rstrip('/')}/auth.test",
        headers={"Authorization": f"Bearer {cfg.secret(sl.bot_token_env)}"},
    )
    if status == 200 and body and body.get("ok"):
        return Probe(True, f"token accepted ({body.get('team', '?')} / {body.get('user', '?')})")
    err = (body or {}).get("error", f"HTTP {status}")
    return Probe(
        False,
        f"auth.test refused the bot token ({err})",
        f"put the xoxb- bot token in ${sl.bot_token_env}",
    )


async def signal(s: Any, cfg: Config, g: Any) -> Probe:
    url = f"{(g.api_base or g.http_url).rstrip('/')}/api/v1/rpc"
    status, body = await _call(
        s, "POST", url, json={"jsonrpc": "2.0", "method": "version", "id": 1}
    )
    if status == 200 and body and "result" in body:
        return Probe(True, f"signal-cli {body['result'].get('version', '?')} at {url}")
    return Probe(
        False,
        f"signal-cli at {url} did not answer `version` (HTTP {status})",
        "start `signal-cli -a ACCOUNT daemon --http 127.0.0.1:8080` or fix channels.signal.http_url",
    )
