"""The Bot API requests the Telegram channel makes, byte for byte (not a test): a fixed
set of sends (plain, Markdown, chunked, reply, topic, media by URL and upload, preview and
edit, typing, reaction, delete) against FakeTelegram, each request's method and raw body
printed (``--out`` writes them to a file), for comparing two versions of the channel:

    PYTHONPATH=/tmp/old python3 bench/telegram_wire.py --out /tmp/old.txt
    python3 bench/telegram_wire.py --out /tmp/new.txt && cmp /tmp/old.txt /tmp/new.txt

The returned message ids are printed too (what the outbox stores).  Multipart bodies carry
a random boundary (shown as ``BOUNDARY``); their bodies are not shown (the fake reads
them as a stream).
"""

from __future__ import annotations

import argparse
import asyncio
import re
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from channels.base import MediaItem, OutboundMessage
from channels.telegram import TelegramChannel
from tests.fakes.telegram import FakeTelegram


class WireTelegram(FakeTelegram):
    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.wire: list[str] = []

    async def _dispatch(self, request):
        kind = request.headers.get("Content-Type", "")
        # a multipart body is read by the fake as a stream: only its headers are kept here
        body = b"(multipart)" if kind.startswith("multipart/") else await request.read()
        kind = re.sub(r"boundary=\S+", "boundary=BOUNDARY", kind)
        method = request.match_info["tail"].rsplit("/", 1)[-1]
        if method not in ("getUpdates", "getMe", "deleteWebhook", "setMyCommands"):
            self.wire.append(f"{method} {kind}\n{body!r}")
        return await super()._dispatch(request)


async def run(out: Path | None) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="chela-wire-"))
    tg = WireTelegram(token="123:SECRET", bot_username="chela_bot")
    await tg.start()
    ch = TelegramChannel(token=tg.token, api_base=tg.api_base, media_dir=tmp / "media")
    await ch.open_for_sending()
    upload = tmp / "notes.txt"
    upload.write_text("hello")
    lines: list[str] = []
    sends = [
        OutboundMessage(chat_id="42", text="plain words"),
        OutboundMessage(chat_id="42", text="**bold** `code` and [a link](https://example.org)"),
        OutboundMessage(chat_id="42", text="x" * 5000 + "\n\n" + "y" * 10),
        OutboundMessage(chat_id="42", text="a reply", reply_to_id="7", reply_mode="all"),
        OutboundMessage(chat_id="-100123", text="in a topic", thread_id="9"),
        OutboundMessage(chat_id="42", text="<b>not html</b> & more"),
        OutboundMessage(
            chat_id="42",
            text="with media",
            media=[
                MediaItem(kind="image", target="https://example.org/a.png", name="a.png"),
                MediaItem(kind="file", target=str(upload), name="notes.txt", mime="text/plain"),
            ],
        ),
    ]
    for msg in sends:
        lines.append(f"ids {await ch.send(msg)}")
    pid = await ch.send_preview("42", "thinking…")
    lines.append(f"preview {pid}")
    await ch.edit_preview("42", pid, "thinking more")
    await ch.edit_preview("42", pid, "thinking more")  # not modified
    lines.append(f"ids {await ch.send(OutboundMessage(chat_id='42', text='final', edit_id=pid))}")
    tg.fail_next(
        "editMessageText", status=400, description="Bad Request: message to edit not found"
    )
    lines.append(f"ids {await ch.send(OutboundMessage(chat_id='42', text='gone', edit_id=pid))}")
    tg.fail_next("sendMessage", status=400, description="Bad Request: can't parse entities: x")
    lines.append(f"ids {await ch.send(OutboundMessage(chat_id='42', text='**html refused**'))}")
    tg.fail_next("sendMessage", status=429, retry_after=0)
    lines.append(f"ids {await ch.send(OutboundMessage(chat_id='42', text='after a 429'))}")
    tg.fail_next("sendMessage", status=403, description="Forbidden: bot was blocked by the user")
    try:
        await ch.send(OutboundMessage(chat_id="42", text="blocked"))
    except Exception as e:
        lines.append(f"error {type(e).__name__}: {e}")
    await ch.delete_message("42", "3") if hasattr(ch, "delete_message") else None
    await ch.typing("42")
    await ch.typing("-100123", "9")
    await ch.react("42", "1", "👍")
    await ch.stop()
    await tg.stop()
    text = "\n".join([*tg.wire, *lines]) + "\n"
    if out is None:
        print(text)
    else:
        out.write_text(text)
        print(f"{len(tg.wire)} requests written to {out}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path)
    asyncio.run(run(ap.parse_args().out))


if __name__ == "__main__":
    main()
