"""Images, voice notes and files reaching the model (SPEC §11).

Two halves:

* **Intake** (``prepare_inbound``), once per turn, after the router has downloaded an
  admitted sender's attachments: images are checked from their bytes, turned upright
  (EXIF), resized to ``media.image_max_px`` and saved next to the download; voice notes
  and audio are transcribed (litellm ``atranscription``); text documents and PDFs are
  inlined as untrusted data, or saved where the session's file tools can read them when
  they are long.  What it returns goes into the user turn: text for the ``[Message]``
  body, notes for the metadata block, document blocks, and *references* to the resized
  images (path and name), stored with the user message instead of any image bytes.
* **Request assembly** (``request_messages``), before every model call: the stored
  references of the last ``media.images_in_history`` user turns become base64
  ``image_url`` parts when the model can see, older ones a short ``[image: name]``
  placeholder, and a blind model gets ``[image attached: name, this model cannot see
  images]``.  A provider that rejects images (``is_image_rejection``) makes the loop send
  the turn again without them, and the model is remembered as blind for the process
  lifetime (``mark_blind``).

Pillow and pypdf are imported lazily: a turn without attachments never loads them.
"""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import logging
import os
import re
import struct
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bot.private import private_dir, write_private
from bot.untrusted import clean_inline, untrusted_block

log = logging.getLogger("chela.media")

# Pillow formats we hand to a model (what the big providers accept, plus the ones we
# convert: BMP/TIFF/MPO/HEIF-less); anything else is "not a supported image".
IMAGE_FORMATS = frozenset({"JPEG", "PNG", "GIF", "WEBP", "BMP", "TIFF", "MPO", "ICO"})
MAX_PIXELS = 64_000_000  # decoded size limit (a decompression bomb is refused, not decoded)
MAX_JPEG_PIXELS = 200_000_000  # JPEGs decode scaled down (draft mode), so a larger one is fine
JPEG_QUALITY = 85
MODEL_SUFFIX = ".model"  # the resized copy: <download>.model.jpg / .model.png

TEXT_EXTENSIONS = frozenset(
    {
        ".txt",
        ".md",
        ".markdown",
        ".rst",
        ".csv",
        ".tsv",
        ".json",
        ".jsonl",
        ".ndjson",
        ".yaml",
        ".yml",
        ".toml",
        ".ini",
        ".cfg",
        ".conf",
        ".log",
        ".xml",
        ".html",
        ".htm",
        ".svg",
        ".tex",
        ".org",
        ".srt",
        ".vtt",
        ".py",
        ".pyi",
        ".js",
        ".mjs",
        ".cjs",
        ".ts",
        ".tsx",
        ".jsx",
        ".java",
        ".kt",
        ".go",
        ".rs",
        ".c",
        ".h",
        ".cc",
        ".cpp",
        ".hpp",
        ".cs",
        ".rb",
        ".php",
        ".pl",
        ".lua",
        ".swift",
        ".m",
        ".r",
        ".jl",
        ".scala",
        ".sh",
        ".bash",
        ".zsh",
        ".fish",
        ".ps1",
        ".bat",
        ".sql",
        ".graphql",
        ".proto",
        ".css",
        ".scss",
        ".vue",
        ".svelte",
        ".dart",
        ".ex",
        ".exs",
        ".erl",
        ".hs",
        ".ml",
        ".clj",
        ".el",
        ".vim",
        ".nix",
        ".tf",
        ".gradle",
        ".properties",
        ".diff",
        ".patch",
        ".ipynb",
    }
)
TEXT_MIMES = frozenset(
    {
        "application/json",
        "application/x-ndjson",
        "application/xml",
        "application/yaml",
        "application/x-yaml",
        "application/toml",
        "application/javascript",
        "application/x-sh",
        "application/sql",
        "application/x-python",
        "application/csv",
    }
)
MAX_TEXT_BYTES = 8 * 1024 * 1024  # a "text" file larger than this is not read into memory
MAX_PDF_PAGES = 2000

_BLIND: set[str] = set()  # models a provider refused images for (process lifetime)
_VISION_CACHE: dict[str, bool] = {}


