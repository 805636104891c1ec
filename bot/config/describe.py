"""What the config says about itself, in words: the risky-but-valid settings ``chela check``
and ``chela doctor`` warn about."""

from __future__ import annotations

from channels.util import is_loopback, parse_listen

from .channels import MESSAGING, ChannelPolicy
from .schema import Config


def _channel_warnings(name: str, ch: ChannelPolicy) -> list[str]:
    warns: list[str] = []
    if ch.dm_policy == "open":
        warns.append(f'channels.{name}.dm_policy = "open": anyone who finds the bot can use it')
    if ch.dm_policy == "allowlist" and not ch.allow_from:
        warns.append(
            f'channels.{name}.dm_policy = "allowlist" with an empty allow_from admits nobody'
        )
    if ch.group_policy == "open":
        warns.append(
            f'channels.{name}.group_policy = "open": any group the bot is added to is served'
        )
    if ch.streaming == "partial" and not ch.EDITS:
        warns.append(
            f'channels.{name}.streaming = "partial": {ch.TITLE} cannot edit '
            "messages, so there is no live preview (replies arrive whole)"
        )
    return warns


def _exec_warnings(cfg: Config) -> list[str]:
    warns: list[str] = []
    exec_on = "exec" in cfg.tools.enabled or "exec" in cfg.tools.guest
    if cfg.tools.exec.security == "full" and exec_on:
        warns.append('tools.exec.security = "full": the model may run any shell command')
    if cfg.tools.exec.sandbox == "off" and exec_on:
        warns.append(
            'tools.exec.sandbox = "off": commands run as you, with your files, '
            "the state dir and the network"
        )
    if "exec" in cfg.tools.guest:
        warns.append(
            "tools.guest lists exec: paired friends and group members can run commands "
            "(in their own directory, sandboxed)"
        )
    return warns


def _http_warnings(cfg: Config) -> list[str]:
    http = cfg.channels.http
    if not http.enabled:
        return []
    host, _ = parse_listen(http.listen)
    if is_loopback(host):
        return []
    return [
        f"channels.http.listen = {http.listen!r} is reachable from other machines "
        "(the token is required, but it travels in clear text without TLS)"
    ]


def _ui_warnings(cfg: Config) -> list[str]:
    origin = cfg.ui.public_origin
    if not (cfg.channels.http.enabled and cfg.ui.enabled):
        return []
    if not origin:
        host, _ = parse_listen(cfg.channels.http.listen)
        if is_loopback(host):
            return []
        return [
            f"the Control UI is not served: channels.http.listen = {cfg.channels.http.listen!r} "
            "is not loopback and ui.public_origin is empty"
        ]
    if origin.startswith("https://"):
        return []
    return [
        f"ui.public_origin = {origin!r} is not https://: the Control UI's cookie and login "
        "codes would travel in clear text; put a TLS proxy in front and use its https address"
    ]


def config_warnings(cfg: Config) -> list[str]:
    """Risky but valid settings, for ``chela check``."""
    warns: list[str] = []
    for name in MESSAGING:
        ch: ChannelPolicy = getattr(cfg.channels, name)
        if ch.enabled:
            warns += _channel_warnings(name, ch)
    return warns + _exec_warnings(cfg) + _http_warnings(cfg) + _ui_warnings(cfg)
