"""The child process that reads a PDF's text layer for ``bot.media.pdf``.

Run as a script, never imported by the daemon::

    python -E pdf_worker.py MAX_PAGES MAX_CHARS CPU_SECONDS MEMORY_BYTES  < file.pdf

It reads the PDF from standard input (the parent writes the bytes it read into a pipe), limits itself (CPU seconds,
address space, a lower priority) before pypdf sees a byte, and writes one JSON object per
line to standard output as it goes, so the parent keeps what was read when it kills it:

* ``{"pages": N}`` once the PDF opened;
* ``{"text": "..."}`` per page read (stripped; cut to what is left of ``MAX_CHARS``);
* ``{"end": "done" | "pages" | "chars"}`` when it stops by itself: every page read, the page
  limit reached, or the character limit reached;
* ``{"error": "..."}`` instead, when the PDF cannot be read (a sentence for the model).

Only the standard library and pypdf: it does not import ``bot``.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import resource
import sys


def limit(cpu_seconds: int, memory_bytes: int) -> None:
    """Belts under the parent's wall-clock timeout: the kernel ends a reader that spins
    (SIGXCPU) or grows past ``memory_bytes`` (MemoryError)."""
    resource.setrlimit(resource.RLIMIT_CPU, (cpu_seconds, cpu_seconds + 1))
    resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
    with contextlib.suppress(OSError):
        os.nice(10)  # the daemon's own work goes first on a small machine


def emit(record: dict) -> None:
    sys.stdout.write(json.dumps(record) + "\n")  # ASCII: a lone surrogate survives
    sys.stdout.flush()


def read(data: bytes, max_pages: int, max_chars: int) -> None:
    import logging

    from pypdf import PdfReader

    logging.getLogger("pypdf").setLevel(logging.CRITICAL)  # malformed-PDF chatter
    reader = PdfReader(io.BytesIO(data))
    if reader.is_encrypted and not reader.decrypt(""):
        emit({"error": "the PDF is encrypted"})
        return
    pages = reader.pages
    emit({"pages": len(pages)})
    left = max_chars
    for i, page in enumerate(pages):
        if i >= max_pages:
            emit({"end": "pages"})
            return
        text = (page.extract_text() or "").strip()
        emit({"text": text[:left]})
        left -= min(len(text), left)
        if left <= 0:
            emit({"end": "chars"})
            return
    emit({"end": "done"})


def main(argv: list[str]) -> int:
    max_pages, max_chars, cpu_seconds, memory_bytes = (int(a) for a in argv[1:5])
    limit(cpu_seconds, memory_bytes)
    try:
        data = sys.stdin.buffer.read()
        read(data, max_pages, max_chars)
    except MemoryError:
        emit({"error": "the PDF is too large to read"})
    except Exception as e:  # pypdf raises a wide range on malformed files
        emit({"error": f"the PDF cannot be read ({type(e).__name__})"})
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
