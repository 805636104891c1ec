"""message, session_status, sessions_spawn and cron: tools that reach into the core.

Each one calls a capability supplied on the per-turn ToolContext; when the core did not
supply it (e.g. inside a sub-agent), the tool says so instead of failing.
"""

from __future__ import annotations

import datetime as dt
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from bot.config.channels import MESSAGING
from channels.base import account_key, split_account_key

from .base import Tool, ToolContext, ToolError, arg_str, schema

# --------------------------------------------------------------------------------------
# message


def message_target(channel: str, to: str) -> tuple[str, str]:
    """(channel account, recipient) of a ``message`` call: ``to`` may name the channel
    account too (``telegram:work:<chat id>``), ``channel`` may name an account
    (``telegram:work``); ``telegram:default`` is ``telegram``.  "" stays "" (this chat's)."""
    head, _, rest = to.partition(":")
    if head in MESSAGING and rest and channel in ("", head):
        account, _, chat = rest.partition(":")
        channel, to = (f"{head}:{account}", chat) if chat else (head, rest)
    return (account_key(*split_account_key(channel)) if channel else ""), to


async def _message(ctx: ToolContext, args: dict) -> str:
    if ctx.send_message is None:
        raise ToolError("sending messages is not available in this session")
    channel, to = message_target(
        arg_str(args, "channel", required=False).strip(),
        arg_str(args, "to", required=False).strip(),
    )
    text = arg_str(args, "text")
    if not text.strip():
        raise ToolError("text is empty")
    result = await ctx.send_message(channel, to, text)
    if result.startswith("Error: "):
        raise ToolError(result.removeprefix("Error: "))
    return result or "Sent."


MESSAGE = Tool(
    "message",
    "Send a message now to a channel and recipient (for proactive notes, not for the current reply).",
    schema(
        {
            "channel": {
                "type": "string",
                "description": "Channel id, e.g. telegram, discord, slack, signal, or one of its accounts as telegram:work. Empty = the current channel.",
            },
            "to": {
                "type": "string",
                "description": "Recipient or chat id on that channel (or channel:account:chat id). Empty = the current chat.",
            },
            "text": {"type": "string", "description": "The message text."},
        },
        ["text"],
    ),
    _message,
)

# --------------------------------------------------------------------------------------
# session_status


def now_in_zone(zone: str) -> tuple[dt.datetime, str]:
    if zone:
        try:
            tz = ZoneInfo(zone)
            return dt.datetime.now(tz), zone
        except (ZoneInfoNotFoundError, ValueError):
            pass
    local = dt.datetime.now().astimezone()
    return local, local.tzname() or "local"


def _fmt_usage(u: Any) -> str:
    if isinstance(u, dict):
        return ", ".join(f"{k}={v}" for k, v in u.items())
    return str(u)


async def _session_status(ctx: ToolContext, args: dict) -> str:
    now, zone_label = now_in_zone(ctx.timezone)
    lines = [
        f"Current time: {now.strftime('%A %Y-%m-%d %H:%M:%S')} {now.strftime('%Z')} (time zone {zone_label}, UTC{now.strftime('%z')[:3]}:{now.strftime('%z')[3:]})",
    ]
    if ctx.model:
        lines.append(f"Model: {ctx.model}")
    info: dict = {}
    if ctx.session_info is not None:
        try:
            info = dict(ctx.session_info() or {})
        except Exception as e:
            lines.append(f"(session details unavailable: {type(e).__name__})")
    session = info.pop("session_key", None) or info.pop("session", None) or ctx.session_key
    if session:
        lines.append(f"Session: {session}")
    if ctx.agent_id:
        lines.append(f"Agent: {ctx.agent_id}")
    for key, value in info.items():
        label = key.replace("_", " ").capitalize()
        lines.append(f"{label}: {_fmt_usage(value) if key == 'usage' else value}")
    return "\n".join(lines)


SESSION_STATUS = Tool(
    "session_status",
    "Show the current date and time in the user's time zone, the model, the session and usage.",
    schema({}),
    _session_status,
)

# --------------------------------------------------------------------------------------
# sessions_spawn


async def _sessions_spawn(ctx: ToolContext, args: dict) -> str:
    if ctx.spawn_subagent is None:
        raise ToolError("sub-agents are not available in this session")
    task = arg_str(args, "task")
    if not task.strip():
        raise ToolError("task is empty")
    label = arg_str(args, "label", required=False).strip()
    result = await ctx.spawn_subagent(task, label)
    head = f"Sub-agent{f' {label!r}' if label else ''} finished."
    return f"{head}\n{result}" if result else f"{head} It returned no text."


