"""[[bindings]] at load: an unknown agent, account or channel and every kind of tie are
config errors naming the keys (never "first wins"); each refusal beside the twin that loads."""

from __future__ import annotations

import pytest

from bot.config import ConfigError, parse_config


def config(*bindings: dict) -> dict:
    return {
        "agent": {"workspace": "/tmp/cfg36-main"},
        "agents": {
            "work": {"workspace": "/tmp/cfg36-work"},
            "play": {"workspace": "/tmp/cfg36-play"},
        },
        "channels": {
            "telegram": {"enabled": True, "accounts": {"team": {"token_env": "TEAM_TOKEN"}}},
            "discord": {"enabled": True},
        },
        "bindings": list(bindings),
    }


def error(*bindings: dict) -> str:
    with pytest.raises(ConfigError) as e:
        parse_config(config(*bindings))
    return str(e.value)


def tg(agent: str, **keys: object) -> dict:
    return {"agent": agent, "channel": "telegram", **keys}


def test_bindings_load_in_file_order():
    cfg = parse_config(config(tg("work", account="team"), tg("play", chat=-100123)))
    assert [(b.agent, b.account, b.chat) for b in cfg.bindings] == [
        ("work", "team", ""),
        ("play", "", "-100123"),  # a TOML integer id is a string
    ]


def test_an_unknown_agent_is_refused():
    assert "bindings[1].agent: unknown agent 'wrok' (agents: main, work, play)" in error(
        tg("work", chat="1"), tg("wrok", chat="2")
    )
    assert parse_config(config(tg("main", chat="2"))).bindings[0].agent == "main"


@pytest.mark.parametrize("account", ["teem", "work"])
def test_an_unknown_account_is_refused(account):
    said = error(tg("work", account=account))
    assert f"bindings[0].account: channels.telegram has no account {account!r}" in said
    assert "(accounts: default, team)" in said


@pytest.mark.parametrize("account", ["default", "team"])
def test_a_known_account_loads(account):
    assert parse_config(config(tg("work", account=account))).bindings[0].account == account


def test_an_account_of_another_channel_is_unknown_here():
    said = error({"agent": "work", "channel": "discord", "account": "team"})
    assert "bindings[0].account: channels.discord has no account 'team'" in said


@pytest.mark.parametrize(
    "binding, key",
    [
        ({"agent": "work", "channel": "telegarm"}, "bindings[0].channel: unknown channel"),
        ({"agent": "work", "channel": "http"}, "bindings[0].channel: unknown channel"),
        ({"agent": "work"}, "bindings[0].channel: Field required"),
        ({"channel": "telegram"}, "bindings[0].agent: Field required"),
        ({"agent": "work", "channel": "telegram", "user": "1"}, "bindings[0].user: unknown key"),
        (
            {"agent": "work", "channel": "telegram", "peer": "@boss"},
            "bindings[0].peer: '@boss' is a username",
        ),
        (
            {"agent": "work", "channel": "telegram", "chat": "@team"},
            "bindings[0].chat: '@team' is a username",
        ),
    ],
)
def test_a_malformed_binding_names_its_key(binding, key):
    assert key in error(binding)


# two bindings that can match one message at the same specificity: a tie
TIES = [
    ("channel only", tg("work"), tg("play")),
    ("account", tg("work", account="team"), tg("play", account="team")),
    ("peer", tg("work", peer="7"), tg("play", peer="7")),
    ("chat", tg("work", chat="-1"), tg("play", chat="-1")),
    ("chat + peer", tg("work", chat="-1", peer="7"), tg("play", chat="-1", peer="7")),
    ("chat, one on an account", tg("work", chat="-1"), tg("play", chat="-1", account="team")),
    ("peer, one on an account", tg("work", account="team", peer="7"), tg("play", peer="7")),
    ("the same agent twice", tg("work", chat="-1"), tg("work", chat="-1")),
    ("default named", tg("work", account="default", chat="5"), tg("play", chat="5")),
]
# and their twins: the same pairs made distinguishable
NOT_TIES = [
    ("other channel", tg("work"), {"agent": "play", "channel": "discord"}),
    ("other accounts", tg("work", account="team"), tg("play", account="default")),
    ("other peers", tg("work", peer="7"), tg("play", peer="8")),
    ("other chats", tg("work", chat="-1"), tg("play", chat="-2")),
    ("other ranks", tg("work", chat="-1"), tg("play", chat="-1", peer="7")),
    ("account vs channel", tg("work", account="team"), tg("play")),
    ("chat vs peer, same id", tg("work", chat="7"), tg("play", peer="7")),
    (
        "chat on two accounts",
        tg("work", chat="-1", account="team"),
        tg("play", chat="-1", account="default"),
    ),
]


@pytest.mark.parametrize("what, a, b", TIES, ids=[t[0] for t in TIES])
def test_a_tie_is_refused_naming_both(what, a, b):
    said = error(tg("main", chat="999"), a, b)
    assert "bindings[1] and bindings[2]: both match" in said
    assert "same specificity" in said


@pytest.mark.parametrize("what, a, b", NOT_TIES, ids=[t[0] for t in NOT_TIES])
def test_distinguishable_bindings_load(what, a, b):
    assert len(parse_config(config(a, b)).bindings) == 2


def test_a_tie_names_the_account_it_happens_on():
    said = error(tg("work", chat="-1"), tg("play", chat="-1", account="team"))
    assert "both match channel=telegram account=team chat=-1" in said


def test_every_tie_is_named_not_just_the_first():
    said = error(tg("work"), tg("play"), tg("main"))
    assert "bindings[0] and bindings[1]" in said
    assert "bindings[0] and bindings[2]" in said
    assert "bindings[1] and bindings[2]" in said
