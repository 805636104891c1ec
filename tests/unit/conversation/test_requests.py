"""THE TurnRequest builder: chat, group, API and scheduled turns from plain values."""

from __future__ import annotations

from pathlib import Path

from bot.conversation.requests import (
    ChatContext,
    Traits,
    chat_request,
    route_of,
    scheduled_request,
)
from bot.conversation.types import ApiTurn
from channels.base import InboundMessage


def msg(**kw):
    base = {"channel": "telegram", "chat_id": "42", "sender_id": "42", "text": "hi"}
    return InboundMessage(**{**base, **kw})


def test_a_direct_chat_turn():
    m = msg(account="main", thread_id="7", chat_type="direct")
    ctx = ChatContext(trust="owner", after_user_system="deliver so", media=({"ref": "a"},))
    req = chat_request(m, "k", "USER TURN", Traits(("edit",), "ack"), ctx, agent="work")
    assert (req.session_key, req.user_text, req.message_text) == ("k", "USER TURN", "hi")
    assert (req.channel, req.account, req.chat_type) == ("telegram", "main", "direct")
    assert (req.group_id, req.group_title) == ("", "")
    assert req.capabilities == ("edit",) and req.reactions == "ack"
    assert req.after_user_system == "deliver so" and req.trust == "owner"
    assert req.media == [{"ref": "a"}] and req.route == route_of(m, "work")
    assert req.route["thread_id"] == "7" and req.kind == "chat" and req.user_turn
    assert req.agent == "work"  # the agent chosen at intake travels with the turn


def test_a_guests_group_turn():
    m = msg(chat_type="group", chat_id="-100", chat_title="Friends")
    ctx = ChatContext(file_root=Path("/g"), extra_context="group block")
    req = chat_request(m, "k", "t", Traits(), ctx, agent="main")
    assert (req.group_id, req.group_title, req.extra_context) == ("-100", "Friends", "group block")
    assert req.trust == "guest" and req.file_root == Path("/g")


def test_an_api_turn_carries_the_clients_part():
    api = ApiTurn(
        prior=[{"role": "user", "content": "before"}],
        instructions="be brief",
        tools=[{"type": "function"}],
        params={"max_tokens": 5},
    )
    req = chat_request(msg(), "k", "t", Traits(), ChatContext(media=({"r": 1},)), api, agent="main")
    assert req.client_instructions == "be brief" and req.prior == api.prior
    assert req.client_tools == api.tools and req.params == {"max_tokens": 5}
    assert req.media == [{"r": 1}] and req.user_turn
    results_only = ApiTurn(user_turn=False)
    req = chat_request(
        msg(), "k", "t", Traits(), ChatContext(media=({"r": 1},)), results_only, agent="main"
    )
    assert req.user_turn is False and req.media == []


def test_scheduled_turns():
    route = {"channel": "telegram", "chat_id": "42", "account": "main"}
    req = scheduled_request(
        "hb",
        "tick",
        kind="heartbeat",
        session_kind="heartbeat",
        route=route,
        traits=Traits(),
        agent="work",
    )
    assert (req.kind, req.session_kind, req.channel, req.account) == (
        "heartbeat",
        "heartbeat",
        "telegram",
        "main",
    )
    assert req.chat_type == "direct" and req.route == route and req.message_text == "tick"
    assert req.agent == "work"
    nowhere = scheduled_request(
        "c", "job", kind="cron", session_kind="cron", route=None, traits=Traits(), agent="main"
    )
    assert (nowhere.channel, nowhere.chat_type, nowhere.route) == ("", "", {})