# ------------------------------------------------------------------------ the policy
@dataclass(frozen=True)
class MediaPolicy:
    """What request assembly needs: the model, ``media.vision`` and how many turns keep
    image bytes.  Blindness learned from a provider is shared by every policy of the
    same model (``mark_blind``)."""

    model: str
    vision: str = "auto"  # auto | on | off
    images_in_history: int = 2

    def can_see(self) -> bool:
        if self.vision == "off" or self.model in _BLIND:
            return False
        if self.vision == "on":
            return True
        return model_supports_vision(self.model)

    def mark_blind(self) -> None:
        mark_blind(self.model)


def policy_for(cfg: Any) -> MediaPolicy:
    m = cfg.media
    return MediaPolicy(cfg.agent.model, m.vision, m.images_in_history)


def model_supports_vision(model: str) -> bool:
    """litellm's local model map (never a network call: the map is loaded locally)."""
    cached = _VISION_CACHE.get(model)
    if cached is None:
        from bot.agent.llm import _load_litellm

        try:
            cached = bool(_load_litellm().supports_vision(model=model))
        except Exception:
            cached = False
        _VISION_CACHE[model] = cached
    return cached


def mark_blind(model: str) -> None:
    if model not in _BLIND:
        log.warning(
            "model %s refused an image; it is treated as blind until restart (media.vision)",
            model,
        )
    _BLIND.add(model)


def is_image_rejection(err: BaseException) -> bool:
    """A provider's HTTP 400 that is about images (the model or endpoint cannot take them)."""
    status = getattr(err, "status", None)
    cause = getattr(err, "cause", None)
    if status is None and cause is not None:
        status = getattr(cause, "status_code", None)
    if status != 400:
        return False
    text = f"{cause or ''} {err}".lower()
    return "image" in text or "vision" in text or "multimodal" in text


# ------------------------------------------------------------------ request assembly
_DATA_URLS: OrderedDict[str, str] = OrderedDict()  # path -> data URL (a few, for tool loops)
_DATA_URL_CACHE = 8


def _data_url(path: str, mime: str) -> str | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    key = f"{path}:{st.st_mtime_ns}:{st.st_size}"
    url = _DATA_URLS.get(key)
    if url is None:
        try:
            with open(path, "rb") as f:
                data = f.read()
        except OSError:
            return None
        url = f"data:{mime or 'image/jpeg'};base64,{base64.b64encode(data).decode('ascii')}"
        _DATA_URLS[key] = url
        while len(_DATA_URLS) > _DATA_URL_CACHE:
            _DATA_URLS.popitem(last=False)
    else:
        _DATA_URLS.move_to_end(key)
    return url


def _is_tool_result(m: dict) -> bool:
    c = m.get("content")
    return isinstance(c, str) and c.lstrip().startswith("<tool_result")


def _text_of(content: Any) -> str:
    if isinstance(content, list):
        return "\n".join(
            p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text"
        )
    return content or ""


def image_label(ref: dict) -> str:
    return clean_inline(ref.get("name") or "image", 120)


def request_messages(messages: list[dict], policy: MediaPolicy | None) -> list[dict]:
    """The messages as the provider gets them: stored image references (the ``media``
    key of a user message) become ``image_url`` parts in the last
    ``policy.images_in_history`` user turns when the model can see, a placeholder
    otherwise.  The ``media`` key never leaves; the list is returned as is when no
    message has one."""
    if not any("media" in m for m in messages):
        return messages
    see = policy is not None and policy.can_see()
    keep = policy.images_in_history if policy is not None else 0
    out = list(messages)
    turn = 0
    for i in range(len(out) - 1, -1, -1):
        m = out[i]
        if m.get("role") == "user" and not _is_tool_result(m):
            turn += 1
        if "media" not in m:
            continue
        refs = [r for r in m.get("media") or [] if isinstance(r, dict)]
        m = {k: v for k, v in m.items() if k != "media"}
        images = [r for r in refs if r.get("kind") == "image"]
        if not images:
            out[i] = m
            continue
        text = _text_of(m.get("content"))
        if not see:
            lines = [
                f"[image attached: {image_label(r)}, this model cannot see images]" for r in images
            ]
            m["content"] = "\n".join([text, *lines]) if text else "\n".join(lines)
        elif turn > keep:
            lines = [f"[image: {image_label(r)}]" for r in images]
            m["content"] = "\n".join([text, *lines]) if text else "\n".join(lines)
        else:
            parts: list[dict] = [{"type": "text", "text": text}] if text else []
            for r in images:
                url = _data_url(str(r.get("path") or ""), str(r.get("mime") or ""))
                if url is None:
                    parts.append(
                        {"type": "text", "text": f"[image: {image_label(r)}, no longer available]"}
                    )
                else:
                    parts.append({"type": "image_url", "image_url": {"url": url}})
            m["content"] = parts
        out[i] = m
    return out


