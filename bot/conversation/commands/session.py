"""The conversation's own commands: /new and /reset, /status, /context, /compact, /activation."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from bot.agent.turn import zone
from bot.conversation.commands import controls
from bot.conversation.commands.ports import CommandPorts
from bot.conversation.types import CommandCall
from bot.store import pending

ContextKind = Literal["list", "detail", "json"]


async def new_conversation(call: CommandCall, ports: CommandPorts) -> str:
    ports.store.reset_session(call.key)
    dropped = pending.drop(ports.store, call.key)  # kept while the model was down
    if dropped:
        return f"Started a fresh conversation. {dropped} message(s) waiting for the model were dropped."
    return "Started a fresh conversation."


async def status(call: CommandCall, ports: CommandPorts) -> str:
    cfg, store = ports.cfg, ports.store
    s = store.session(call.key)
    now = datetime.now(zone(cfg)).strftime("%Y-%m-%d %H:%M %Z")
    with controls.as_the_session(cfg, store, call.key, main_client(ports)):
        u = await ports.agent.context_usage(ports.turn_request(call))
    model = controls.session_model(cfg, store, call.key)
    thinking = controls.session_thinking(cfg, store, call.key)
    return (
        f"Model: {model}\nThinking: {thinking}\nSession: {call.key}\n"
        f"Messages: {store.message_count(call.key)}\n"
        f"Tokens: {s['usage_in']} in / {s['usage_out']} out\n"
        f"Context: {u['used']} / {u['budget']} tokens of history (window {u['window']}, "
        f"compactions {u['compactions']})\nTime: {now}"
    )


async def compact(call: CommandCall, ports: CommandPorts) -> str:
    """Compacted for the session's model, whose calls write the flush and the summary."""
    with controls.as_the_session(ports.cfg, ports.store, call.key, main_client(ports)):
        return await ports.agent.compact_now(ports.turn_request(call), call.args)


def main_client(ports: CommandPorts) -> object:
    """The client the session's ``/model`` choice applies to (the run stage's)."""
    return getattr(ports.agent, "llm", None)


def context_kind(args: str) -> ContextKind:
    arg = args.lower()
    if arg == "detail":
        return "detail"
    if arg == "json":
        return "json"
    return "list"


async def context(call: CommandCall, ports: CommandPorts) -> str:
    from bot.prompt.report import context_report

    req = ports.turn_request(call)
    with controls.as_the_session(ports.cfg, ports.store, call.key):
        ctx = ports.agent.prompt_context(req)
    with controls.as_the_session(ports.cfg, ports.store, call.key, main_client(ports)):
        usage = await ports.agent.context_usage(req)
    return context_report(ports.agent.cache.get(ctx), ctx, context_kind(call.args), usage=usage)


async def activation(call: CommandCall, ports: CommandPorts) -> str:
    arg = call.args.lower()
    if arg not in ("mention", "always"):
        return "Usage: /activation mention|always"
    ports.store.set_activation(call.key, arg)
    return (
        "I'll answer here only when mentioned."
        if arg == "mention"
        else "I'll read everything here and answer when it's useful."
    )
