"""Sample attachments made in the test: images (Pillow), Ogg/Opus voice notes, PDFs.

Nothing here is a recording or a downloaded file: every sample is generated from a few
parameters, so a test says exactly what it sends.
"""

from __future__ import annotations

import base64
import io
import struct


def image_bytes(
    width: int,
    height: int,
    *,
    fmt: str = "JPEG",
    color: tuple[int, int, int] = (200, 40, 40),
    orientation: int | None = None,
    alpha: bool = False,
    noise: bool = False,
) -> bytes:
    """An image of ``width`` × ``height``: the left half ``color``, the right half blue
    (so a rotation is visible in the pixels).  ``orientation`` writes an EXIF
    Orientation tag (6 = the camera was turned: rotate 90° clockwise to view).
    ``noise`` fills it with random pixels instead (a file that does not compress)."""
    import os

    from PIL import Image

    mode = "RGBA" if alpha else "RGB"
    if noise:
        img = Image.frombytes(mode, (width, height), os.urandom(width * height * len(mode)))
    else:
        img = Image.new(mode, (width, height), (*color, 128) if alpha else color)
        img.paste((20, 20, 220, 128) if alpha else (20, 20, 220), (width // 2, 0, width, height))
    buf = io.BytesIO()
    kw: dict = {}
    if orientation is not None:
        exif = Image.Exif()
        exif[0x0112] = orientation
        kw["exif"] = exif.tobytes()
    if fmt == "JPEG":
        kw["quality"] = 90
    img.save(buf, format=fmt, **kw)
    return buf.getvalue()


def decode_data_url(url: str):
    """A ``data:image/...;base64,`` URL → a Pillow image (loaded)."""
    from PIL import Image

    assert url.startswith("data:image/"), url[:40]
    head, _, payload = url.partition(",")
    assert head.endswith(";base64")
    img = Image.open(io.BytesIO(base64.b64decode(payload)))
    img.load()
    return img


def _ogg_page(granule: int, payload: bytes, seq: int, header_type: int = 0) -> bytes:
    lacing = []
    n = len(payload)
    while n >= 255:
        lacing.append(255)
        n -= 255
    lacing.append(n)
    head = b"OggS" + bytes([0, header_type]) + struct.pack("<qIII", granule, 7, seq, 0)
    return head + bytes([len(lacing)]) + bytes(lacing) + payload


def ogg_opus(seconds: float, pre_skip: int = 312) -> bytes:
    """An Ogg/Opus stream's framing as Telegram voice notes have it (OpusHead, OpusTags,
    one audio page whose granule position says ``seconds``).  Not playable audio; enough
    for a duration and for a transcription server that does not listen."""
    head = b"OpusHead" + bytes([1, 1]) + struct.pack("<HIhB", pre_skip, 48000, 0, 0)
    tags = b"OpusTags" + struct.pack("<I", 5) + b"chela" + struct.pack("<I", 0)
    granule = int(seconds * 48000) + pre_skip
    return (
        _ogg_page(0, head, 0, 0x02)
        + _ogg_page(0, tags, 1)
        + _ogg_page(granule, b"\xfc" + b"\x00" * 40, 2, 0x04)
    )


def pdf_bytes(pages: list[str]) -> bytes:
    """A small valid PDF with a real text layer: one page per string (one line each)."""
    objs: list[bytes] = []
    n_pages = len(pages)
    # 1 catalog, 2 pages, 3 font, then (page, content) pairs
    kids = " ".join(f"{4 + 2 * i} 0 R" for i in range(n_pages))
    objs.append(b"<< /Type /Catalog /Pages 2 0 R >>")
    objs.append(f"<< /Type /Pages /Kids [{kids}] /Count {n_pages} >>".encode())
    objs.append(b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
    for i, line in enumerate(pages):
        safe = line.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")
        stream = f"BT /F1 12 Tf 72 720 Td ({safe}) Tj ET".encode("latin-1")
        objs.append(
            f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] "
            f"/Resources << /Font << /F1 3 0 R >> >> /Contents {5 + 2 * i} 0 R >>".encode()
        )
        objs.append(f"<< /Length {len(stream)} >>\nstream\n".encode() + stream + b"\nendstream")
    return _pdf_file(objs)


def _pdf_file(objs: list[bytes]) -> bytes:
    """``objs`` (object 1 first, the catalog) written out with a cross-reference table."""
    out = io.BytesIO()
    out.write(b"%PDF-1.4\n")
    offsets = []
    for i, body in enumerate(objs, 1):
        offsets.append(out.tell())
        out.write(f"{i} 0 obj\n".encode() + body + b"\nendobj\n")
    xref = out.tell()
    out.write(f"xref\n0 {len(objs) + 1}\n0000000000 65535 f \n".encode())
    for off in offsets:
        out.write(f"{off:010d} 00000 n \n".encode())
    out.write(
        f"trailer\n<< /Size {len(objs) + 1} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n".encode()
    )
    return out.getvalue()


def hostile_pdf(pages: int = 200, operators: int = 200_000, shown: str = "x") -> bytes:
    """A small PDF that is slow to read: ``pages`` pages whose /Contents all name one
    FlateDecode stream of ``operators`` ``(<shown>) Tj`` text operators.  With the defaults
    it is ~33 KB on the wire and 40 million text operators for a reader that reads every page
    (pypdf: ~5 s of CPU a page).  ``shown=""`` makes every page cost as much and show no
    character at all, so no character budget ends the read.  (pypdf refuses a stream of more
    than 2 million tokens: keep ``operators`` under ~1 million.)"""
    import zlib

    op = f"({shown}) Tj\n".encode("latin-1")
    stream = zlib.compress(b"BT /F1 12 Tf 72 720 Td\n" + op * operators + b"ET", 9)
    # 1 catalog, 2 pages, 3 font, 4 the shared content stream, then the pages
    kids = " ".join(f"{5 + i} 0 R" for i in range(pages))
    objs = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        f"<< /Type /Pages /Kids [{kids}] /Count {pages} >>".encode(),
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
        f"<< /Length {len(stream)} /Filter /FlateDecode >>\nstream\n".encode()
        + stream
        + b"\nendstream",
    ]
    page = (
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] "
        b"/Resources << /Font << /F1 3 0 R >> >> /Contents 4 0 R >>"
    )
    objs += [page] * pages
    return _pdf_file(objs)
