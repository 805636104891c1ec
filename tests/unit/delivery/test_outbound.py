"""What a reply plan becomes on its way out (bot/delivery/outbound.py): reply threading, media
checked against the turn's roots (a guest's staged), media a channel cannot carry as text."""

from __future__ import annotations

import os
import time
from types import SimpleNamespace

import pytest

from bot.delivery.outbound import build_outbound, channel_traits
from bot.rules.replies import ReplyPlan
from channels.base import Capabilities, MediaItem
from tests.unit.delivery.memory import ScriptedChannel


@pytest.fixture
def cfg(tmp_path):
    ws = tmp_path / "workspace"
    media = tmp_path / "media"
    ws.mkdir()
    media.mkdir()
    return SimpleNamespace(
        agent=SimpleNamespace(state_dir=tmp_path / "state", workspace=ws),
        media_dir=media,
        delivery=SimpleNamespace(max_age_seconds=3600.0),
    )


def channel(*, media: bool) -> ScriptedChannel:
    ch = ScriptedChannel()
    ch.capabilities = Capabilities(media=media, threads=True)
    return ch


@pytest.mark.parametrize(
    ("plan_reply_to", "mode", "trigger", "reply_to_id", "out_mode"),
    [
        ("current", "off", "9", "9", "first"),
        ("current", "off", "", None, "first"),
        ("55", "off", "9", "55", "first"),
        ("55", "all", "9", "55", "all"),
        (None, "first", "9", "9", "first"),
        (None, "all", "9", "9", "all"),
        (None, "all", "", None, "all"),
        (None, "off", "9", None, "first"),
    ],
)
def test_reply_threading(cfg, plan_reply_to, mode, trigger, reply_to_id, out_mode):
    plan = ReplyPlan(text="hi", reply_to=plan_reply_to)
    out = build_outbound(
        cfg, None, plan, chat_id="42", thread_id="t", trigger_id=trigger, reply_mode=mode
    )
    assert (out.reply_to_id, out.reply_mode) == (reply_to_id, out_mode)
    assert (out.chat_id, out.thread_id, out.text, out.account) == ("42", "t", "hi", "default")


def test_media_a_channel_cannot_carry_becomes_text(cfg):
    (cfg.agent.workspace / "chart.png").write_bytes(b"png")
    plan = ReplyPlan(
        text="Here.",
        media=[
            MediaItem(kind="image", target="https://example.org/a/cat.jpg"),
            MediaItem(kind="document", target="chart.png"),
        ],
    )
    out = build_outbound(cfg, channel(media=False), plan, chat_id="42")
    assert out.media == []
    assert out.text == "Here.\nImage: https://example.org/a/cat.jpg\n[attachment: chart.png]"


def test_media_a_channel_can_carry_is_checked_and_kept(cfg):
    (cfg.media_dir / "v.ogg").write_bytes(b"ogg")
    plan = ReplyPlan(
        text="",
        audio_as_voice=True,
        media=[
            MediaItem(kind="audio", target=str(cfg.media_dir / "v.ogg")),
            MediaItem(kind="image", target="missing.png"),
        ],
    )
    for ch in (channel(media=True), None):
        out = build_outbound(cfg, ch, plan, chat_id="42", account="work")
        assert [m.target for m in out.media] == [str((cfg.media_dir / "v.ogg").resolve())]
        assert out.text == "[attachment unavailable: missing.png]"
        assert out.audio_as_voice and out.account == "work"


def test_a_guest_turn_sends_a_private_copy_and_prunes_old_copies(cfg, tmp_path):
    guest = tmp_path / "guest"
    guest.mkdir()
    (guest / "note.txt").write_text("mine")
    stage = cfg.agent.state_dir / "outgoing"
    stage.mkdir(parents=True)
    old = stage / "old.txt"
    old.write_text("stale")
    os.utime(old, (time.time() - 5 * 86400,) * 2)
    plan = ReplyPlan(text="see", media=[MediaItem(kind="document", target="note.txt")])
    out = build_outbound(cfg, channel(media=True), plan, chat_id="7", roots=[guest])
    (item,) = out.media
    copy = item.target
    assert copy.startswith(str(stage)) and open(copy).read() == "mine"
    assert item.name == "note.txt"
    assert not old.exists()


def test_a_guest_cannot_send_the_owners_workspace(cfg, tmp_path):
    guest = tmp_path / "guest"
    guest.mkdir()
    (cfg.agent.workspace / "secret.txt").write_text("owner only")
    target = str(cfg.agent.workspace / "secret.txt")
    plan = ReplyPlan(text="x", media=[MediaItem(kind="document", target=target)])
    out = build_outbound(cfg, channel(media=True), plan, chat_id="7", roots=[guest])
    assert out.media == [] and out.text == "x\n[attachment unavailable: secret.txt]"


@pytest.mark.parametrize(
    ("ch", "policy", "traits"),
    [
        (None, None, ((), "off")),
        (
            channel(media=True),
            SimpleNamespace(reactions="minimal"),
            (("media", "threads"), "minimal"),
        ),
    ],
)
def test_channel_traits(ch, policy, traits):
    assert channel_traits(ch, policy) == traits
