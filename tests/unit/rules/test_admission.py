"""Admission is a pure function: (message, config, stored approvals) → verdict + trust (SPEC §9)."""

from __future__ import annotations

import pytest

from bot.rules.admission import admit, guest_dir, is_owner_sender, session_key
from bot.config import parse_config
from bot.conversation.commands import COMMANDS
from bot.conversation.commands.help import help_text as _help_text
from bot.conversation.commands.runner import parse_command
from channels.base import InboundMessage


def help_text(owner: bool) -> str:
    return _help_text(COMMANDS.values(), owner)


CFG = parse_config(
    {
        "owner": {"numbers": ["+15550001111"]},
        "channels": {
            "telegram": {"allow_from": ["42"], "groups": ["-100"], "owner_groups": ["-200"]},
            "discord": {"allow_from": ["111"], "dm_policy": "open", "group_policy": "open"},
            "slack": {"dm_policy": "allowlist", "group_policy": "disabled"},
            "signal": {"dm_policy": "disabled"},
        },
    }
)


def dm(channel: str, sender: str, username: str = "", bot: bool = False) -> InboundMessage:
    return InboundMessage(
        channel=channel,
        chat_id=sender,
        sender_id=sender,
        text="hi",
        sender_username=username,
        sender_is_bot=bot,
    )


def group(channel: str, chat: str, sender: str = "42") -> InboundMessage:
    return InboundMessage(
        channel=channel, chat_id=chat, sender_id=sender, text="hi", chat_type="group"
    )


APPROVED = {("telegram", "77")}

CASES = [
    # message                                   action   trust
    (dm("telegram", "42"), "serve", "owner"),  # allow_from, by id
    (dm("telegram", "+15550001111"), "serve", "owner"),  # owner.numbers
    (dm("telegram", "77"), "serve", "guest"),  # pairing-approved
    (dm("telegram", "78"), "pair", None),  # unknown under pairing
    (
        dm("telegram", "999", username="42"),
        "pair",
        None,
    ),  # a username equal to the owner's id is nobody
    (dm("telegram", "42", bot=True), "drop", None),  # bots are never served
    (dm("discord", "111"), "serve", "owner"),
    (dm("discord", "5", username="111"), "serve", "guest"),  # open DMs: a guest, never the owner
    (dm("slack", "U1"), "drop", None),  # allowlist with nobody listed
    (dm("signal", "+1999"), "drop", None),  # DMs disabled
    (dm("terminal", "me"), "serve", "owner"),  # the local user
    (dm("http", "client"), "serve", "owner"),  # a caller that presented the token
    (group("telegram", "-100"), "serve", "guest"),  # listed group: guest, whoever speaks
    (group("telegram", "-100", sender="42"), "serve", "guest"),  # ... even the owner
    (group("telegram", "-200", sender="5"), "serve", "owner"),  # an owner group
    (group("telegram", "-300"), "drop", None),  # not listed
    (group("discord", "c1"), "serve", "guest"),  # group_policy open
    (group("slack", "C1"), "drop", None),  # groups disabled
]


@pytest.mark.parametrize(
    "msg, action, trust",
    CASES,
    ids=[
        f"{m.channel}-{m.chat_type}-{m.sender_id}-{m.sender_username or 'x'}" for m, _, _ in CASES
    ],
)
def test_admission_table(msg, action, trust):
    v = admit(msg, CFG, APPROVED)
    assert (v.action, v.trust) == (action, trust)
    assert v.served == (action == "serve")


def test_owner_sender_is_by_id_only():
    assert is_owner_sender(dm("telegram", "42"), CFG)
    assert not is_owner_sender(dm("telegram", "7", username="42"), CFG)
    assert not is_owner_sender(dm("telegram", "7", username="@42"), CFG)


def test_guest_dms_always_get_their_own_session_and_the_owner_follows_dm_scope():
    owner, guest = dm("telegram", "42"), dm("telegram", "77")
    assert session_key(owner, CFG, "owner") == "agent:main:main"
    assert session_key(guest, CFG, "guest") == "agent:main:telegram:direct:77"
    per_peer = parse_config({"session": {"dm_scope": "per-peer"}})
    assert session_key(owner, per_peer, "owner") == "agent:main:direct:42"
    assert session_key(group("telegram", "-100"), CFG, "guest") == "agent:main:telegram:group:-100"


def test_guest_dirs_are_per_session_under_the_state_dir():
    a, b = (
        guest_dir(CFG, "agent:main:telegram:direct:77"),
        guest_dir(CFG, "agent:main:telegram:direct:78"),
    )
    assert a != b and a.parent == CFG.agent.state_dir / "guests"
    assert guest_dir(CFG, "agent:main:telegram:direct:77") == a


@pytest.mark.parametrize(
    "text, parsed",
    [
        ("/new", ("new", "")),
        ("/reset", ("reset", "")),
        ("/status@chela_bot", ("status", "")),
        ("/context detail", ("context", "detail")),
        ("/activation always", ("activation", "always")),
        ("/approve AB12CD", ("approve", "AB12CD")),
        ("/deny  xy ", ("deny", "xy")),
        ("/etc/passwd is a file", None),  # not ours: an ordinary message
        ("hello /new", None),
        ("", None),
    ],
)
def test_parse_command(text, parsed):
    assert parse_command(text) == parsed


def test_command_table_rules():
    assert COMMANDS["activation"].owner_only and COMMANDS["activation"].where == "group"
    assert (
        COMMANDS["approve"].owner_only
        and COMMANDS["approve"].where == "direct"
        and COMMANDS["approve"].immediate
    )
    assert not COMMANDS["new"].owner_only and not COMMANDS["new"].immediate
    assert "/approve" in help_text(owner=True) and "/approve" not in help_text(owner=False)
    assert "/new or /reset" in help_text(owner=False)
