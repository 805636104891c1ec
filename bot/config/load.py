"""Loading the config: the file's path, TOML parsing, validation with errors that name the TOML
key path (``channels.telegram.dm_policy: ...``), and the secrets registry filled once."""

from __future__ import annotations

import os
import tomllib
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from .agents import agent_config, agent_ids, config_errors
from .schema import Config
from .env_values import collect
from .triggers import trigger_errors


class ConfigError(Exception):
    """A config problem; the message names the TOML key path."""


def _loc(loc: tuple[int | str, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out


def _format_errors(err: ValidationError) -> str:
    lines = []
    for e in err.errors():
        loc = tuple(p for p in e["loc"] if p not in ("function-after",))
        key = _loc(loc) or "(top level)"
        if e["type"] == "extra_forbidden":
            lines.append(f"{key}: unknown key")
        else:
            msg = e["msg"].removeprefix("Value error, ")
            lines.append(f"{key}: {msg}")
    return "\n".join(lines)


def parse_config(data: dict[str, Any], source: Path | None = None) -> Config:
    where = f" in {source}" if source else ""
    try:
        cfg = Config.model_validate(data)
    except ValidationError as e:
        raise ConfigError(f"invalid config{where}:\n{_format_errors(e)}") from None
    problems = config_errors(cfg)  # agents, accounts, bindings: what one key alone cannot show
    if not problems:  # webhooks and mail: their agents and tools
        problems = trigger_errors(cfg, agent_ids(cfg), lambda a: _tools_of(cfg, a))
    if problems:
        raise ConfigError(f"invalid config{where}:\n" + "\n".join(problems))
    cfg.source = source
    cfg._secrets = collect(cfg.secret_env_names())  # the registry, filled now
    return cfg


def _tools_of(cfg: Config, agent: str) -> list[str]:
    return list(agent_config(cfg, agent or cfg.agent.id).tools.enabled)


def resolve_config_path(explicit: str | None = None) -> Path | None:
    """``--config`` → ``$CHELA_CONFIG`` → ``./config.toml`` → ``~/.chela/config.toml``."""
    if explicit:
        return Path(explicit).expanduser()
    env = os.environ.get("CHELA_CONFIG")
    if env:
        return Path(env).expanduser()
    for candidate in (Path("config.toml"), Path("~/.chela/config.toml").expanduser()):
        if candidate.is_file():
            return candidate
    return None


def load_config(explicit: str | None = None) -> Config:
    """Load and validate the config; with no file anywhere the defaults are used."""
    path = resolve_config_path(explicit)
    if path is None:
        return parse_config({})
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise ConfigError(f"config file not found: {path}") from None
    except OSError as e:
        raise ConfigError(f"cannot read config file {path}: {e.strerror}") from None
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: the config is not valid UTF-8") from None
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{path}: TOML syntax error: {e}") from None
    return parse_config(data, path)