def has_image_parts(messages: list[dict]) -> bool:
    return any(
        isinstance(m.get("content"), list)
        and any(isinstance(p, dict) and p.get("type") == "image_url" for p in m["content"])
        for m in messages
    )


# ------------------------------------------------------------------------- images
@dataclass(frozen=True)
class ImageOut:
    path: Path
    mime: str
    width: int
    height: int
    source_format: str


class NotAnImage(Exception):
    """The bytes are not an image we can use (unknown format, broken, too many pixels)."""


def sniff_image(path: Path) -> str | None:
    """The Pillow format name of ``path`` when it is an image we accept, else None.
    Reads the header only."""
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(path) as im:
            return im.format if im.format in IMAGE_FORMATS else None
    except (UnidentifiedImageError, OSError, ValueError, Image.DecompressionBombError):
        return None


def process_image(path: Path, max_px: int, out_dir: Path | None = None) -> ImageOut:
    """Decode ``path`` (type from the bytes), apply its EXIF orientation, fit it into
    ``max_px`` × ``max_px`` and save it as JPEG (PNG when it has transparency) next to
    the original (or in ``out_dir``), mode 0600.  Raises ``NotAnImage``."""
    from PIL import Image, ImageOps, UnidentifiedImageError

    try:
        with Image.open(path) as im:
            fmt = im.format or ""
            if fmt not in IMAGE_FORMATS:
                raise NotAnImage(f"{fmt or 'unknown'} is not a supported image format")
            w, h = im.size
            if w * h > (MAX_JPEG_PIXELS if fmt in ("JPEG", "MPO") else MAX_PIXELS):
                raise NotAnImage(f"too many pixels ({w}x{h})")
            if getattr(im, "n_frames", 1) > 1:
                im.seek(0)  # animations: the first frame
            long_side = max(w, h)
            if fmt in ("JPEG", "MPO") and long_side > max_px:
                # decode at 1/2, 1/4 or 1/8 scale straight from the DCT: most of the cost
                # of a 12 MP photo is decoding pixels we would throw away
                r = max_px / long_side
                im.draft("RGB", (max(1, int(w * r)), max(1, int(h * r))))
            img = ImageOps.exif_transpose(im)
            assert img is not None
            img.load()
    except NotAnImage:
        raise
    except (UnidentifiedImageError, Image.DecompressionBombError) as e:
        raise NotAnImage(str(e) or type(e).__name__) from None
    except (OSError, ValueError, SyntaxError, struct.error, EOFError) as e:
        raise NotAnImage(f"cannot decode ({type(e).__name__}: {e})") from None
    if max(img.size) > max_px:
        img.thumbnail((max_px, max_px), Image.Resampling.LANCZOS)
    alpha = img.mode in ("RGBA", "LA", "PA") or (img.mode == "P" and "transparency" in img.info)
    if alpha:
        img = img.convert("RGBA")
        ext, mime = ".png", "image/png"
        save: dict[str, Any] = {"format": "PNG", "optimize": False}
    else:
        if img.mode != "RGB":
            img = img.convert("RGB")
        ext, mime = ".jpg", "image/jpeg"
        save = {"format": "JPEG", "quality": JPEG_QUALITY}
    import io

    buf = io.BytesIO()
    img.save(buf, **save)
    dest = (out_dir or path.parent) / f"{path.name}{MODEL_SUFFIX}{ext}"
    write_private(dest, buf.getvalue())
    return ImageOut(dest, mime, img.size[0], img.size[1], fmt)


