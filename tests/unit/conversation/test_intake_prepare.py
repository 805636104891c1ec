"""Intake's clean-up of a message and the prepare stage's user turn, without a daemon."""

from __future__ import annotations

from pathlib import Path

from bot.rules.admission import Verdict
from bot.config import parse_config
from bot.conversation.intake import Approved, valid_text
from bot.conversation.prepare import Prepare, _move_in, file_root
from bot.store import Store
from channels.base import InboundMessage, MediaItem


def msg(text="hi", **kw):
    return InboundMessage(channel="telegram", chat_id="42", sender_id="42", text=text, **kw)


def test_valid_text_replaces_lone_surrogates_everywhere():
    clean = msg()
    assert valid_text(clean) is clean
    dirty = msg("a\ud800b", sender_name="\udfff", api={"messages": [{"content": "x\ud800"}]})
    fixed = valid_text(dirty)
    assert fixed.text == "a\ufffdb" and fixed.sender_name == "\ufffd"
    assert fixed.api == {"messages": [{"content": "x\ufffd"}]}


def test_approved_looks_in_the_store():
    store = Store(":memory:")
    try:
        approved = Approved(store)
        assert ("telegram", "77") not in approved
        store.approve("telegram", "77")
        assert ("telegram", "77") in approved
        assert "telegram" not in approved and ("a", "b", "c") not in approved
    finally:
        store.close()


def test_file_root_is_a_guests_own_directory(tmp_path):
    cfg = parse_config({"agent": {"state_dir": str(tmp_path)}})
    assert file_root(cfg, "k", Verdict("serve", "owner")) is None
    root = file_root(cfg, "agent:main:telegram:direct:9", Verdict("serve", "guest"))
    assert isinstance(root, Path) and str(root).startswith(str(tmp_path))


async def test_the_user_turn_of_a_plain_message(tmp_path):
    cfg = parse_config({"agent": {"state_dir": str(tmp_path)}})
    prep = Prepare(cfg, agent=None, channels={}, store=None)
    turn = await prep.user_turn(
        msg("hello there"), "k", Verdict("serve", "owner"), pending=[], was_mentioned=None
    )
    assert "hello there" in turn.text and turn.media == ()


async def test_attachments_without_a_channel_are_left_alone(tmp_path):
    cfg = parse_config({"agent": {"state_dir": str(tmp_path)}})
    item = MediaItem(kind="image", target="", ref="file-1")
    m = msg(attachments=[item])
    assert await Prepare(cfg, None, {}, None).fetch_media(m, Verdict("serve", "owner"), "k") == []
    assert m.attachments == [item]


async def test_move_in_leaves_a_file_it_did_not_download(tmp_path):
    item = MediaItem(kind="image", target=str(tmp_path / "elsewhere" / "a.png"))
    assert await _move_in(item, tmp_path / "incoming", tmp_path / "guest") is item


class Tools:
    def tool_names(self, trust):
        return {"exec"}


def test_an_api_plan_that_forks_starts_the_session_afresh(tmp_path):
    cfg = parse_config({"agent": {"state_dir": str(tmp_path)}})
    store = Store(":memory:")
    try:
        prep = Prepare(cfg, Tools(), {}, store)
        first = msg(api={"messages": [{"role": "user", "content": "a"}]})
        plan = prep.api_plan(first, "k", Verdict("serve", "owner"))
        assert not plan.error and not plan.fork
        store.put("api:k", {"epoch": 0, "seen": [*plan.seen, "x"], "pending": []})
        epoch = store.session("k")["epoch"]
        edited = [
            {"role": "user", "content": "a"},
            {"role": "assistant", "content": "edited"},
            {"role": "user", "content": "b"},
        ]
        plan = prep.api_plan(msg(api={"messages": edited}), "k", Verdict("serve", "owner"))
        assert plan.fork and store.session("k")["epoch"] == epoch + 1
    finally:
        store.close()
