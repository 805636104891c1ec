"""Where a new job's answers will go, in the words the ``cron`` tool answers with.

A job made from a chat that can be reached later goes back to it; one made from the
terminal or the HTTP API goes to the owner's ``last`` direct chat.  When no chat can be
named the job is refused: a tool answer that says "scheduled" makes the model promise a
reminder that would never arrive."""

from __future__ import annotations

from typing import Any

from bot.config.channels import MESSAGING, title

UNREACHABLE = ("terminal", "http")  # chats that cannot be written to later


def no_chat(target: str, origin: dict[str, Any]) -> str:
    """Why a job with ``target`` made from ``origin`` has no chat to go to."""
    if target != "last":
        return (
            f"no direct chat with the owner on {target} is known yet (give `to`, or write "
            "to me there once)"
        )
    here = str(origin.get("channel") or "")
    why = "this chat cannot be reached later, and " if here in UNREACHABLE else ""
    names = [title(n) for n in MESSAGING]
    where = ", ".join(names[:-1]) + f" or {names[-1]}" if len(names) > 1 else "".join(names)
    return (
        f"{why}no direct chat with the owner on {where} is known yet (write to me there "
        "once, or give target and to)"
    )


def nowhere(target: str, origin: dict[str, Any]) -> str:
    """The cron tool's refusal of a job that has no chat to go to."""
    return (
        f"there is no chat to deliver it to: {no_chat(target, origin)}. Tell the user it "
        "was not scheduled"
    )


def delivery_words(svc: Any, target: str, to: str, origin: dict[str, Any], agent: str = "") -> str:
    """Where a job of ``target``/``to`` made from ``origin`` delivers, as a clause of the
    tool's answer.  Nowhere: ValueError (the refusal) for a chat turn's job, a warning for
    one made without a chat (the Control UI)."""
    if target == "none":
        return "it runs without sending anything (target none)"
    route = svc.scheduled.resolve_target(target, to, agent)
    if route is None and origin.get("channel"):  # a turn's cron tool: refused, never promised
        raise ValueError(nowhere(target, origin))
    if route is None:  # the Control UI, a CLI: stored, with the warning
        why = no_chat(target, origin)
        return f"it cannot be delivered yet: {why}; until then its runs are skipped"
    channel = str(route.get("channel") or "")
    same = channel == origin.get("channel") and str(route.get("chat_id")) == str(
        origin.get("chat_id")
    )
    words = (
        "it will be sent to this chat"
        if same
        else (f"it will be sent to your {title(channel)} chat")
    )
    if not getattr(svc, "running", True):
        words += (
            "; the daemon is not running now: it runs when `chela run` is started (a run "
            "missed by less than its catch_up is made up once)"
        )
    return words