# -------------------------------------------------------------------------- audio
def audio_duration(path: Path) -> float | None:
    """Seconds of an Ogg (Opus or Vorbis) or WAV file, from its headers; None otherwise.
    (Telegram, Signal and Discord voice notes are Ogg/Opus.)"""
    try:
        with open(path, "rb") as f:
            head = f.read(4096)
            if head[:4] == b"RIFF" and head[8:12] == b"WAVE":
                import wave

                with wave.open(str(path), "rb") as w:
                    rate = w.getframerate()
                    return w.getnframes() / rate if rate else None
            if head[:4] != b"OggS":
                return None
            size = os.fstat(f.fileno()).st_size
            f.seek(max(0, size - 65536))
            tail = f.read()
    except (OSError, EOFError, ValueError):
        return None
    except Exception:  # wave.Error and friends
        return None
    rate, pre_skip = 0, 0
    i = head.find(b"OpusHead")
    if i >= 0 and len(head) >= i + 16:
        pre_skip = struct.unpack_from("<H", head, i + 10)[0]
        rate = 48000  # Opus granule positions always count 48 kHz samples
    else:
        j = head.find(b"\x01vorbis")
        if j >= 0 and len(head) >= j + 16:
            rate = struct.unpack_from("<I", head, j + 12)[0]
    k = tail.rfind(b"OggS")
    if not rate or k < 0 or len(tail) < k + 14:
        return None
    granule = struct.unpack_from("<q", tail, k + 6)[0]
    if granule <= 0:
        return None
    return max(0.0, (granule - pre_skip) / rate)


def format_duration(seconds: float | None) -> str:
    if seconds is None:
        return ""
    s = round(seconds)
    h, rest = divmod(s, 3600)
    m, sec = divmod(rest, 60)
    return f"{h}:{m:02d}:{sec:02d}" if h else f"{m}:{sec:02d}"


def _llm_key(cfg: Any, api_base: str) -> str:
    key = cfg.secret(cfg.agent.api_key_env) if cfg.agent.api_key_env else ""
    return key or ("sk-local" if api_base else "")


async def transcribe(cfg: Any, path: Path, name: str, mime: str) -> str:
    """The text of a voice note or audio file (litellm ``atranscription``, any
    OpenAI-compatible ``/audio/transcriptions``).  Raises on failure."""
    from bot.agent.llm import _litellm, _load_litellm

    litellm = _litellm or await asyncio.to_thread(_load_litellm)
    m = cfg.media
    api_base = m.transcription_api_base or cfg.agent.api_base
    data = await asyncio.to_thread(path.read_bytes)
    kw: dict[str, Any] = {
        "model": m.transcription_model,
        "file": (_upload_name(name, path, mime), data, mime or "application/octet-stream"),
        "timeout": cfg.agent.llm_timeout_seconds,
        "max_retries": 0,
    }
    if api_base:
        kw["api_base"] = api_base
    if key := _llm_key(cfg, api_base):
        kw["api_key"] = key
    resp = await asyncio.wait_for(litellm.atranscription(**kw), cfg.agent.llm_timeout_seconds + 5)
    text = getattr(resp, "text", None)
    if text is None and isinstance(resp, dict):
        text = resp.get("text")
    return str(text or "").strip()


_AUDIO_EXT = {
    "audio/ogg": ".ogg",
    "audio/opus": ".ogg",
    "audio/mpeg": ".mp3",
    "audio/mp3": ".mp3",
    "audio/mp4": ".m4a",
    "audio/x-m4a": ".m4a",
    "audio/m4a": ".m4a",
    "audio/aac": ".m4a",  # Signal's voice notes; transcription servers sniff the content
    "audio/wav": ".wav",
    "audio/x-wav": ".wav",
    "audio/webm": ".webm",
    "audio/flac": ".flac",
    "video/mp4": ".mp4",
}
_SERVER_EXT = {".flac", ".m4a", ".mp3", ".mp4", ".mpeg", ".mpga", ".oga", ".ogg", ".wav", ".webm"}


