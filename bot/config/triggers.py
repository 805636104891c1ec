"""``[[hooks]]`` (signed webhooks on the HTTP channel's listener) and ``[[mail]]`` (IMAP
accounts watched for new mail): each wakes an agent with an event turn.  The checks that
need the whole config (the agent exists, its tools, the HTTP channel, the secret set) are
:func:`trigger_errors`, run by the loader."""

from __future__ import annotations

import base64
import binascii
import ipaddress
import os
import re
from typing import Any, Literal

from pydantic import Field, field_validator

from .base import Model
from .durations import parse_duration

NAME_RE = re.compile(r"[a-z0-9][a-z0-9_-]{0,63}")
SCHEMES = ("github", "stripe", "standard", "hmac", "token")
DEFAULT_HOOK_PROMPT = (
    "An event arrived on webhook {name}. Tell me in one or two lines if it needs me; "
    "else answer NO_REPLY.\n\n{body}"
)
DEFAULT_MAIL_PROMPT = (
    "A mail arrived. If it needs me today, tell me in two lines; else answer NO_REPLY.\n\n{mail}"
)


def _name(v: str) -> str:
    if not NAME_RE.fullmatch(v):
        raise ValueError("use lower-case letters, digits, '-' or '_' (at most 64)")
    return v


def _deliver(v: str) -> str:
    v = v.strip()
    if v in ("owner", "none"):
        return v
    parts = v.split(":")
    if len(parts) not in (2, 3) or not all(parts):
        raise ValueError(f"{v!r}: use owner, none or <channel>[:<account>]:<chat id>")
    return v


class EventSource(Model):
    """What a hook and a mail account share: a name, the agent whose turn an event runs, where
    its answer goes and the tools it may use (none by default)."""

    name: str
    agent: str = ""  # "" = the default agent
    deliver: str = "owner"
    tools: list[str] = Field(default_factory=list)

    @field_validator("name")
    @classmethod
    def _check_name(cls, v: str) -> str:
        return _name(v)

    @field_validator("deliver")
    @classmethod
    def _check_deliver(cls, v: str) -> str:
        return _deliver(v)


class HookConfig(EventSource):
    """One ``[[hooks]]`` table: ``POST /hooks/<name>``."""

    scheme: Literal["github", "stripe", "standard", "hmac", "token"]
    secret_env: str
    prompt: str = DEFAULT_HOOK_PROMPT
    header: str = ""  # hmac: the header holding the signature
    tolerance: str = "5m"  # stripe/standard: how far a signed timestamp may be from now

    @field_validator("tolerance")
    @classmethod
    def _tolerance(cls, v: str) -> str:
        if parse_duration(v) <= 0:
            raise ValueError(f"invalid duration {v!r}: must be more than 0")
        return v

    @property
    def tolerance_seconds(self) -> float:
        return parse_duration(self.tolerance)


class MailConfig(EventSource):
    """One ``[[mail]]`` table: an IMAP folder watched for new mail (read-only)."""

    host: str
    port: int = Field(993, ge=1, le=65535)
    tls: Literal["implicit", "starttls", "none"] = "implicit"
    username_env: str
    password_env: str
    folder: str = "INBOX"
    from_allow: list[str] = Field(default_factory=list)  # addresses or @domains; [] = all
    prompt: str = DEFAULT_MAIL_PROMPT

    @field_validator("from_allow")
    @classmethod
    def _allow(cls, v: list[str]) -> list[str]:
        return [x.strip().lower() for x in v if x.strip()]


def _loopback(host: str) -> bool:
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _common_errors(key: str, item: Any, ids: list[str], tools_of: Any, channels: Any) -> list[str]:
    out = _deliver_error(key, item.deliver, channels)
    if item.agent and item.agent not in ids:
        out.append(f"{key}.agent: unknown agent {item.agent!r} (agents: {', '.join(ids)})")
        return out
    has = set(tools_of(item.agent))
    for t in item.tools:
        if t not in has:
            out.append(f"{key}.tools: {t!r} is not a tool of agent {item.agent or ids[0]!r}")
    return out


def _deliver_error(key: str, deliver: str, channels: Any) -> list[str]:
    if deliver in ("owner", "none"):
        return []
    channel = deliver.partition(":")[0]
    section = getattr(channels, channel, None)
    if section is None or not getattr(section, "enabled", False):
        return [f"{key}.deliver: channel {channel!r} is not an enabled channel"]
    return []


def _secret_error(key: str, env: str) -> list[str]:
    if not os.environ.get(env, ""):
        return [f"{key}: the environment variable {env} is not set"]
    return []


def _hook_secret_error(key: str, hook: Any, api_token_env: str) -> list[str]:
    """A hook's secret opens that hook alone: never the HTTP API's token; a Standard
    Webhooks secret (``whsec_…``) must be base64 after its prefix (else every delivery would
    be refused with a 401 and nothing saying why)."""
    value = os.environ.get(hook.secret_env, "")
    if not value:
        return []
    if api_token_env and value == os.environ.get(api_token_env, ""):
        return [f"{key}: the same secret as channels.http.token_env; a hook needs its own"]
    if hook.scheme == "standard" and value.startswith("whsec_"):
        try:
            base64.b64decode(value.removeprefix("whsec_"), validate=True)
        except (binascii.Error, ValueError):
            return [f"{key}: {hook.secret_env} starts with whsec_ but the rest is not base64"]
    return []


def trigger_errors(cfg: Any, ids: list[str], tools_of: Any) -> list[str]:
    """Every problem of ``[[hooks]]`` and ``[[mail]]`` that one key alone cannot show, one
    ``key: message`` line each.  ``ids``: the agent ids (the default first); ``tools_of``:
    agent id ("" = default) → the names of its enabled tools."""
    out: list[str] = []
    seen: set[str] = set()
    for i, hook in enumerate(cfg.hooks):
        key = f"hooks[{i}]"
        if hook.name in seen:
            out.append(f"{key}.name: {hook.name!r} is used by another hook")
        seen.add(hook.name)
        if not cfg.channels.http.enabled:
            out.append(f"{key}: webhooks are served by the HTTP channel; enable [channels.http]")
        if hook.scheme == "hmac" and not hook.header.strip():
            out.append(f"{key}.header: the hmac scheme needs the header that holds the signature")
        out += _secret_error(f"{key}.secret_env", hook.secret_env)
        out += _hook_secret_error(f"{key}.secret_env", hook, cfg.channels.http.token_env)
        out += _common_errors(key, hook, ids, tools_of, cfg.channels)
    seen = set()
    for i, box in enumerate(cfg.mail):
        key = f"mail[{i}]"
        if box.name in seen:
            out.append(f"{key}.name: {box.name!r} is used by another [[mail]] account")
        seen.add(box.name)
        if box.tls == "none" and not _loopback(box.host):
            out.append(f"{key}.tls: 'none' sends the password in clear: only to a loopback host")
        out += _secret_error(f"{key}.username_env", box.username_env)
        out += _secret_error(f"{key}.password_env", box.password_env)
        out += _common_errors(key, box, ids, tools_of, cfg.channels)
    return out
