"""route(): the most specific binding that matches wins (chat + peer > chat > peer > account >
channel only), a binding naming an account matches only that account, no match is the default
agent; agents_for_account and accounts_of_agent (who may send through which account)."""

from __future__ import annotations

import pytest

from bot.config import Binding, parse_config
from bot.rules.routing import accounts_of_agent, agents_for_account, route


def b(agent: str, channel: str = "telegram", **keys: str) -> Binding:
    return Binding(agent=agent, channel=channel, **keys)


# one binding of each specificity, each to its own agent, all able to match the message
# (telegram, account "work", chat "-100", peer "7")
LEVELS = {
    "chat+peer": b("cp", chat="-100", peer="7"),
    "chat": b("c", chat="-100"),
    "peer": b("p", peer="7"),
    "account": b("a", account="work"),
    "channel": b("ch"),
}
ORDER = list(LEVELS)
PAIRS = [(hi, lo) for i, hi in enumerate(ORDER) for lo in ORDER[i + 1 :]]


@pytest.mark.parametrize("hi, lo", PAIRS, ids=[f"{h}>{lo}" for h, lo in PAIRS])
def test_the_more_specific_binding_wins_in_either_order(hi, lo):
    for bindings in ([LEVELS[hi], LEVELS[lo]], [LEVELS[lo], LEVELS[hi]]):
        assert route(bindings, "main", "telegram", "work", "-100", "7") == LEVELS[hi].agent


def test_all_levels_together_pick_the_most_specific_that_matches():
    every = list(LEVELS.values())
    assert route(every, "main", "telegram", "work", "-100", "7") == "cp"
    assert route(every, "main", "telegram", "work", "-100", "8") == "c"
    assert route(every, "main", "telegram", "work", "-200", "7") == "p"
    assert route(every, "main", "telegram", "work", "-200", "8") == "a"
    assert route(every, "main", "telegram", "default", "-200", "8") == "ch"
    assert route(every, "main", "discord", "work", "-100", "7") == "main"


@pytest.mark.parametrize(
    "binding, message, agent",
    [
        # a binding naming an account matches only that account, ranked by its chat/peer
        (b("w", account="work", chat="-100"), ("work", "-100", "7"), "w"),
        (b("w", account="work", chat="-100"), ("default", "-100", "7"), "main"),
        (b("w", account="work", peer="7"), ("home", "-100", "7"), "main"),
        (b("w", account="default"), ("default", "1", "1"), "w"),
        (b("w", account="default"), ("work", "1", "1"), "main"),
        # values must be equal, not merely present
        (b("w", chat="-100"), ("work", "-1000", "7"), "main"),
        (b("w", peer="7"), ("work", "-100", "77"), "main"),
        (b("w", chat="-100", peer="7"), ("work", "-100", "8"), "main"),
        (b("w", channel="discord"), ("work", "-100", "7"), "main"),
    ],
)
def test_what_a_binding_matches(binding, message, agent):
    assert route([binding], "main", "telegram", *message) == agent


def test_an_account_scoped_chat_binding_beats_an_account_binding():
    bindings = [b("team", account="work"), b("ops", account="work", chat="-100")]
    assert route(bindings, "main", "telegram", "work", "-100", "7") == "ops"
    assert route(bindings, "main", "telegram", "work", "-200", "7") == "team"
    assert route(bindings, "main", "telegram", "default", "-100", "7") == "main"


def test_a_telegram_dm_matches_chat_and_peer_of_the_same_id():
    # in a Telegram DM the chat id is the sender's id
    dm = ("telegram", "default", "4242", "4242")
    assert route([b("c", chat="4242"), b("p", peer="4242")], "main", *dm) == "c"
    assert route([b("p", peer="4242"), b("c", chat="4242")], "main", *dm) == "c"
    assert route([b("p", peer="4242")], "main", *dm) == "p"
    assert route([b("c", chat="4242")], "main", *dm) == "c"
    both = [b("c", chat="4242"), b("cp", chat="4242", peer="4242"), b("p", peer="4242")]
    assert route(both, "main", *dm) == "cp"
    # the same sender in a group is not that DM
    assert route([b("c", chat="4242")], "main", "telegram", "default", "-100", "4242") == "main"


def test_no_binding_is_the_default_agent():
    assert route([], "home", "telegram", "default", "1", "1") == "home"


def test_a_tie_is_never_settled_by_order():
    with pytest.raises(ValueError):
        route([b("x", chat="1"), b("y", chat="1")], "main", "telegram", "default", "1", "2")


def test_agents_for_account():
    bindings = [b("work", account="work"), b("ops", chat="-100"), b("side", channel="discord")]
    assert agents_for_account(bindings, "main", "telegram", "work") == {"work", "ops"}
    assert agents_for_account(bindings, "main", "telegram", "default") == {"ops", "main"}
    assert agents_for_account(bindings, "main", "discord", "default") == {"side"}
    assert agents_for_account(bindings, "main", "slack", "default") == {"main"}
    assert agents_for_account([], "main", "telegram", "work") == {"main"}


def test_accounts_of_agent():
    cfg = parse_config(
        {
            "agent": {"workspace": "/tmp/cfg36-r-main"},
            "agents": {"work": {"workspace": "/tmp/cfg36-r-work"}},
            "channels": {
                "telegram": {
                    "enabled": True,
                    "accounts": {
                        "work": {"token_env": "WORK_TOKEN"},
                        "off": {"token_env": "OFF_TOKEN", "enabled": False},
                    },
                },
                "slack": {"enabled": True},
            },
            "bindings": [
                {"agent": "work", "channel": "telegram", "account": "work"},
                {"agent": "work", "channel": "telegram", "account": "off"},
            ],
        }
    )
    assert accounts_of_agent(cfg, "work") == {("telegram", "work")}  # "off" is not running
    assert accounts_of_agent(cfg, "main") == {("telegram", "default"), ("slack", "default")}
    assert accounts_of_agent(cfg, "nobody") == set()
