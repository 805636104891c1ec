"""Intake: one message's fetched attachments turned into model input."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bot import fs
from bot.media.audio import audio_duration, format_duration, transcribe
from bot.media.documents import is_pdf, is_text_like, read_text_file, save_to_inbox
from bot.media.images import NotAnImage, _image_slot, process_image, sniff_image
from bot.media.pdf import PDF_MARGIN_CHARS, pdf_text
from bot.media.remote import fetch_image_url
from bot.rules.untrusted import clean_inline, untrusted_block

log = logging.getLogger("chela.media")

_READ_KINDS = frozenset({"image", "document", "voice", "audio"})  # what intake turns into input


@dataclass
class Prepared:
    """What one message's attachments add to the user turn."""

    text: str  # the sender's text, with voice transcripts appended
    notes: list[str] = field(default_factory=list)  # one-line remarks for the metadata block
    blocks: list[str] = field(default_factory=list)  # untrusted document bodies
    media: list[dict] = field(default_factory=list)  # image references for the stored turn

    def user_text(self, formatted: str) -> str:
        return "\n\n".join([formatted, *self.blocks])


async def prepare_inbound(
    cfg: Any,
    msg: Any,
    *,
    file_root: Path,
    dest_dir: Path,
    addressed: bool = True,
    read_tool: bool = False,
    call: Any = None,
) -> Prepared:
    """Turn the fetched attachments of ``msg`` into model input (see the module doc).

    ``file_root`` is where the session's file tools read (the workspace, or the guest's
    own directory): long documents are saved in its ``inbox/``.  ``dest_dir`` is where
    this message's downloads went (remote images fetched here land there too).
    ``addressed`` is False for a group message not addressed to the bot: its audio is
    not transcribed.  ``read_tool`` says whether this turn's tools include ``read``: the
    note about a saved long document mentions that tool only then."""
    prep = Prepared(text=msg.text or "")
    transcripts: list[str] = []
    for item in msg.attachments:
        got = await _local_file(cfg, item, file_root, dest_dir, prep)
        if got is None:
            continue
        path, data = got
        if await _image(cfg, item, path, data, file_root, prep):
            continue
        if item.kind in ("voice", "audio"):
            transcripts.append(await _audio_line(cfg, item, path, data, addressed, call))
        elif item.kind == "document":
            await _document(cfg, item, path, data, file_root, prep, read_tool)
    if transcripts:
        prep.text = "\n".join([prep.text, *transcripts]) if prep.text else "\n".join(transcripts)
    return prep


async def _local_file(
    cfg: Any, item: Any, file_root: Path, dest_dir: Path, prep: Prepared
) -> tuple[Path, bytes] | None:
    """The attachment's local file and its bytes, read ONCE ( "Guest
    directories"): under a guest's directory through a handle on its root with no link
    followed at any component, elsewhere (the daemon's own media dir) with no link followed
    at the file itself.  Every later step (decode, transcription, PDF child, inbox copy)
    gets these bytes, never the path, so a file swapped for a link to one of the owner's
    after the move-in is refused here and nothing of the owner's is read.  None (with a
    note when it matters) when there is nothing to read."""
    if item.kind not in _READ_KINDS:
        return None  # a video: named in the metadata, not read
    label = clean_inline(item.name or item.kind, 120)
    target = item.target
    if item.kind == "image" and target.startswith(("http://", "https://")):
        try:
            target = str(await fetch_image_url(cfg, target, dest_dir))
        except Exception as e:
            prep.notes.append(f"image not loaded: {label} ({clean_inline(str(e), 200)})")
            return None
    if not target or target.startswith(("http://", "https://")):
        return None  # a link the model sees in the metadata; nothing to read here
    path = Path(target)
    cap = int(cfg.media.max_download_mb * 1024 * 1024)
    try:
        data = await asyncio.to_thread(fs.read_in, path, cap, fs.root_holding(file_root, path))
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError, fs.NotRegularFile):
        return None  # gone (pruned) or not a file: as if it had not been attached
    except OSError as e:
        if isinstance(e, fs.LinkRefused):
            log.warning("attachment %s is a symbolic link now: not read", path.name)
        prep.notes.append(f"attachment could not be read: {label} ({e.strerror or e})")
        return None
    return path, data


