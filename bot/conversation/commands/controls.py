"""Control from the chat: /stop, /model and /think.

A session's model and thinking level are settings, not conversation: they live in the
store's key/value table under ``controls:<session key>`` (so they survive restarts, and
``/new`` keeps them), and are read by the pipeline for each turn (``session_model``,
``session_effort``)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from bot.config import Config
from bot.conversation.commands.ports import CommandPorts
from bot.conversation.types import CommandCall
from bot.model.choice import CHOICE, Choice
from bot.store import Store

LEVELS = ("off", "minimal", "low", "medium", "high")
STOPPED = "Stopped."
NOTHING_RUNS = "Nothing is running right now."
NOT_YOURS = "Only the owner or whoever started it can stop the turn running here."


def _key(session: str) -> str:
    return f"controls:{session}"


def _settings(store: Store, session: str) -> dict[str, Any]:
    got = store.get(_key(session), {})
    return got if isinstance(got, dict) else {}


def _set(store: Store, session: str, name: str, value: str | None) -> None:
    s = _settings(store, session)
    if value is None:
        s.pop(name, None)
    else:
        s[name] = value
    store.put(_key(session), s)


# ----------------------------------------------------------------------------- models
def choices(cfg: Config) -> list[tuple[str, str]]:
    """The configured models, in order, as (alias or "", model string): ``agent.model``,
    each of ``agent.fallbacks``, each ``[agent.models]`` alias."""
    a = cfg.agent
    out = [("", a.model)] + [("", f.model) for f in a.fallbacks]
    return out + list(a.model_aliases().items())


def resolve(cfg: Config, name: str) -> str | None:
    """The model string NAME means (an alias, a configured model string, the part after
    ``provider/``, or a list number), or None when it is none of the configured ones."""
    listed = choices(cfg)
    low = name.strip().lower()
    if low.isdigit() and 1 <= int(low) <= len(listed):
        return listed[int(low) - 1][1]
    for alias, model in listed:
        if low in (alias.lower(), model.lower(), model.partition("/")[2].lower()) and low:
            return model
    return None


def session_model(cfg: Config, store: Store, session: str) -> str:
    """The session's model: its ``/model`` choice while that is still configured, else
    ``agent.model``."""
    return _model_of(cfg, _settings(store, session))


def _model_of(cfg: Config, settings: dict[str, Any]) -> str:
    chosen = settings.get("model")
    if chosen and any(m == chosen for _, m in choices(cfg)):
        return str(chosen)
    return cfg.agent.model


def session_choice(cfg: Config, store: Store, session: str) -> tuple[str, str]:
    """The session's model and what its calls send as ``reasoning_effort`` ("" =
    nothing), from one read of its settings (a turn needs both; nothing is cached, so a
    ``/model`` or ``/think`` counts from the next turn on)."""
    settings = _settings(store, session)
    return _model_of(cfg, settings), _effort_of(cfg, settings)


def _listing(cfg: Config, current: str) -> str:
    lines = []
    for n, (alias, model) in enumerate(choices(cfg), start=1):
        label = f"{alias} → {model}" if alias else model
        if n == 1:
            label += " (default)"
        lines.append(f"{n}. {label}" + ("  ← current" if model == current else ""))
    return "\n".join(lines)


async def model(call: CommandCall, ports: CommandPorts) -> str:
    cfg, store = ports.cfg, ports.store
    current = session_model(cfg, store, call.key)
    name = call.args.strip()
    if not name:
        return f"Models (this chat uses {current}):\n{_listing(cfg, current)}"
    if name.lower() == "default":
        _set(store, call.key, "model", None)
        return f"Back to the default model: {cfg.agent.model}."
    chosen = resolve(cfg, name)
    if chosen is None:
        return f"There is no model called {name!r} here. The choices:\n{_listing(cfg, current)}"
    _set(store, call.key, "model", None if chosen == cfg.agent.model else chosen)
    return f"Now using {chosen}."


# --------------------------------------------------------------------------- thinking
def session_thinking(cfg: Config, store: Store, session: str) -> str:
    """The session's thinking level: its ``/think`` choice, else ``agent.thinking``."""
    return _thinking_of(cfg, _settings(store, session))


def _thinking_of(cfg: Config, settings: dict[str, Any]) -> str:
    level = settings.get("thinking") or cfg.agent.thinking
    return level if level in LEVELS else "off"


def session_effort(cfg: Config, store: Store, session: str) -> str:
    """What the session's model calls send as ``reasoning_effort`` ("" = nothing)."""
    return _effort_of(cfg, _settings(store, session))


def _effort_of(cfg: Config, settings: dict[str, Any]) -> str:
    level = _thinking_of(cfg, settings)
    return "" if level == "off" else level


async def think(call: CommandCall, ports: CommandPorts) -> str:
    level = call.args.strip().lower()
    choices_text = ", ".join(LEVELS)
    if not level:
        now = session_thinking(ports.cfg, ports.store, call.key)
        return f"Thinking: {now}. Levels: {choices_text}."
    if level not in LEVELS:
        return f"There is no thinking level {level!r}. Levels: {choices_text}."
    _set(ports.store, call.key, "thinking", level)
    return "Thinking is off." if level == "off" else f"Thinking set to {level}."


@contextlib.contextmanager
def as_the_session(
    cfg: Config, store: Store, session: str, client: object = None
) -> Iterator[None]:
    """Work as the session's turn would: its model and thinking level in the Runtime line
    (/context), and with ``client`` (the agent's main model client) its window for the
    context figures and its model for /compact's calls.  Without a
    client the choice names none, so no model call follows it."""
    token = CHOICE.set(Choice(client, *session_choice(cfg, store, session)))
    try:
        yield
    finally:
        CHOICE.reset(token)


# ------------------------------------------------------------------------------- stop
async def stop(call: CommandCall, ports: CommandPorts) -> str:
    """Stop the turn running in the sender's own session (the key is theirs: nobody can
    name another).  In a group a guest stops only a turn their own message started."""
    turns = ports.turns
    if turns is None:
        return NOTHING_RUNS
    started_by = turns.started_by(call.key)
    if started_by is None:
        return NOTHING_RUNS
    if not call.owner and call.msg.chat_type == "group" and started_by != call.msg.sender_id:
        return NOT_YOURS
    return STOPPED if await turns.stop(call.key) else NOTHING_RUNS
