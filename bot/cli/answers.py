"""The answers ``chela onboard`` collects, their defaults, and an existing config's
answers (the suggestions when onboarding again)."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from bot import fs
from bot.app.channels import MESSAGING, SPECS
from bot.config import parse_config
from bot.config.channels import OFFERED

CHANNELS = OFFERED  # in the order they are offered (the official WhatsApp route first)
CONFIG_MAX = 1024 * 1024  # a config file read for its answers at most

# the secrets each chat channel needs in its default mode, with their default variables
TOKEN_VARS = {
    name: secrets for name in MESSAGING if (secrets := SPECS[name].secrets(parse_config({})))
}

ID_HINTS = {name: SPECS[name].owner_id_hint for name in MESSAGING}


@dataclass
class Answers:
    model: str = "openai/gpt-4o-mini"
    api_base: str = ""
    api_key_env: str = ""
    workspace: str = "~/.chela/workspace"
    state_dir: str = "~/.chela"
    timezone: str = ""
    channels: list[str] = field(default_factory=list)
    tokens: dict[str, dict[str, str]] = field(default_factory=dict)  # channel -> {key: env var}
    owners: dict[str, list[str]] = field(default_factory=dict)  # channel -> ids
    # channel -> {section key: value}: what its descriptor's ``settings`` ask for (the
    # bot's Signal number, a self-hosted Telegram Bot API server, …)
    settings: dict[str, dict[str, str]] = field(default_factory=dict)

    def setting(self, channel: str, key: str) -> str:
        """The answer for a section key, else its descriptor's default."""
        got = self.settings.get(channel, {}).get(key)
        if got is not None:
            return got
        return next((s.default for s in SPECS[channel].settings if s.key == key), "")


def answers_from_file(path: Path) -> Answers | None:
    """An existing config's answers, the suggestions when onboarding again (None: unreadable)."""
    try:
        data = tomllib.loads(fs.read_in(path, CONFIG_MAX).decode("utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return None
    agent, chans = data.get("agent", {}), data.get("channels", {})
    a = Answers()
    for key in ("model", "api_base", "api_key_env", "workspace", "state_dir", "timezone"):
        if isinstance(agent.get(key), str):
            setattr(a, key, agent[key])
    for name in CHANNELS:
        sec = chans.get(name)
        if not isinstance(sec, dict) or not sec.get("enabled"):
            continue
        a.channels.append(name)
        if name in TOKEN_VARS:
            a.tokens[name] = {k: str(sec.get(k) or d) for k, d in TOKEN_VARS[name].items()}
        if isinstance(sec.get("allow_from"), list):
            a.owners[name] = [str(i) for i in sec["allow_from"]]
        for st in SPECS[name].settings:
            a.settings.setdefault(name, {})[st.key] = str(sec.get(st.key, st.default))
    return a