def _upload_name(name: str, path: Path, mime: str) -> str:
    """A file name whose extension names a container OpenAI-compatible transcription
    servers accept (they check it): Telegram's ``.oga`` and ``.opus`` are Ogg, a name
    without an extension gets one from the mime type."""
    base = Path(name or path.name).name or "audio"
    stem, suffix = Path(base).stem or "audio", Path(base).suffix.lower()
    if suffix in (".oga", ".opus"):
        return stem + ".ogg"
    if suffix in _SERVER_EXT:
        return base
    ext = _AUDIO_EXT.get((mime or "").split(";")[0].strip().lower())
    if ext is None and path.suffix.lower() in _SERVER_EXT:
        ext = path.suffix.lower()
    return base + ext if ext else base


async def speak(cfg: Any, text: str, dest_dir: Path) -> Path:
    """Speech for ``text`` (litellm ``aspeech``) as an Ogg/Opus file in ``dest_dir``."""
    import uuid

    from bot.agent.llm import _litellm, _load_litellm

    litellm = _litellm or await asyncio.to_thread(_load_litellm)
    m = cfg.media
    api_base = m.tts_api_base or m.transcription_api_base or cfg.agent.api_base
    kw: dict[str, Any] = {
        "model": m.tts_model,
        "input": text[:4000],
        "voice": m.tts_voice or "alloy",
        "response_format": "opus",
        "timeout": cfg.agent.llm_timeout_seconds,
    }
    if api_base:
        kw["api_base"] = api_base
    if key := _llm_key(cfg, api_base):
        kw["api_key"] = key
    resp = await asyncio.wait_for(litellm.aspeech(**kw), cfg.agent.llm_timeout_seconds + 5)
    data = resp.content if hasattr(resp, "content") else bytes(resp)
    if not data:
        raise ValueError("the speech endpoint returned no audio")
    dest = private_dir(dest_dir) / f"voice_{uuid.uuid4().hex[:12]}.ogg"
    await asyncio.to_thread(write_private, dest, data)
    return dest


async def speak_plan(cfg: Any, plan: Any, *, file_root: Path, out_dir: Path) -> Any:
    """Spoken replies (SPEC §11) with ``media.tts_model`` set: a ``[VOICE:<text>]`` marker
    whose target is not a URL or an existing file is text to speak, and
    ``[[audio_as_voice]]`` on a reply without audio speaks the reply's text; the speech
    (Ogg/Opus, in ``out_dir``) goes out as a voice note after the text.  A failed
    synthesis loses nothing: the words stay in the text."""
    if not cfg.media.tts_model or plan.silent:
        return plan
    media: list[Any] = list(plan.media)
    extra_text: list[str] = []
    changed = False
    # [VOICE:<words>] stays in the text for the reply parser (its target is no path):
    # here it becomes speech
    spoken, body = _voice_text_markers(plan.text)
    if spoken:
        changed = True
        from channels.base import MediaItem

        plan = dataclasses.replace(plan, text=body)
        media += [MediaItem("voice", words) for words in spoken]
    for i, item in enumerate(media):
        if item.kind != "voice" or item.is_url or _existing_file(item.target, file_root):
            continue
        words = item.target.strip()
        changed = True
        try:
            path = await speak(cfg, words, out_dir)
        except asyncio.CancelledError:
            raise
        except Exception as e:
            log.warning("speech synthesis failed: %s", type(e).__name__)
            media[i] = None
            extra_text.append(words)
            continue
        media[i] = dataclasses.replace(item, target=str(path), name="voice.ogg", mime="audio/ogg")
    has_audio = any(m is not None and m.kind in ("voice", "audio") for m in media)
    if plan.audio_as_voice and not has_audio and plan.text.strip():
        changed = True
        try:
            path = await speak(cfg, plan.text.strip(), out_dir)
        except asyncio.CancelledError:
            raise
        except Exception as e:
            log.warning("speech synthesis failed: %s", type(e).__name__)
        else:
            from channels.base import MediaItem

            media.append(MediaItem("voice", str(path), "voice.ogg", "audio/ogg"))
    if not changed:
        return plan
    text = "\n".join([plan.text, *extra_text]).strip() if extra_text else plan.text
    return dataclasses.replace(plan, text=text, media=[m for m in media if m is not None])


