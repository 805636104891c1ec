"""What ``chela run`` says as it starts, and how a taken listen address is explained."""

from __future__ import annotations

import errno
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from bot.config import Config
    from channels.base import Channel


def heartbeat_schedule(cfg: Config) -> str:
    hb = cfg.heartbeat
    if hb.every_seconds <= 0:
        return "off"
    out = f"every {hb.every}, target {hb.target}"
    if hb.active_hours:
        out += f", active {hb.active_hours.start}-{hb.active_hours.end}"
    return out


def startup_lines(cfg: Config, channels: list[str]) -> list[str]:
    """What ``chela run`` says first: where everything is and what will run."""
    lines = [
        f"config file: {cfg.source}"
        if cfg.source
        else "no config file found (looked at --config, $CHELA_CONFIG, ./config.toml, ~/.chela/config.toml): "
        "running on defaults; create one with `chela onboard`",
        f"workspace: {cfg.agent.workspace}",
        f"state dir: {cfg.agent.state_dir}",
        f"channels: {', '.join(channels) or 'none'}",
        f"heartbeat: {heartbeat_schedule(cfg)}",
    ]
    h = cfg.channels.http
    lines.append(
        f"HTTP API: http://{h.listen}/v1/chat/completions" if h.enabled else "HTTP API: off"
    )
    from bot.ui.where import startup_line

    lines.append(startup_line(cfg))
    return lines


def address_in_use(e: BaseException) -> bool:
    """The error (or what it was raised from) is a bind to an address already taken."""
    seen: BaseException | None = e
    while seen is not None:
        if isinstance(seen, OSError) and seen.errno == errno.EADDRINUSE:
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def holder_hint(ch: Channel) -> str:
    """`` (held by pid N: name)`` for a listening channel whose port another process holds."""
    from bot.app.ports import describe_holder

    port = getattr(ch, "port", None)
    if not isinstance(port, int) or port <= 0:
        return ""
    who = describe_holder(port)
    return f" (port {port} is held by {who})" if who else f" (port {port} is taken)"
