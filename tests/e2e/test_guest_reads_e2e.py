"""SPEC §9.5 "Guest directories", the daemon's READS of a guest's files (issue 23 item 2),
end to end: fake Telegram → daemon → fake LLM.

A guest's download is moved into its ``media/``, then read for the model: decoded and
resized (images), transcribed (voice), read as text or PDF (documents); the resized copy is
read again on later turns.  The guest's exec runs in that directory, so between the move-in
and the read it can swap the file for a symbolic link to a file of the owner's.  The race is
made deterministic: ``bot.fs.move_in`` is wrapped so the swap happens right after the move
(or between turn 1 and turn 2 for the stored resized copy), as the guest's exec would do it.
Every attack has its legitimate twin."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bot import fs
from tests.e2e import make_config, running, telegram_section
from tests.fakes.llm import text
from tests.fakes.media_samples import decode_data_url, image_bytes, ogg_opus, pdf_bytes
from tests.e2e.test_guest_dirs_e2e import SECRET, gdir_of, owner_dir

GUEST = 79
OWNER_IMAGE = (77, 55)  # the size of the owner's secret picture: recognisable in a data URL
OWNER_PDF_TEXT = "owner ledger 31337 confidential"


@pytest.fixture(autouse=True)
def _forget_blind_models():
    import bot.media

    bot.media._BLIND.clear()
    yield
    bot.media._BLIND.clear()


def cfg_for(tmp_path, llm, tg, **media):
    return make_config(
        tmp_path,
        llm,
        channels=telegram_section(tg, dm_policy="open"),  # the stranger is a guest
        agent={"guest_daily_cost_limit_usd": 5.0},
        media={"vision": "on", "max_document_chars": 5000, **media},
    )


def owner_files(tmp_path: Path) -> Path:
    """~/.ssh/id_rsa plus a picture and a PDF of the owner's, next to it."""
    d = owner_dir(tmp_path)
    (d / "holiday.jpg").write_bytes(image_bytes(*OWNER_IMAGE, color=(10, 200, 10)))
    (d / "ledger.pdf").write_bytes(pdf_bytes([OWNER_PDF_TEXT]))
    return d


@pytest.fixture
def swap_after_move_in(monkeypatch):
    """Once armed with a target, the next file moved into a guest's dir is replaced by a
    symbolic link to it the moment the move returns: what the guest's exec can do."""
    target: list[Path] = []
    real = fs.move_in

    def move_in(src, root, path):
        moved = real(src, root, path)
        if target:
            moved.unlink()
            moved.symlink_to(target.pop())
        return moved

    monkeypatch.setattr(fs, "move_in", move_in)
    return target


def images_sent(llm) -> list[tuple[int, int]]:
    return [decode_data_url(u).size for parts in llm.image_parts for u in parts]


def everything_sent(llm) -> str:
    return json.dumps(llm.requests) + repr([t["data"] for t in llm.transcriptions])


def user_turn(llm, i: int = -1) -> str:
    c = [m for m in llm.requests[i]["messages"] if m["role"] == "user"][-1]["content"]
    return c if isinstance(c, str) else "\n".join(p.get("text", "") for p in c)


async def guest_sends(tg, n: int, text_: str = "", **attachment) -> None:
    tg.inject_message(GUEST, text_, from_id=GUEST, **attachment)
    await tg.wait_for_sent(n, timeout=20)


# --------------------------------------------------------------------------- images
async def test_a_photo_swapped_for_a_link_is_not_read(tmp_path, llm, tg, swap_after_move_in):
    cfg = cfg_for(tmp_path, llm, tg)
    mine = owner_files(tmp_path)
    llm.script(text("a picture"))
    swap_after_move_in.append(mine / "holiday.jpg")
    async with running(cfg):
        await guest_sends(tg, 1, "pic", photo=image_bytes(200, 100))
    assert OWNER_IMAGE not in images_sent(llm) and images_sent(llm) == []
    assert "could not be read" in user_turn(llm)
    assert (gdir_of(cfg, GUEST) / "media").is_dir()  # the guest's link is left alone
    assert tg.sent[-1].visible_text == "a picture"


async def test_a_guests_photo_reaches_the_model(tmp_path, llm, tg, swap_after_move_in):
    cfg = cfg_for(tmp_path, llm, tg)
    llm.script(text("a picture"))
    async with running(cfg):
        await guest_sends(tg, 1, "pic", photo=image_bytes(200, 100))
    assert images_sent(llm) == [(200, 100)]