_VOICE_TEXT = re.compile(r"\[\s*voice\s*:(?P<words>[^\[\]\n]+)\](?!\()", re.IGNORECASE)


def _voice_text_markers(text: str) -> tuple[list[str], str]:
    """(words of each ``[VOICE:<words>]`` outside code fences, the text without them)."""
    spoken: list[str] = []
    parts = text.split("```")
    for i in range(0, len(parts), 2):  # even parts are outside fences

        def take(m: re.Match) -> str:
            words = m.group("words").strip()
            if not words:
                return m.group(0)  # nothing to say: left as written
            spoken.append(words)
            return ""

        parts[i] = _VOICE_TEXT.sub(take, parts[i])
    if not spoken:
        return [], text
    body = "```".join(parts)
    return spoken, re.sub(r"[ \t]{2,}", " ", body).strip()


def _existing_file(target: str, root: Path) -> bool:
    t = target.strip()
    if t.lower().startswith("file://") or t.startswith(("/", "~")):
        return True  # a path: delivery checks it (and says so when it is not allowed)
    try:
        return (root / t).is_file()
    except (OSError, ValueError):
        return False


# ---------------------------------------------------------------------- documents
def is_pdf(path: Path) -> bool:
    try:
        with open(path, "rb") as f:
            return f.read(1024).lstrip()[:5] == b"%PDF-"
    except OSError:
        return False


def is_text_like(name: str, mime: str) -> bool:
    mime = (mime or "").split(";")[0].strip().lower()
    suffix = Path(name or "").suffix.lower()
    return (
        mime.startswith("text/")
        or mime in TEXT_MIMES
        or mime.endswith(("+json", "+xml"))
        or suffix in TEXT_EXTENSIONS
    )


def read_text_file(path: Path) -> str | None:
    """The text of a text-like file (UTF-8, UTF-16 with a BOM, else a detected charset);
    None when it looks binary."""
    try:
        if path.stat().st_size > MAX_TEXT_BYTES:
            return None
        raw = path.read_bytes()
    except OSError:
        return None
    if raw.startswith((b"\xff\xfe", b"\xfe\xff")):
        return raw.decode("utf-16", "replace")
    if b"\x00" in raw[:8192]:
        return None
    if raw.startswith(b"\xef\xbb\xbf"):
        raw = raw[3:]
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        pass
    try:
        from charset_normalizer import from_bytes

        best = from_bytes(raw[:200_000]).best()
        if best is not None and best.encoding:
            return raw.decode(best.encoding, "replace")
    except Exception:
        pass
    return raw.decode("cp1252", "replace")


def pdf_text(path: Path) -> tuple[str, int]:
    """(text layer, page count) of a PDF.  Raises ``ValueError`` when it cannot be read
    (broken, or encrypted with a password)."""
    import logging as _logging

    from pypdf import PdfReader
    from pypdf.errors import PdfReadError

    _logging.getLogger("pypdf").setLevel(_logging.ERROR)  # malformed-PDF chatter
    try:
        reader = PdfReader(str(path))
        if reader.is_encrypted and not reader.decrypt(""):
            raise ValueError("the PDF is encrypted")
        pages = reader.pages
        out: list[str] = []
        for i, page in enumerate(pages):
            if i >= MAX_PDF_PAGES:
                out.append(f"[... {len(pages) - MAX_PDF_PAGES} more pages not read]")
                break
            out.append((page.extract_text() or "").strip())
        return "\n\n".join(t for t in out if t), len(pages)
    except ValueError:
        raise
    except (PdfReadError, OSError, KeyError, TypeError, AttributeError, struct.error) as e:
        raise ValueError(f"the PDF cannot be read ({type(e).__name__})") from None
    except Exception as e:  # pypdf raises a wide range on malformed files
        raise ValueError(f"the PDF cannot be read ({type(e).__name__})") from None


