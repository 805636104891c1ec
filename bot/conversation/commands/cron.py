"""``/cron``: the owner's schedules from any chat, handled on arrival.

``/cron`` or ``/cron list`` lists the jobs with their state, next run and last ledger
result; ``/cron pause|resume|run|remove NAME`` act on one.  The schedule service is the
one the agent's ``cron`` tool reaches (the agent's ``cron_api`` port); it lives above the
conversation, so it is used through that port, never imported."""

from __future__ import annotations

from typing import Any

from bot.conversation.commands.ports import CommandPorts
from bot.conversation.types import CommandCall

USAGE = (
    "Usage: /cron [list], /cron pause NAME, /cron resume NAME, /cron run NAME, /cron remove NAME"
)
VERBS = ("pause", "resume", "run", "remove")


def _service(ports: CommandPorts) -> Any:
    return getattr(ports.agent, "cron_api", None)


async def _act(svc: Any, verb: str, name: str) -> str:
    if verb == "run":
        await svc.run_now(name)
        return f"Running {name} now; its answer is delivered like a scheduled one."
    if verb == "remove":
        return f"Removed {name}." if svc.remove(name) else f"No job named {name}. /cron lists them."
    changed = svc.pause(name) if verb == "pause" else svc.resume(name)
    state = "paused" if verb == "pause" else "active"
    return f"{name} is {state} now." if changed else f"{name} is {state} already."


async def cron(call: CommandCall, ports: CommandPorts) -> str:
    svc = _service(ports)
    if svc is None:
        return "Schedules are not running in this process."
    verb, _, name = call.args.strip().partition(" ")
    verb, name = verb.lower() or "list", name.strip()
    if verb == "list":
        return str(svc.listing())
    if verb not in VERBS:
        return USAGE
    if not name:
        return f"Usage: /cron {verb} NAME"
    try:
        return await _act(svc, verb, name)
    except KeyError:
        return f"No job named {name}. /cron lists them."
    except ValueError as e:
        return str(e)
    except RuntimeError:
        return f"{name} is running already."
