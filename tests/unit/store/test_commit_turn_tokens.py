"""The token count commit_turn stores with each message: the store's counter's (the
estimate by default, a model tokenizer when the app passes one), and the estimate when
that counter fails."""

from __future__ import annotations

import json

from bot.store import Store, estimate_tokens

TURN = [
    {"role": "user", "content": "hé, what's up?"},
    {"role": "assistant", "content": "all fine", "tool_calls": []},
]


def test_by_default_each_message_is_counted_by_the_estimate(tmp_path):
    store = Store(tmp_path / "s.db")
    store.commit_turn("k", "t1", TURN)
    tokens = [r[0] for r in store.db.execute("SELECT tokens FROM messages ORDER BY id")]
    assert tokens == [estimate_tokens(m) for m in TURN]


def test_a_tokenizer_still_counts_each_message(tmp_path):
    """A model tokenizer (not the estimate) is asked for every message."""
    asked: list[dict] = []

    def counter(m: dict) -> int:
        asked.append(m)
        return 100 + len(json.dumps(m))

    store = Store(tmp_path / "s.db", token_counter=counter)
    store.commit_turn("k", "t1", TURN)
    tokens = [r[0] for r in store.db.execute("SELECT tokens FROM messages ORDER BY id")]
    assert asked == TURN and tokens == [100 + len(json.dumps(m)) for m in TURN]


def test_a_failing_tokenizer_falls_back_to_the_estimate(tmp_path):
    def counter(m: dict) -> int:
        raise ValueError("no tokenizer for this model")

    store = Store(tmp_path / "s.db", token_counter=counter)
    store.commit_turn("k", "t1", TURN)
    tokens = [r[0] for r in store.db.execute("SELECT tokens FROM messages ORDER BY id")]
    assert tokens == [estimate_tokens(m) for m in TURN]
