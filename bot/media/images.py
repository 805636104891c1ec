"""Images checked from their bytes, turned upright and resized for the model."""

from __future__ import annotations

import asyncio
import io
import logging
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bot import fs

log = logging.getLogger("chela.media")

IMAGE_FORMATS = frozenset({"JPEG", "PNG", "GIF", "WEBP", "BMP", "TIFF", "MPO", "ICO"})
MAX_PIXELS = 64_000_000  # decoded size limit (a decompression bomb is refused, not decoded)
MAX_JPEG_PIXELS = 200_000_000  # JPEGs decode scaled down (draft mode), so a larger one is fine
JPEG_QUALITY = 85
MODEL_SUFFIX = ".model"  # the resized copy: <download>.model.jpg / .model.png
MAX_FILE_BYTES = 256 * 1024 * 1024  # a file read here by path (intake passes the bytes)


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


def sniff_image(src: bytes | Path) -> str | None:
    """The Pillow format name of ``src`` (bytes read once, or a file read with no link
    followed, ``bot.fs``) when it is an image we accept, else None.  Reads the header only."""
    from PIL import Image, UnidentifiedImageError

    try:
        data = src if isinstance(src, bytes) else fs.read_in(src, MAX_FILE_BYTES)
        with Image.open(io.BytesIO(data)) as im:
            return im.format if im.format in IMAGE_FORMATS else None
    except (UnidentifiedImageError, OSError, ValueError, Image.DecompressionBombError):
        return None


def process_image(
    path: Path,
    max_px: int,
    out_dir: Path | None = None,
    root: Path | None = None,
    *,
    data: bytes | None = None,
) -> ImageOut:
    """Decode ``data`` (the bytes of ``path``, read once by the caller through ``bot.fs``;
    without them ``path`` is read here, no link followed), type from the bytes; apply its
    EXIF orientation, fit it into ``max_px`` × ``max_px`` and save it as JPEG (PNG when it
    has transparency) next to ``path`` (or in ``out_dir``), mode 0600.  With ``root`` (a
    guest's directory holding the destination) the copy is written through the root's
    handle, no link followed (``bot.fs``).  Raises ``NotAnImage``, ``OSError``."""
    from PIL import Image

    if data is None:
        data = fs.read_in(path, MAX_FILE_BYTES, fs.root_holding(root, path) if root else None)
    img, fmt = _decode(data, max_px)
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
    buf = io.BytesIO()
    img.save(buf, **save)
    dest = (out_dir or path.parent) / f"{path.name}{MODEL_SUFFIX}{ext}"
    dest = fs.save(dest, buf.getvalue(), root=root)
    return ImageOut(dest, mime, img.size[0], img.size[1], fmt)


def _decode(data: bytes, max_px: int) -> tuple[Any, str]:
    """The upright first frame of the image ``data`` (JPEGs decoded at a scale near
    ``max_px``) and its format.  Raises ``NotAnImage``."""
    from PIL import Image, ImageOps, UnidentifiedImageError

    try:
        with Image.open(io.BytesIO(data)) as im:
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
    return img, fmt


IMAGE_SLOTS = 2  # images decoded at once: each 12 MP photo holds ~25 MB while it is processed
_SLOT: list[Any] = []  # [loop, semaphore] of the running daemon loop


def _image_slot() -> asyncio.Semaphore:
    """The running loop's limit on concurrent image decodes (bench/media_bench.py: ten at
    once cost ~250 MB more peak RSS than two; two CPUs decode no faster with more)."""
    loop = asyncio.get_running_loop()
    if not _SLOT or _SLOT[0] is not loop:  # one daemon loop per process; tests start new ones
        _SLOT[:] = [loop, asyncio.Semaphore(IMAGE_SLOTS)]
    return _SLOT[1]
