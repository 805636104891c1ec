"""``chela prompt``: print the system prompt Chela would send for a runtime context."""

from __future__ import annotations

import argparse
import dataclasses
import json

from bot.app.channels import MESSAGING
from bot.cli.common import add_common, load, need_workspace
from bot.config import ChannelPolicy, Config

CHANNEL_CHOICES = [*MESSAGING, "terminal", "http"]


def add_parser(sub) -> None:
    sp = add_common(sub.add_parser("prompt", help="print the system prompt for a runtime context"))
    sp.add_argument("--channel", choices=CHANNEL_CHOICES, help="the channel the prompt is for")
    sp.add_argument("--chat-type", choices=["direct", "group"], help="direct message or group chat")
    sp.add_argument(
        "--session",
        choices=["main", "subagent", "cron", "heartbeat"],
        default="main",
        help="kind of session (default main)",
    )
    sp.add_argument(
        "--mode", choices=["full", "minimal", "none"], help="override agent.prompt_mode"
    )
    sp.add_argument("--group-name", metavar="NAME", help="group title, with --chat-type group")
    sp.add_argument(
        "--json", action="store_true", help="print the prompt and its size report as JSON"
    )
    sp.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    cfg = load(args)
    need_workspace(cfg)
    agent, ctx = prompt_context(args, cfg)
    result = agent.cache.get(ctx)
    if args.json:
        print(json.dumps(result.to_json(), ensure_ascii=False, indent=2))
    else:
        print(result.text)
    return 0


def _extra_context(session: str, chat_type: str, channel: str, group_name: str) -> str:
    from bot.prompt.group import group_chat_context, subagent_context

    if session == "subagent":
        return subagent_context("sub-task")
    if chat_type == "group":
        return group_chat_context(
            channel or "chat", group_name or "group", [], "mention", include_activation=False
        )
    return ""


def _channel_traits(cfg: Config, channel: str) -> tuple[tuple[str, ...], str]:
    """The channel's capabilities and reactions setting, as the daemon would pass them."""
    if not channel:
        return (), "off"
    from bot.app.daemon import channel_class

    caps = tuple(channel_class(channel).capabilities.names())
    pol = getattr(cfg.channels, channel, None)
    return caps, pol.reactions if isinstance(pol, ChannelPolicy) else "off"


def prompt_context(args: argparse.Namespace, cfg: Config):
    """An agent on an in-memory store and the prompt context of the runtime ``args`` describe
    (``chela prompt`` and ``chela context``)."""
    from bot.agent.turn import Agent, TurnRequest
    from bot.store import Store

    agent = Agent(cfg, Store(":memory:"))
    session = args.session or "main"
    chat_type = getattr(args, "chat_type", None) or ("direct" if args.channel else "")
    group_name = getattr(args, "group_name", None) or ""
    caps, reactions = _channel_traits(cfg, args.channel)
    req = TurnRequest(
        session_key="",
        user_text="",
        session_kind=session,
        channel=args.channel or "",
        chat_type=chat_type,
        group_title=group_name,
        group_id=group_name if chat_type == "group" else "",
        extra_context=_extra_context(session, chat_type, args.channel, group_name),
        capabilities=caps,
        reactions=reactions,
    )
    ctx = agent.prompt_context(req)
    if getattr(args, "mode", None):
        ctx = dataclasses.replace(ctx, mode=args.mode)
    return agent, ctx
