"""SPEC §9.5 "Guest directories", end to end: fake Telegram → daemon → fake LLM → fake
Telegram.  A guest can write its own directory (file tools, exec), so it can plant a
symbolic link anywhere in it; nothing the daemon writes there may follow such a link, and
what the daemon sends from there is the bytes it checked.  The links are planted on disk
by the test, as the guest's exec would.  Every attack has its legitimate twin."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from bot.rules.admission import guest_dir, session_key
from channels.base import InboundMessage
from tests.e2e import eventually, make_config, running, telegram_section
from tests.fakes.llm import text
from tests.fakes.media_samples import image_bytes
from tests.e2e.test_outbox import outbox_states
from tests.e2e.test_trust_e2e import FRIEND, OWNER, approve_friend

STRANGER = 79
KEY = b"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGuestKeyGuestKeyGuestKeyGuestKey attacker@evil\n" * 5
SECRET = b"-----BEGIN OPENSSH PRIVATE KEY-----\nowner-only\n-----END OPENSSH PRIVATE KEY-----\n"


@pytest.fixture
def fast_pairing(monkeypatch):
    monkeypatch.setattr("bot.app.daemon.PAIRING_POLL", 0.05)


def cfg_for(tmp_path, llm, tg, *, media: dict | None = None, **tg_kw):
    return make_config(
        tmp_path,
        llm,
        channels=telegram_section(tg, **tg_kw),
        media={"vision": "on", "max_document_chars": 100, **(media or {})},
    )


def gdir_of(cfg, peer: int) -> Path:
    probe = InboundMessage(channel="telegram", chat_id=str(peer), sender_id=str(peer), text="")
    return guest_dir(cfg, session_key(probe, cfg, trust="guest"))


def owner_dir(tmp_path: Path) -> Path:
    """Stands for ~/.ssh: a directory of the owner's the guest must never reach."""
    d = tmp_path / "home" / ".ssh"
    d.mkdir(parents=True)
    (d / "id_rsa").write_bytes(SECRET)
    return d


def plant(link: Path, target: Path) -> None:
    link.parent.mkdir(parents=True, exist_ok=True)
    if link.is_dir() and not link.is_symlink():
        os.rmdir(link)
    elif link.exists() or link.is_symlink():
        link.unlink()
    link.symlink_to(target)


def last_user_text(llm) -> str:
    msgs = [m for m in llm.requests[-1]["messages"] if m["role"] == "user"]
    c = msgs[-1]["content"]
    return c if isinstance(c, str) else "\n".join(p.get("text", "") for p in c)


async def send_keys(tg, n: int) -> None:
    tg.inject_message(
        FRIEND,
        "my keys",
        from_id=FRIEND,
        document=KEY,
        document_name="authorized_keys",
        mime_type="text/plain",
    )
    await tg.wait_for_sent(n, timeout=15)


# ------------------------------------------------------------------ the inbox (item 2)
async def test_a_guests_inbox_link_does_not_redirect_a_saved_document(
    tmp_path, llm, tg, capsys, fast_pairing
):
    cfg = cfg_for(tmp_path, llm, tg)
    ssh = owner_dir(tmp_path)
    llm.script(text("welcome"), text("got it"))
    async with running(cfg):
        await approve_friend(tmp_path, cfg, tg, capsys)
        await tg.wait_for_sent(4, timeout=15)  # with the owner's pairing notice
        plant(gdir_of(cfg, FRIEND) / "inbox", ssh)  # what the guest's exec would do
        await send_keys(tg, 5)
    assert sorted(p.name for p in ssh.iterdir()) == ["id_rsa"]  # nothing written there
    assert tg.sent[-1].chat_id == FRIEND and tg.sent[-1].visible_text == "got it"
    assert "could not be saved" in last_user_text(llm)


async def test_a_guests_long_document_is_saved_in_its_inbox(
    tmp_path, llm, tg, capsys, fast_pairing
):
    cfg = cfg_for(tmp_path, llm, tg)
    llm.script(text("welcome"), text("got it"))
    async with running(cfg):
        await approve_friend(tmp_path, cfg, tg, capsys)
        await tg.wait_for_sent(4, timeout=15)  # with the owner's pairing notice
        await send_keys(tg, 5)
    saved = gdir_of(cfg, FRIEND) / "inbox" / "authorized_keys"
    assert saved.read_bytes() == KEY and oct(saved.stat().st_mode & 0o777) == "0o600"
    assert "saved as inbox/authorized_keys" in last_user_text(llm)


# ------------------------------------------------------------ downloads, images, speech
async def test_a_guests_media_link_does_not_redirect_downloads_or_copies(tmp_path, llm, tg):
    cfg = cfg_for(tmp_path, llm, tg, dm_policy="open")
    ssh = owner_dir(tmp_path)
    plant(gdir_of(cfg, STRANGER) / "media", ssh)
    llm.script(text("a picture"), text("a file"))
    async with running(cfg):
        tg.inject_message(STRANGER, "pic", from_id=STRANGER, photo=image_bytes(200, 200))
        await tg.wait_for_sent(1, timeout=15)
        tg.inject_message(
            STRANGER, "", from_id=STRANGER, document=KEY, document_name="authorized_keys"
        )
        await tg.wait_for_sent(2, timeout=15)
    assert sorted(p.name for p in ssh.iterdir()) == ["id_rsa"]
    assert [m.visible_text for m in tg.sent] == ["a picture", "a file"]
    assert (gdir_of(cfg, STRANGER) / "media").is_symlink()  # the guest's link is left alone