async def test_a_stored_image_copy_swapped_for_a_link_is_not_sent_later(tmp_path, llm, tg):
    cfg = cfg_for(tmp_path, llm, tg)
    mine = owner_files(tmp_path)
    llm.script(text("a picture"), text("still here"))
    async with running(cfg):
        await guest_sends(tg, 1, "pic", photo=image_bytes(200, 100))
        [copy] = (gdir_of(cfg, GUEST) / "media").glob("*.model.jpg")
        copy.unlink()
        copy.symlink_to(mine / "holiday.jpg")  # between turn 1 and turn 2
        await guest_sends(tg, 2, "and now?")
    assert [len(p) for p in llm.image_parts] == [1, 0]
    assert OWNER_IMAGE not in images_sent(llm)
    assert ", no longer available]" in json.dumps(llm.requests[1]["messages"])


async def test_a_stored_image_copy_reaches_the_model_on_the_next_turn(tmp_path, llm, tg):
    cfg = cfg_for(tmp_path, llm, tg)
    llm.script(text("a picture"), text("still here"))
    async with running(cfg):
        await guest_sends(tg, 1, "pic", photo=image_bytes(200, 100))
        await guest_sends(tg, 2, "and now?")
    assert images_sent(llm) == [(200, 100), (200, 100)]


# ------------------------------------------------------------------------ documents
async def test_a_text_document_swapped_for_a_link_is_not_read(
    tmp_path, llm, tg, swap_after_move_in
):
    cfg = cfg_for(tmp_path, llm, tg)
    mine = owner_files(tmp_path)
    llm.script(text("a file"))
    swap_after_move_in.append(mine / "id_rsa")
    async with running(cfg):
        await guest_sends(
            tg,
            1,
            "read",
            document=b"hello notes\n",
            document_name="notes.txt",
            mime_type="text/plain",
        )
    assert "owner-only" not in everything_sent(llm)
    assert "could not be read" in user_turn(llm)
    assert sorted(p.name for p in mine.iterdir()) == ["holiday.jpg", "id_rsa", "ledger.pdf"]
    assert (mine / "id_rsa").read_bytes() == SECRET


async def test_a_pdf_swapped_for_a_link_is_not_read(tmp_path, llm, tg, swap_after_move_in):
    cfg = cfg_for(tmp_path, llm, tg)
    mine = owner_files(tmp_path)
    llm.script(text("a file"))
    swap_after_move_in.append(mine / "ledger.pdf")
    async with running(cfg):
        await guest_sends(
            tg, 1, "read", document=pdf_bytes(["guest page"]), document_name="mine.pdf"
        )
    assert OWNER_PDF_TEXT not in everything_sent(llm)
    assert "could not be read" in user_turn(llm)


async def test_a_guests_text_document_and_pdf_reach_the_model(tmp_path, llm, tg):
    cfg = cfg_for(tmp_path, llm, tg)
    llm.script(text("a file"), text("a pdf"))
    async with running(cfg):
        await guest_sends(
            tg,
            1,
            "read",
            document=b"hello notes\n",
            document_name="notes.txt",
            mime_type="text/plain",
        )
        await guest_sends(tg, 2, "read", document=pdf_bytes(["guest page"]), document_name="g.pdf")
    assert "hello notes" in user_turn(llm, 0)
    assert "guest page" in user_turn(llm, 1) and "Attached PDF (1 pages)" in user_turn(llm, 1)


# ---------------------------------------------------------------------------- voice
async def test_a_voice_note_swapped_for_a_link_is_not_transcribed(
    tmp_path, llm, tg, swap_after_move_in
):
    cfg = cfg_for(tmp_path, llm, tg, transcription_model="openai/whisper-1")
    mine = owner_files(tmp_path)
    llm.script(text("heard"))
    swap_after_move_in.append(mine / "id_rsa")
    async with running(cfg):
        await guest_sends(tg, 1, voice=ogg_opus(3), duration=3)
    assert llm.transcriptions == []
    assert "owner-only" not in everything_sent(llm)
    assert "could not be read" in user_turn(llm)


async def test_a_guests_voice_note_is_transcribed(tmp_path, llm, tg):
    cfg = cfg_for(tmp_path, llm, tg, transcription_model="openai/whisper-1")
    llm.transcript = "call me back"
    llm.script(text("heard"))
    async with running(cfg):
        await guest_sends(tg, 1, voice=ogg_opus(3), duration=3)
    assert [t["data"][:4] for t in llm.transcriptions] == [b"OggS"]
    assert "[voice note 0:03, transcribed] call me back" in user_turn(llm)
