"""Why an MCP server failed, in words a user can act on (issue 27).

* A stdio server that exits at start-up is reported by the SDK as ``Connection closed``;
  the reason is what the server wrote on stderr.  :class:`StderrCapture` keeps each
  attempt's stderr (in the server's log file, or a temporary file without a log dir) and
  :func:`with_stderr` appends its last lines (at most :data:`STDERR_LINES`, secrets
  scrubbed, invisible characters removed) to the error.
* An HTTP server that answers 401/403 is reported as ``Server returned an error
  response``; :func:`refused_credentials` names the config keys to check.
* ``disabled_tools``/``enabled_tools`` accept the server's own tool names and the names the
  model sees (``fs__write_file``); :func:`tool_matches` is the rule,
  :func:`unmatched_tool_names` and :func:`disabled_tools_warnings` report names that
  match nothing.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterable
from typing import Any, TextIO

from bot.config.env_values import expand
from bot.rules.untrusted import clean_inline
from channels.redact import scrub

from .schema import tool_name

STDERR_LINES = 10
STDERR_MARK = "; the server wrote on stderr: "
_LINE_MAX = 200
_READ_MAX = 64 * 1024


class StderrCapture:
    """One connection attempt's stderr: a file the child writes to and we read back."""

    def __init__(self, file: TextIO | None = None) -> None:
        """``file``: opened for reading and appending (the server's log); None: a
        temporary file."""
        self.file: TextIO = file if file is not None else tempfile.TemporaryFile("w+")  # noqa: SIM115
        self.start = os.fstat(self.file.fileno()).st_size

    def tail(self, secrets: Iterable[str] = ()) -> list[str]:
        """The last non-blank lines written since the attempt began, scrubbed."""
        try:
            end = os.fstat(self.file.fileno()).st_size
            self.file.seek(max(self.start, end - _READ_MAX))
            text = self.file.read()
        except (OSError, ValueError):
            return []
        lines = [clean_inline(line, _LINE_MAX) for line in text.splitlines()]
        secrets = tuple(secrets)
        return [scrub(line, secrets) for line in lines if line.strip()][-STDERR_LINES:]

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.file.close()


def with_stderr(error: str, tail: list[str]) -> str:
    """``error`` with the server's last stderr lines on the same line (`` | `` between)."""
    return error + STDERR_MARK + " | ".join(tail) if tail else error


def server_secrets(cfg: Any) -> list[str]:
    """Values a server was given from the environment: never shown in its stderr."""
    values = [expand(v) for v in cfg.env.values()]
    values += [os.environ.get(env, "") for env in cfg.headers_env.values()]
    return [v for v in values if v]


def refused_credentials(cfg: Any, status: int) -> str:
    """The error for an HTTP server that answered 401/403."""
    if cfg.headers_env:
        keys = ", ".join(f"headers_env.{h} (${e})" for h, e in cfg.headers_env.items())
        hint = f"check {keys} of [[mcp.servers]] {cfg.name!r}"
    else:
        hint = (
            f"[[mcp.servers]] {cfg.name!r} sends no credentials: add "
            'headers_env = { Authorization = "ENV_VAR" } with the token in that variable'
        )
    return f"the server refused the credentials (HTTP {status}); {hint}"


# ------------------------------------------------------------------ enabled/disabled_tools
def tool_matches(server: str, remote: str, names: Iterable[str]) -> bool:
    """``remote`` (the server's name for a tool) is listed in ``names`` under its own name or
    the name the model and ``chela mcp list`` show (``<server>__<tool>``)."""
    wanted = set(names)
    return remote in wanted or tool_name(server, remote) in wanted


def unmatched_tool_names(server: str, names: Iterable[str], remotes: Iterable[str]) -> list[str]:
    """The entries of ``names`` that match none of the server's tools ``remotes``."""
    remotes = list(remotes)
    return [n for n in names if not any(tool_matches(server, r, [n]) for r in remotes)]


def _static_warnings(s: Any) -> list[str]:
    out: list[str] = []
    for key in ("enabled_tools", "disabled_tools"):
        for name in getattr(s, key):
            server, sep, _tool = name.partition("__")
            if sep and server != s.name and not name.startswith(f"{s.name}__"):
                out.append(
                    f"mcp.servers {s.name!r}: {key} entry {name!r} names a tool of server "
                    f"{server!r}; use the tool's own name or {s.name}__<tool>"
                )
            elif not name.strip():
                out.append(f"mcp.servers {s.name!r}: {key} has an empty entry")
    both = [n for n in s.disabled_tools if n in s.enabled_tools]
    if both:
        out.append(
            f"mcp.servers {s.name!r}: {', '.join(both)} is in both enabled_tools and "
            "disabled_tools (it stays disabled)"
        )
    return out


def disabled_tools_warnings(cfg: Any, listed: dict[str, list[str]] | None = None) -> list[str]:
    """Warnings about ``enabled_tools``/``disabled_tools`` of the enabled MCP servers.

    Without a connection (``chela check``) only what the config shows is checked: an entry
    prefixed with another server's name, an empty entry, a name both enabled and disabled.
    ``listed`` (server name → its tools as the server names them, e.g. from
    ``ServerStatus.remote_tools`` after a connection) adds the entries that match no tool."""
    out: list[str] = []
    for s in cfg.mcp.servers:
        if not s.enabled:
            continue
        out += _static_warnings(s)
        if listed is None or s.name not in listed:
            continue
        for key in ("enabled_tools", "disabled_tools"):
            for name in unmatched_tool_names(s.name, getattr(s, key), listed[s.name]):
                out.append(unmatched_warning(s.name, key, name))
    return out


def unmatched_warning(server: str, key: str, name: str) -> str:
    return (
        f"mcp.servers {server!r}: {key} entry {name!r} matches no tool of the server "
        f"(see `chela mcp list`); it has no effect"
    )