_SAFE = re.compile(r"[^A-Za-z0-9._ -]+")


def _inbox_name(inbox: Path, name: str) -> Path:
    stem = _SAFE.sub("_", Path(name).name).strip(" ._")[:100] or "file"
    p = inbox / stem
    base, suffix = Path(stem).stem, Path(stem).suffix
    n = 1
    while p.exists():
        p = inbox / f"{base}-{n}{suffix}"
        n += 1
    return p


def save_to_inbox(root: Path, name: str, data: bytes) -> Path:
    """Write ``data`` as ``<root>/inbox/<name>`` (a fresh name when taken), 0600."""
    inbox = private_dir(root / "inbox")
    dest = _inbox_name(inbox, name)
    write_private(dest, data)
    return dest


# ------------------------------------------------------------------------ intake
IMAGE_SLOTS = 2  # images decoded at once: each 12 MP photo holds ~25 MB while it is processed
_SLOT: list[Any] = []  # [loop, semaphore] of the running daemon loop


def _image_slot() -> asyncio.Semaphore:
    """The running loop's limit on concurrent image decodes (bench/media_bench.py: ten at
    once cost ~250 MB more peak RSS than two; two CPUs decode no faster with more)."""
    loop = asyncio.get_running_loop()
    if not _SLOT or _SLOT[0] is not loop:  # one daemon loop per process; tests start new ones
        _SLOT[:] = [loop, asyncio.Semaphore(IMAGE_SLOTS)]
    return _SLOT[1]


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
) -> Prepared:
    """Turn the fetched attachments of ``msg`` into model input (see the module doc).

    ``file_root`` is where the session's file tools read (the workspace, or the guest's
    own directory): long documents are saved in its ``inbox/``.  ``dest_dir`` is where
    this message's downloads went (remote images fetched here land there too).
    ``addressed`` is False for a group message not addressed to the bot: its audio is
    not transcribed.  ``read_tool`` says whether this turn's tools include ``read``: the
    note about a saved long document mentions that tool only then."""
    prep = Prepared(text=msg.text or "")
    m = cfg.media
    transcripts: list[str] = []
    for item in msg.attachments:
        label = clean_inline(item.name or item.kind, 120)
        target = item.target
        if not target:
            continue
        if item.kind == "image" and target.startswith(("http://", "https://")):
            try:
                path = await fetch_image_url(cfg, target, dest_dir)
            except Exception as e:
                prep.notes.append(f"image not loaded: {label} ({clean_inline(str(e), 200)})")
                continue
            target = str(path)
        if target.startswith(("http://", "https://")):
            continue  # a link the model sees in the metadata; nothing to read here
        path = Path(target)
        if not path.is_file():
            continue
        if item.kind in ("image", "document") and (
            item.kind == "image"
            or (item.mime or "").startswith("image/")
            or await asyncio.to_thread(sniff_image, path)
        ):
            try:
                async with _image_slot():
                    out = await asyncio.to_thread(process_image, path, m.image_max_px)
            except NotAnImage as e:
                if item.kind == "image":
                    prep.notes.append(f"image could not be read: {label} ({e})")
                    continue
            except OSError as e:
                prep.notes.append(f"image could not be saved: {label} ({e.strerror or e})")
                continue
            else:
                prep.media.append(
                    {
                        "kind": "image",
                        "path": str(out.path),
                        "mime": out.mime,
                        "name": item.name or path.name,
                        "size": [out.width, out.height],
                    }
                )
                continue
        if item.kind in ("voice", "audio"):
            line = await _audio_line(cfg, item, path, addressed)
            transcripts.append(line)
            continue
        if item.kind == "document":
            await _document(cfg, item, path, file_root, prep, read_tool)
    if transcripts:
        prep.text = "\n".join([prep.text, *transcripts]) if prep.text else "\n".join(transcripts)
    return prep


