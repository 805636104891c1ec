"""The prepare stage's attachments without a daemon: fetched through the channel (capped; a
failure is a note, never a failed turn), a guest's download moved into its own directory, read
into the user turn (a document's text), and the user turn of a stopped preparation."""

from __future__ import annotations

from pathlib import Path

from bot.config import parse_config
from bot.conversation.prepare import Prepare
from bot.model.gate import ModelGate
from bot.prompt import texts
from bot.rules.admission import Verdict
from bot.store import Store
from channels.base import Capabilities, Channel, ChannelError, InboundMessage, MediaItem
from channels.base import MediaTooLarge

OWNER, GUEST = Verdict("serve", "owner"), Verdict("serve", "guest")
GUEST_KEY = "agent:main:telegram:direct:77"


class FetchingChannel(Channel):
    """Fetches by ref: ``big`` is too large, ``gone`` fails, ``bad`` cannot be saved, any other
    ref is written into the destination directory as a small text file."""

    name = "telegram"
    capabilities = Capabilities()

    async def start(self, sink) -> None:
        pass

    async def stop(self) -> None:
        pass

    async def send(self, msg):
        return []

    async def fetch_media(self, item: MediaItem, dest_dir: Path, max_bytes: int) -> MediaItem:
        if item.ref == "big":
            raise MediaTooLarge("over the cap")
        if item.ref == "gone":
            raise ChannelError("404")
        if item.ref == "bad":
            raise PermissionError(13, "Permission denied")
        path = Path(dest_dir) / f"{item.ref}.txt"
        path.write_text(f"the text of {item.ref}")
        return MediaItem(kind=item.kind, target=str(path), name=item.name, mime="text/plain")


class Agent:
    def __init__(self, cfg, store) -> None:
        self.gate = ModelGate(cfg, store)

    def tool_names(self, trust):
        return {"read"}


def setup(tmp_path):
    cfg = parse_config({"agent": {"state_dir": str(tmp_path / "state")}})
    store = Store(":memory:")
    return cfg, store, Prepare(cfg, Agent(cfg, store), {"telegram": FetchingChannel()}, store)


def msg(*items: MediaItem, text="see attached", sender="42") -> InboundMessage:
    return InboundMessage(
        channel="telegram", chat_id=sender, sender_id=sender, text=text, attachments=list(items)
    )


async def test_failed_fetches_become_notes_and_the_rest_is_kept(tmp_path):
    cfg, store, prep = setup(tmp_path)
    local = MediaItem(kind="image", target="/already/here.png")
    m = msg(
        MediaItem(kind="document", target="", ref="big", name="huge.pdf"),
        MediaItem(kind="voice", target="", ref="gone"),
        MediaItem(kind="document", target="", ref="bad", name="x.txt"),
        MediaItem(kind="document", target="", ref="notes", name="notes.txt"),
        local,
    )
    notes = await prep.fetch_media(m, OWNER, "agent:main:main")
    assert notes == [
        f"attachment not downloaded: huge.pdf (document) is larger than "
        f"{cfg.media.max_download_mb:g} MB",
        "attachment could not be downloaded: voice (voice)",
        "attachment could not be saved: x.txt (Permission denied)",
    ]
    assert [Path(a.target).name for a in m.attachments] == ["notes.txt", "here.png"]
    assert Path(m.attachments[0].target).parent == cfg.media_dir
    store.close()


async def test_a_guests_download_moves_into_its_own_directory(tmp_path):
    cfg, store, prep = setup(tmp_path)
    m = msg(MediaItem(kind="document", target="", ref="letter", name="letter.txt"), sender="77")
    assert await prep.fetch_media(m, GUEST, GUEST_KEY) == []
    target = Path(m.attachments[0].target)
    root = prep.request(m, GUEST_KEY, "", GUEST, include_intro=False).file_root
    assert root is not None and target.parent == root / "media"
    assert target.read_text() == "the text of letter"
    assert not list((cfg.agent.state_dir / "incoming").iterdir())  # nothing left staged
    store.close()


async def test_a_document_is_read_into_the_user_turn(tmp_path):
    _cfg, store, prep = setup(tmp_path)
    m = msg(MediaItem(kind="document", target="", ref="minutes", name="minutes.txt"))
    turn = await prep.user_turn(m, "agent:main:main", OWNER, pending=[], was_mentioned=None)
    assert "see attached" in turn.text and "the text of minutes" in turn.text
    store.close()


async def test_attachments_that_cannot_be_read_never_fail_the_turn(tmp_path):
    _cfg, store, prep = setup(tmp_path)
    m = msg(MediaItem(kind="document", target=str(tmp_path / "missing.txt"), name="m.txt"))
    store.close()
    prep.agent.gate = None  # the model port is gone: preparing raises
    got = await prep.prepare_media(m, OWNER, "agent:main:main", addressed=True)
    assert got.text == "see attached" and got.notes == ["attachments could not be read"]
    assert (await prep.prepare_media(msg(), OWNER, "k", addressed=True)).notes == []


async def test_a_stopped_preparation_keeps_the_text_and_names_what_was_not_read(tmp_path):
    _cfg, store, prep = setup(tmp_path)
    m = msg(
        MediaItem(kind="voice", target="", ref="v1"),
        MediaItem(kind="document", target="", ref="d", name="a.pdf"),
    )
    turn = prep.unread_turn(m, pending=[], was_mentioned=None)
    assert "see attached" in turn.text and turn.media == ()
    assert "attachment not read: voice (voice); the turn was stopped" in turn.text
    assert "attachment not read: a.pdf (document); the turn was stopped" in turn.text
    store.close()


async def test_a_group_request_carries_its_context_until_the_intro_is_done(tmp_path):
    _cfg, store, prep = setup(tmp_path)
    g = InboundMessage(
        channel="telegram", chat_id="-100", sender_id="42", text="hi", chat_type="group"
    )
    key = "agent:main:telegram:group:-100"
    first = prep.request(g, key, "hi", OWNER, include_intro=True)
    assert first.group_id == "-100" and texts.GROUP_MENTION in first.extra_context
    store.mark_intro_done(key)
    later = prep.request(g, key, "hi", OWNER, include_intro=True)
    assert later.extra_context and texts.GROUP_MENTION not in later.extra_context
    store.close()
