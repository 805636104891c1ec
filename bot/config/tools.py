"""``[tools]`` (the built-in tools, exec, the web tools) and ``[mcp]`` (MCP servers)."""

from __future__ import annotations

import ipaddress
import re
from typing import Literal

from pydantic import Field, field_validator, model_validator

from .base import Model
from .browser import BrowserConfig


DEFAULT_EXEC_ALLOW = ["ls", "cat", "grep", "head", "tail", "wc", "find", "sort", "python3", "git"]


class ExecConfig(Model):
    security: Literal["deny", "allowlist", "ask", "full"] = "allowlist"
    allow: list[str] = Field(default_factory=lambda: list(DEFAULT_EXEC_ALLOW))
    sandbox: Literal["on", "off"] = "on"
    network: bool = False
    timeout_seconds: float = Field(60, gt=0)


DEFAULT_TOOLS = [
    "read",
    "write",
    "edit",
    "exec",
    "memory_search",
    "memory_get",
    "message",
    "session_status",
    "cron",  # reminders work out of the box (owner-only: OWNER_ONLY_TOOLS)
]
# Every built-in tool's name, for checking tools.enabled/guest without importing the tools
# (`chela run` checks its config before the first poll); tests hold it equal to the registry's
BUILTIN_TOOLS = (*DEFAULT_TOOLS, "sessions_spawn")
# Tools a guest turn never gets, whatever tools.guest says.
OWNER_ONLY_TOOLS = frozenset({"memory_search", "memory_get", "cron", "browser"})


class WebConfig(Model):
    """``[tools.web]``: web_fetch and web_search."""

    allow_private_hosts: list[str] = Field(
        default_factory=list
    )  # host names, IPs or CIDRs allowed anyway
    max_redirects: int = Field(5, ge=0, le=20)
    max_bytes: int = Field(2_000_000, ge=1000)  # a longer body is cut
    max_chars: int = Field(20_000, ge=100)  # default web_fetch max_chars
    timeout_seconds: float = Field(20, gt=0)
    user_agent: str = "Mozilla/5.0 (compatible; Chela/0.1; +https://github.com/chela)"
    search_provider: Literal["auto", "brave", "tavily", "searxng", "duckduckgo"] = "auto"
    brave_api_key_env: str = "BRAVE_API_KEY"
    tavily_api_key_env: str = "TAVILY_API_KEY"
    brave_api_base: str = "https://api.search.brave.com"
    tavily_api_base: str = "https://api.tavily.com"
    searxng_url: str = ""
    duckduckgo_url: str = "https://html.duckduckgo.com"

    @field_validator("allow_private_hosts")
    @classmethod
    def _hosts(cls, v: list[str]) -> list[str]:
        out = []
        for raw in v:
            x = raw.strip().lower()
            if not x:
                raise ValueError("an empty host")
            if "/" in x:
                try:
                    ipaddress.ip_network(x, strict=False)
                except ValueError:
                    raise ValueError(f"{x!r} is not a valid CIDR") from None
            out.append(x)
        return out


class ToolsConfig(Model):
    enabled: list[str] = Field(default_factory=lambda: list(DEFAULT_TOOLS))
    guest: list[str] = Field(default_factory=lambda: ["session_status"])
    exec: ExecConfig = Field(default_factory=ExecConfig)
    web: WebConfig = Field(default_factory=WebConfig)
    browser: BrowserConfig = Field(default_factory=BrowserConfig)

    @field_validator("guest")
    @classmethod
    def _guest(cls, v: list[str]) -> list[str]:
        bad = [t for t in v if t in OWNER_ONLY_TOOLS]
        if bad:
            raise ValueError(
                f"{', '.join(bad)} can never be given to guests (owner-only tools: "
                f"{', '.join(sorted(OWNER_ONLY_TOOLS))})"
            )
        return v


class McpServerConfig(Model):
    """One ``[[mcp.servers]]`` entry: stdio (``command``) or streamable HTTP (``url``)."""

    name: str
    enabled: bool = True
    command: str = ""
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)  # "${VAR}" is taken from Chela's environment
    cwd: str = ""
    url: str = ""
    headers_env: dict[str, str] = Field(
        default_factory=dict
    )  # header name -> env var holding its value
    enabled_tools: list[str] = Field(default_factory=list)  # empty = all
    disabled_tools: list[str] = Field(default_factory=list)
    timeout_seconds: float = Field(60, gt=0)  # per tool call
    connect_timeout_seconds: float = Field(30, gt=0)

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not re.fullmatch(r"[A-Za-z0-9-]+(_[A-Za-z0-9-]+)*", v) or len(v) > 32:
            raise ValueError(
                "use letters, digits, '-' or single '_' (at most 32); "
                "tools are named <server>__<tool>"
            )
        return v

    @model_validator(mode="after")
    def _transport(self) -> McpServerConfig:
        if bool(self.command) == bool(self.url):
            raise ValueError(
                "set either command (a stdio server) or url (a streamable HTTP server)"
            )
        if self.url and not re.match(r"https?://", self.url):
            raise ValueError("url must start with http:// or https://")
        return self


class McpConfig(Model):
    servers: list[McpServerConfig] = Field(default_factory=list)

    @field_validator("servers")
    @classmethod
    def _unique(cls, v: list[McpServerConfig]) -> list[McpServerConfig]:
        seen: set[str] = set()
        for s in v:
            if s.name.lower() in seen:
                raise ValueError(f"two servers are named {s.name!r}")
            seen.add(s.name.lower())
        return v