async def _audio_line(cfg: Any, item: Any, path: Path, addressed: bool) -> str:
    what = (
        "voice note" if item.kind == "voice" else f"audio {clean_inline(item.name or 'file', 80)}"
    )
    dur = format_duration(await asyncio.to_thread(audio_duration, path))
    head = f"{what} {dur}".strip()
    if not cfg.media.transcription_model:
        return (
            f"[{head}: you cannot hear audio and it was not transcribed "
            "(no media.transcription_model is set); ask for the text if it matters]"
        )
    if not addressed:
        return f"[{head}, not transcribed: it was not addressed to you]"
    try:
        text = await transcribe(cfg, path, item.name, item.mime)
    except asyncio.CancelledError:
        raise
    except Exception as e:
        log.warning("transcription failed for %s: %s", path.name, type(e).__name__)
        return f"[{head}, could not be transcribed]"
    if not text:
        return f"[{head}, transcribed: no speech]"
    return f"[{head}, transcribed] {text}"


async def _document(
    cfg: Any, item: Any, path: Path, file_root: Path, prep: Prepared, read_tool: bool
) -> None:
    name = item.name or path.name
    label = clean_inline(name, 120)
    limit = cfg.media.max_document_chars
    if await asyncio.to_thread(is_pdf, path):
        try:
            text, pages = await asyncio.to_thread(pdf_text, path)
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
        read: str | None = await asyncio.to_thread(read_text_file, path)
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
        original = await asyncio.to_thread(path.read_bytes)
        saved = await asyncio.to_thread(save_to_inbox, file_root, name, original)
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


# ------------------------------------------------------------------ remote images
async def fetch_image_url(cfg: Any, url: str, dest_dir: Path) -> Path:
    """Download an image URL (the HTTP API's ``image_url`` parts) into ``dest_dir``
    through web_fetch's SSRF guard: every hop's addresses are checked and pinned
    (``tools.web.allow_private_hosts`` applies), at most ``media.max_download_mb``."""
    import uuid
    from urllib.parse import urljoin

    import aiohttp

    from bot.agent.tools.web import (
        HostRules,
        PinnedResolver,
        _check_url,
        resolve_host,
    )

    max_bytes = int(cfg.media.max_download_mb * 1024 * 1024)
    rules = HostRules(cfg.tools.web.allow_private_hosts)
    resolver = PinnedResolver()
    connector = aiohttp.TCPConnector(resolver=resolver, use_dns_cache=False, force_close=True)
    timeout = aiohttp.ClientTimeout(total=60, connect=10)
    dest = private_dir(dest_dir) / f"http_{uuid.uuid4().hex[:12]}"
    async with aiohttp.ClientSession(
        connector=connector, timeout=timeout, trust_env=False
    ) as session:
        current = url
        for _hop in range(6):
            parts = _check_url(current)
            host = parts.hostname or ""
            port = parts.port or (443 if parts.scheme == "https" else 80)
            addrs = await resolve_host(host, port)
            rules.check(host, addrs)
            resolver.pinned = {host.lower().rstrip("."): addrs}
            async with session.get(current, allow_redirects=False) as resp:
                if resp.status in (301, 302, 303, 307, 308) and resp.headers.get("Location"):
                    current = urljoin(current, resp.headers["Location"])
                    continue
                if resp.status != 200:
                    raise ValueError(f"HTTP {resp.status}")
                if resp.content_length is not None and resp.content_length > max_bytes:
                    raise ValueError(f"larger than {cfg.media.max_download_mb:g} MB")
                buf = bytearray()
                async for chunk in resp.content.iter_chunked(65536):
                    buf += chunk
                    if len(buf) > max_bytes:
                        raise ValueError(f"larger than {cfg.media.max_download_mb:g} MB")
                await asyncio.to_thread(write_private, dest, bytes(buf))
                return dest
        raise ValueError("too many redirects")


__all__ = [
    "MediaPolicy",
    "NotAnImage",
    "Prepared",
    "audio_duration",
    "fetch_image_url",
    "has_image_parts",
    "is_image_rejection",
    "mark_blind",
    "policy_for",
    "prepare_inbound",
    "process_image",
    "request_messages",
    "speak",
    "speak_plan",
    "transcribe",
]
