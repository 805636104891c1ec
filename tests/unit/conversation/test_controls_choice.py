"""A turn reads its session's model and thinking level in one settings read
(controls.session_choice), and nothing is cached: /model and /think count from the next
turn on (the e2e proof of the latter: tests/e2e/test_controls_e2e.py)."""

from __future__ import annotations

from bot.config import parse_config
from bot.conversation.commands import controls
from bot.store import Store

KEY = "agent:main:main"
CFG = parse_config(
    {
        "agent": {
            "model": "openai/main-model",
            "models": {"fast": "openai/fast-model"},
            "thinking": "low",
        }
    }
)


def _store(tmp_path) -> tuple[Store, list[str]]:
    store = Store(tmp_path / "state.db")
    reads: list[str] = []
    store.db.set_trace_callback(lambda sql: reads.append(sql) if "FROM kv" in sql else None)
    return store, reads


def test_one_settings_read_gives_model_and_effort(tmp_path):
    store, reads = _store(tmp_path)
    assert controls.session_choice(CFG, store, KEY) == ("openai/main-model", "low")
    assert len(reads) == 1


def test_a_changed_setting_counts_at_the_next_read(tmp_path):
    store, _ = _store(tmp_path)
    controls.session_choice(CFG, store, KEY)
    controls._set(store, KEY, "model", "openai/fast-model")
    controls._set(store, KEY, "thinking", "off")
    assert controls.session_choice(CFG, store, KEY) == ("openai/fast-model", "")
    # the same answers as the one-at-a-time readers
    assert controls.session_model(CFG, store, KEY) == "openai/fast-model"
    assert controls.session_effort(CFG, store, KEY) == ""
    controls._set(store, KEY, "model", "openai/gone-model")  # no longer configured
    controls._set(store, KEY, "thinking", "high")
    assert controls.session_choice(CFG, store, KEY) == ("openai/main-model", "high")