async def test_a_guests_downloads_and_image_copies_land_in_its_media_dir(tmp_path, llm, tg):
    cfg = cfg_for(tmp_path, llm, tg, dm_policy="open")
    llm.script(text("a picture"))
    async with running(cfg):
        tg.inject_message(STRANGER, "pic", from_id=STRANGER, photo=image_bytes(200, 200))
        await tg.wait_for_sent(1, timeout=15)
    names = [p.name for p in (gdir_of(cfg, STRANGER) / "media").iterdir()]
    assert len(names) == 2 and any(n.endswith(".model.jpg") for n in names)
    assert len(llm.image_parts[0]) == 1


async def test_a_guests_media_link_does_not_redirect_speech(tmp_path, llm, tg):
    cfg = cfg_for(tmp_path, llm, tg, dm_policy="open", media={"tts_model": "openai/tts-1"})
    ssh = owner_dir(tmp_path)
    plant(gdir_of(cfg, STRANGER) / "media", ssh)
    llm.script(text("[[audio_as_voice]] Good morning."))
    async with running(cfg):
        tg.inject_message(STRANGER, "say hi", from_id=STRANGER)
        await tg.wait_for_sent(1, timeout=15)
    assert sorted(p.name for p in ssh.iterdir()) == ["id_rsa"]
    assert tg.sent[-1].visible_text == "Good morning."


async def test_a_guests_spoken_reply_is_sent_as_a_voice_note(tmp_path, llm, tg):
    cfg = cfg_for(tmp_path, llm, tg, dm_policy="open", media={"tts_model": "openai/tts-1"})
    llm.script(text("[[audio_as_voice]] Good morning."))
    async with running(cfg):
        tg.inject_message(STRANGER, "say hi", from_id=STRANGER)
        await tg.wait_for(lambda: tg.calls_of("sendVoice"), timeout=15)
        await tg.wait_for(lambda: [m for m in tg.sent if m.kind == "voice"], timeout=15)
    voices = [m for m in tg.sent if m.kind == "voice"]
    assert voices[0].data == llm.speech_audio
    assert [p.suffix for p in (gdir_of(cfg, STRANGER) / "media").iterdir()] == [".ogg"]


# ------------------------------------------------------------ attachments (item 3)
async def attach_own_file(tmp_path, llm, tg, *, swap: bool) -> list:
    """A guest's reply attaching its own file waits in the outbox behind an earlier reply
    that Telegram keeps refusing (502); meanwhile the guest (``swap``) replaces the file
    with a link to the owner's private key; then Telegram is back."""
    cfg = cfg_for(tmp_path, llm, tg, dm_policy="open")
    ssh = owner_dir(tmp_path)
    gdir = gdir_of(cfg, STRANGER)
    gdir.mkdir(parents=True)
    (gdir / "notes.txt").write_bytes(b"the guest's own notes\n")
    llm.script(text("one moment"), text("here [DOCUMENT:notes.txt]"))
    async with running(cfg):
        tg.fail_chat(STRANGER, 502, times=10_000)  # an outage of this chat's text messages
        tg.inject_message(STRANGER, "hello", from_id=STRANGER)
        tg.inject_message(STRANGER, "send my notes", from_id=STRANGER)
        await eventually(lambda: sum(outbox_states(cfg).values()) == 2, timeout=20)
        await asyncio.sleep(0.3)
        assert tg.calls_of("sendDocument") == []  # the attachment waits behind "one moment"
        if swap:  # the guest's exec, while the reply waits in the outbox
            plant(gdir / "notes.txt", ssh / "id_rsa")
        tg.clear_failures()
        await tg.wait_for(lambda: [m for m in tg.sent if m.kind == "document"], timeout=30)
        await tg.wait_for(lambda: outbox_states(cfg) == {"sent": 2}, timeout=15)
    return [m for m in tg.sent if m.kind == "document"]


async def test_what_is_sent_is_what_was_checked_not_a_swapped_in_link(tmp_path, llm, tg):
    docs = await attach_own_file(tmp_path, llm, tg, swap=True)
    assert all(SECRET not in (m.data or b"") for m in docs)
    assert [m.data for m in docs] == [b"the guest's own notes\n"]


async def test_a_guests_own_file_is_delivered_after_an_outage(tmp_path, llm, tg):
    docs = await attach_own_file(tmp_path, llm, tg, swap=False)
    assert [(m.data, m.filename) for m in docs] == [(b"the guest's own notes\n", "notes.txt")]


async def test_a_guests_link_in_its_directory_is_not_sent(tmp_path, llm, tg):
    cfg = cfg_for(tmp_path, llm, tg, dm_policy="open")
    ssh = owner_dir(tmp_path)
    plant(gdir_of(cfg, STRANGER) / "docs", ssh)  # a link to a directory ...
    llm.script(text("here [DOCUMENT:docs/id_rsa]"), text("owner: [DOCUMENT:notes.txt]"))
    cfg.agent.workspace.mkdir(parents=True, exist_ok=True)
    (cfg.agent.workspace / "notes.txt").write_bytes(b"owner notes")
    async with running(cfg):
        tg.inject_message(STRANGER, "send it", from_id=STRANGER)
        await tg.wait_for_sent(1, timeout=15)
        tg.inject_message(OWNER, "send mine", from_id=OWNER)  # twin: the owner's file goes
        await tg.wait_for(lambda: [m for m in tg.sent if m.kind == "document"], timeout=15)
    docs = [m for m in tg.sent if m.kind == "document"]
    assert [(m.chat_id, m.data) for m in docs] == [(OWNER, b"owner notes")]
    assert "attachment unavailable" in tg.sent[0].visible_text
