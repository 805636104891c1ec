"""The token count commit_turn stores with each message (issue 28 item 5): with the
estimate as the counter it is taken from the JSON the commit built (the message is not
encoded a second time), and equals estimate_tokens(message); a model tokenizer is still
asked for every message."""

from __future__ import annotations

import json

from bot.store import Store, estimate_tokens

TURN = [
    {"role": "user", "content": "hé, what's up?"},
    {"role": "assistant", "content": "all fine", "tool_calls": []},
]


def test_the_estimate_comes_from_the_json_the_commit_built(tmp_path):
    store = Store(tmp_path / "s.db")
    store.commit_turn("k", "t1", TURN)
    tokens = [r[0] for r in store.db.execute("SELECT tokens FROM messages ORDER BY id")]
    assert tokens == [estimate_tokens(m) for m in TURN]


def test_a_tokenizer_still_counts_each_message(tmp_path):
    """Twin: a model tokenizer (not the estimate) is asked for every message."""
    asked: list[dict] = []

    def counter(m: dict) -> int:
        asked.append(m)
        return 100 + len(json.dumps(m))

    store = Store(tmp_path / "s.db", token_counter=counter)
    store.commit_turn("k", "t1", TURN)
    tokens = [r[0] for r in store.db.execute("SELECT tokens FROM messages ORDER BY id")]
    assert asked == TURN and tokens == [100 + len(json.dumps(m)) for m in TURN]


class _SpyJson:
    """bot.store.db's ``json``, counting the messages it encodes."""

    def __init__(self) -> None:
        self.dumped = 0

    def dumps(self, obj, **kw):
        self.dumped += 1
        return json.dumps(obj, **kw)

    def __getattr__(self, name):
        return getattr(json, name)


def test_the_apps_counter_for_a_light_path_config_does_not_encode_again(tmp_path, monkeypatch):
    """The app's counter (``message_counter``) for a config no model of which needs litellm
    is the estimate itself: the message the commit has just encoded is not encoded again,
    and the counts are the same."""
    from bot.agent.compaction.counting import message_counter
    from bot.store import db as db_mod
    from tests.e2e import make_config
    from tests.fakes.mcp_port import Nowhere

    counter = message_counter(make_config(tmp_path, Nowhere()))
    spy = _SpyJson()
    monkeypatch.setattr(db_mod, "json", spy)
    store = Store(tmp_path / "s.db", token_counter=counter)
    store.commit_turn("k", "t1", TURN)
    tokens = [r[0] for r in store.db.execute("SELECT tokens FROM messages ORDER BY id")]
    assert spy.dumped == 0
    assert tokens == [len(json.dumps(m, ensure_ascii=False)) // 4 + 4 for m in TURN]
    # twin: outside a commit the estimate encodes the message
    assert estimate_tokens(dict(TURN[0])) == tokens[0] and spy.dumped == 1
