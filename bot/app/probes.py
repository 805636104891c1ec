"""Each chat channel's doctor probe (``chela doctor``): the one authenticated request that
shows its token (or its server) works.  Named by the channel's descriptor
(``bot.app.channels.ChannelSpec.probe``), so ``chela doctor`` names no platform.

A probe takes an aiohttp session, the config, the section of the channel account it
checks (each account has its own token or server) and the account's name, and returns a
``Probe``: whether it worked, what it saw, what to do when it did not, and a risk to say
even when it works (``warning``).  Network errors are the caller's."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:
    from bot.config import Config

DEFAULT_DISCORD_API = "https://discord.com/api/v10"


class Probe(NamedTuple):
    ok: bool
    detail: str
    fix: str = ""
    warning: str = ""


LINKED_DEVICE_WARNING = (
    "WhatsApp as a linked device is unofficial: WhatsApp may restrict or ban the number "
    "(use a dedicated number, not your own)"
)
LINKED_DEVICE_NOTE = (
    f"{LINKED_DEVICE_WARNING}. Link it: pip install 'chela[whatsapp]', then chela whatsapp login"
)


async def _call(session: Any, method: str, url: str, **kw: Any) -> tuple[int, dict | None]:
    async with session.request(method, url, **kw) as r:
        try:
            body = await r.json(content_type=None)
        except ValueError:
            body = None
        return r.status, body if isinstance(body, dict) else None


async def telegram(s: Any, cfg: Config, t: Any, account: str = "") -> Probe:
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


async def discord(s: Any, cfg: Config, d: Any, account: str = "") -> Probe:
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


async def slack(s: Any, cfg: Config, sl: Any, account: str = "") -> Probe:
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


async def signal(s: Any, cfg: Config, g: Any, account: str = "") -> Probe:
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


def linked_device(cfg: Config, account: str) -> Probe:
    """A linked device: whether its session is linked (read from the session database,
    without connecting), always with the unofficial protocol's risk."""
    try:
        from channels.whatsapp.linked import session
    except ImportError:  # a Chela without the linked-device transport
        return Probe(False, "this Chela has no linked-device transport", "use agent_platform")
    from channels.base import ChannelError

    db = session.session_path(cfg.agent.state_dir, account)
    try:
        st = session.status(db)
    except ChannelError as e:  # neonize (the extra) is missing
        return Probe(False, str(e), "pip install 'chela[whatsapp]'", LINKED_DEVICE_WARNING)
    if not st["paired"]:
        fix = f"link it: chela whatsapp login --account {account}"
        return Probe(False, f"no device linked (session {db})", fix, LINKED_DEVICE_WARNING)
    used = f", in use by pid {st['holder']}" if st["holder"] else ""
    return Probe(True, f"linked as {st['jid']}{used}", warning=LINKED_DEVICE_WARNING)


async def whatsapp(s: Any, cfg: Config, w: Any, account: str = "default") -> Probe:
    """A zero-timeout poll (reads nothing away: the platform takes no acknowledgement), unless
    a running daemon polls this key: a second poll would knock the daemon's off (409).  A
    linked device: its session (:func:`linked_device`)."""
    from bot.app.lock import running_daemon

    if w.transport == "linked_device":
        return linked_device(cfg, account)

    daemon = running_daemon(cfg.agent.state_dir)
    if daemon is not None:
        return Probe(
            True,
            f"not polled: the running daemon (pid {daemon.get('pid')}) holds this key; "
            "`chela status` shows its state",
        )
    status, body = await _call(
        s,
        "GET",
        f"{w.api_base.rstrip('/')}/updates",
        params={"offset": "0", "timeout": "0", "limit": "1"},  # the oldest kept: its agent id
        headers={"Authorization": f"Bearer {cfg.secret(w.api_key_env)}"},
    )
    if status in (200, 204):
        entries = (body or {}).get("entry") or [{}]
        agent = entries[0].get("id") if isinstance(entries[0], dict) else None
        return Probe(True, f"key accepted (agent {agent})" if agent else "key accepted")
    if status == 409:
        return Probe(
            False, "another client is polling this key (HTTP 409)", "stop the other client"
        )
    return Probe(
        False,
        f"key rejected by GET /updates (HTTP {status})",
        f"put the API key from WhatsApp > Settings > Agents > your agent in ${w.api_key_env}",
    )