async def _image(
    cfg: Any, item: Any, path: Path, data: bytes, file_root: Path, prep: Prepared
) -> bool:
    """An image (or a document that is one) resized for the model and its reference added;
    False when the attachment is to be handled as something else."""
    if item.kind not in ("image", "document"):
        return False
    if not (
        item.kind == "image"
        or (item.mime or "").startswith("image/")
        or await asyncio.to_thread(sniff_image, data)
    ):
        return False
    label = clean_inline(item.name or item.kind, 120)
    root = fs.root_holding(file_root, path)
    try:
        async with _image_slot():
            out = await asyncio.to_thread(
                process_image, path, cfg.media.image_max_px, None, root, data=data
            )
    except NotAnImage as e:
        if item.kind != "image":
            return False
        prep.notes.append(f"image could not be read: {label} ({e})")
        return True
    except OSError as e:
        prep.notes.append(f"image could not be saved: {label} ({e.strerror or e})")
        return True
    ref = {
        "kind": "image",
        "path": str(out.path),
        "mime": out.mime,
        "name": item.name or path.name,
        "size": [out.width, out.height],
    }
    if root is not None:  # later turns read the copy through this root (policy._data_url)
        ref["root"] = str(root)
    prep.media.append(ref)
    return True


async def _audio_line(
    cfg: Any, item: Any, path: Path, data: bytes, addressed: bool, call: Any
) -> str:
    """The user turn's line for a voice note or audio file.  ``call`` is the model gate
    of the sender's trust level (bot/model/gate.py): transcription is a model call."""
    from bot.model.gate import BudgetRefused

    what = (
        "voice note" if item.kind == "voice" else f"audio {clean_inline(item.name or 'file', 80)}"
    )
    dur = format_duration(await asyncio.to_thread(audio_duration, data))
    head = f"{what} {dur}".strip()
    if not cfg.media.transcription_model:
        return (
            f"[{head}: you cannot hear audio and it was not transcribed "
            "(no media.transcription_model is set); ask for the text if it matters]"
        )
    if not addressed:
        return f"[{head}, not transcribed: it was not addressed to you]"
    if call is None:
        return f"[{head}, not transcribed]"
    try:
        text = await transcribe(cfg, path, item.name, item.mime, call=call, data=data)
    except asyncio.CancelledError:
        raise
    except BudgetRefused:
        return f"[{head}, not transcribed: the budget for model calls is used up for today]"
    except Exception as e:
        log.warning("transcription failed for %s: %s", path.name, type(e).__name__)
        return f"[{head}, could not be transcribed]"
    if not text:
        return f"[{head}, transcribed: no speech]"
    return f"[{head}, transcribed] {text}"


async def _document(
    cfg: Any, item: Any, path: Path, data: bytes, file_root: Path, prep: Prepared, read_tool: bool
) -> None:
    name = item.name or path.name
    label = clean_inline(name, 120)
    limit = cfg.media.max_document_chars
    if is_pdf(data):
        try:
            text, pages = await pdf_text(data, max_chars=limit + PDF_MARGIN_CHARS)
        except ValueError as e:
            prep.notes.append(f"document {label}: {e}")
            return
        if not text.strip():
            prep.notes.append(
                f"document {label}: {pages} page PDF without a text layer (a scan?); "
                "its text cannot be read"
            )
            return
        kind = f"PDF ({pages} pages)"
    elif is_text_like(name, item.mime):
        read: str | None = await asyncio.to_thread(read_text_file, data)
        if read is None:
            return
        text = read
        kind = "text document"
    else:
        return
    if len(text) <= limit:
        prep.blocks.append(untrusted_block(f"Attached {kind}", name, text))
        return
    try:
        saved = await asyncio.to_thread(save_to_inbox, file_root, name, data)
        readable = saved
        if kind.startswith("PDF"):
            readable = await asyncio.to_thread(
                save_to_inbox, file_root, saved.name + ".txt", text.encode("utf-8")
            )
    except OSError as e:
        prep.notes.append(f"document {label} is too long to show and could not be saved ({e})")
        return
    rel = readable.relative_to(file_root)
    how = (
        "open it with the read tool, in parts"
        if read_tool
        else "no tool of this conversation can open it; ask the sender for the part that matters"
    )
    prep.notes.append(
        f"document {label}: {kind}, {len(text)} characters, too long to show here; "
        f"saved as {rel} ({how})"
    )