SESSIONS_SPAWN = Tool(
    "sessions_spawn",
    "Hand a self-contained task to a sub-agent with its own session; returns its final answer.",
    schema(
        {
            "task": {
                "type": "string",
                "description": "Complete instructions for the sub-agent (it does not see this chat).",
            },
            "label": {"type": "string", "description": "Short name for the task."},
        },
        ["task"],
    ),
    _sessions_spawn,
)

# --------------------------------------------------------------------------------------
# cron


CRON_ACTIONS = ("add", "list", "pause", "resume", "run_now", "remove")
WHEN_KEYS = ("at", "in", "every", "schedule")


def with_origin(api: Any, route: dict) -> Any:
    """The cron service as a turn from ``route`` sees it (its jobs deliver back there)."""
    if api is None or not hasattr(api, "for_route"):
        return api
    return api.for_route(route)


async def _cron_add(ctx: ToolContext, args: dict) -> str:
    name = arg_str(args, "name").strip()
    prompt = arg_str(args, "prompt")
    if not name or not prompt.strip():
        raise ToolError("add needs name, prompt and one of at, in, every or schedule")
    when = {k: arg_str(args, k, required=False) for k in WHEN_KEYS}
    extra = {k: arg_str(args, k, required=False).strip() for k in ("target", "to")}
    catch_up = arg_str(args, "catch_up", required=False).strip()
    assert ctx.cron is not None
    try:
        return str(await ctx.cron.add(name, prompt, catch_up=catch_up, **when, **extra))
    except (ValueError, KeyError) as e:
        raise ToolError(f"could not add job {name!r}: {e}") from None


async def _cron_named(ctx: ToolContext, action: str, name: str) -> str:
    assert ctx.cron is not None
    try:
        res = await getattr(ctx.cron, action)(name)
    except KeyError:
        raise ToolError(f"no scheduled job named {name!r}") from None
    except (ValueError, RuntimeError) as e:
        raise ToolError(str(e)) from None
    if action == "remove":
        if not res:
            raise ToolError(f"no scheduled job named {name!r}")
        return f"Removed job {name!r}."
    if action == "run_now":
        return f"Job {name!r} is running now (run {res})."
    state = "paused" if action == "pause" else "active"
    return f"Job {name!r} is {state}" + ("." if res else " already.")


async def _cron(ctx: ToolContext, args: dict) -> str:
    if ctx.cron is None:
        raise ToolError("scheduling is not available in this session")
    action = arg_str(args, "action").strip().lower()
    if action == "add":
        return await _cron_add(ctx, args)
    if action == "list":
        return str(await ctx.cron.list())
    if action in CRON_ACTIONS:
        return await _cron_named(ctx, action, arg_str(args, "name").strip())
    raise ToolError(f"unknown action {action!r}; use {', '.join(CRON_ACTIONS)}")


CRON = Tool(
    "cron",
    "Schedule reminders/tasks that run a prompt later (at a time, in a duration, every "
    "interval or on a crontab); list, pause, resume, run now or remove them.",
    schema(
        {
            "action": {"type": "string", "enum": list(CRON_ACTIONS)},
            "name": {"type": "string", "description": "Job name (all but list)."},
            "prompt": {
                "type": "string",
                "description": "What the agent should do when the job fires (add).",
            },
            "at": {
                "type": "string",
                "description": "One run at this local date-time, ISO 8601 (add).",
            },
            "in": {
                "type": "string",
                "description": 'One run after this duration from now, e.g. "20m", "2h" (add); '
                "Chela computes the time.",
            },
            "every": {
                "type": "string",
                "description": 'Run every interval, at least 10s, e.g. "30m" (add).',
            },
            "schedule": {
                "type": "string",
                "description": 'Crontab expression, e.g. "0 9 * * 1-5" (add).',
            },
            "catch_up": {
                "type": "string",
                "description": 'How late a missed run may still run, default "1h"; "0s" never (add).',
            },
            "target": {
                "type": "string",
                "description": 'Where to deliver: a channel id, "last" or "none" (add; optional; '
                "default: this chat).",
            },
            "to": {
                "type": "string",
                "description": "Recipient on the target channel (add; optional).",
            },
        },
        ["action"],
    ),
    _cron,
)

__all__ = ["CRON", "MESSAGE", "SESSIONS_SPAWN", "SESSION_STATUS", "now_in_zone"]
