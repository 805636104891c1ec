"""A PDF's text layer, read in a child process that is bounded and killable.

pypdf is pure Python: one small PDF can hold millions of text operators (200 pages that all
name one compressed stream), and reading it in a thread of the daemon would hold the GIL for
minutes, stall every other chat and keep the process from exiting on SIGTERM.  So the text is
read by ``pdf_worker.py`` in a child process:

* bounded in pages (``max_pages``), characters (it stops once ``max_chars`` are read) and
  wall-clock time (``timeout``: then the child is killed and what it had read is kept, or
  ``ValueError`` says the document took too long to read);
* the child limits its own CPU time and address space and runs at a lower priority;
* cancelling the awaiting task (a shutdown cancels turns) kills the child at once;
* at most ``PDF_SLOTS`` children at a time.

The child gets the file's bytes on its standard input (a pipe: the bytes intake read once
through ``bot.fs``, never a path a guest could swap), a minimal environment (none of the
daemon's secrets) and ``python -E``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bot import fs

MAX_PDF_PAGES = 2000
MAX_PDF_CHARS = 2_000_000  # when the caller names no budget
MAX_PDF_BYTES = 256 * 1024 * 1024  # a file read here by path (intake passes the bytes)
# what intake reads past media.max_document_chars: a long PDF's text is saved for the read
# tool, up to this much more (~40 pages of dense text); the rest is not read
PDF_MARGIN_CHARS = 100_000
READ_TIMEOUT = 8.0  # seconds; below the daemon's 10 s shutdown grace
CPU_SECONDS = 10  # RLIMIT_CPU of the child: past the timeout, in case the kill is missed
MEMORY_BYTES = 1024 * 1024 * 1024  # RLIMIT_AS of the child
PDF_SLOTS = 2  # children at once (two CPUs)
WORKER = Path(__file__).with_name("pdf_worker.py")

_SLOT: list[Any] = []  # [loop, semaphore] of the running loop


def _pdf_slot() -> asyncio.Semaphore:
    loop = asyncio.get_running_loop()
    if not _SLOT or _SLOT[0] is not loop:  # one daemon loop per process; tests start new ones
        _SLOT[:] = [loop, asyncio.Semaphore(PDF_SLOTS)]
    return _SLOT[1]


class PdfTooSlow(ValueError):
    """The PDF was not read within the time bound (and no text had been read)."""


@dataclass
class _Reading:
    """What the child said, line by line."""

    pages: int | None = None
    texts: list[str] = field(default_factory=list)
    end: str = ""  # "done" | "pages" | "chars" | "time"
    error: str = ""

    def take(self, line: bytes) -> None:
        try:
            rec = json.loads(line)
        except ValueError:
            return
        if not isinstance(rec, dict):
            return
        if isinstance(rec.get("pages"), int):
            self.pages = rec["pages"]
        elif isinstance(rec.get("text"), str):
            self.texts.append(rec["text"])
        elif isinstance(rec.get("end"), str):
            self.end = rec["end"]
        elif isinstance(rec.get("error"), str):
            self.error = rec["error"][:200]

    def result(self, max_chars: int, timeout: float) -> tuple[str, int]:
        if self.error:
            raise ValueError(self.error)
        if self.end == "time" and not any(self.texts):
            raise PdfTooSlow(
                f"it took too long to read (over {timeout:.0f} s); its text was not read"
            )
        if self.pages is None or not self.end:
            raise ValueError("the PDF cannot be read (the reader stopped)")
        pages = self.pages or 0
        text = "\n\n".join(t for t in self.texts if t)
        note = self._stopped(pages, max_chars)
        return (f"{text}\n\n{note}" if note else text), pages

    def _stopped(self, pages: int, max_chars: int) -> str:
        read, left = len(self.texts), pages - len(self.texts)
        if self.end == "pages" and left:
            return f"[... {left} more pages not read]"
        if self.end == "chars":
            return f"[... reading stopped at page {read} of {pages}: over {max_chars} characters]"
        if self.end == "time":
            return f"[... reading stopped at page {read} of {pages}: it took too long]"
        return ""


async def pdf_text(
    src: bytes | Path,
    *,
    max_chars: int = MAX_PDF_CHARS,
    max_pages: int = MAX_PDF_PAGES,
    timeout: float | None = None,
) -> tuple[str, int]:
    """(text layer, page count) of a PDF, read in a child process within the bounds.
    ``src`` is the file's bytes, read once by the caller through ``bot.fs``,
    or a file read here with no link followed.  Raises ``ValueError`` when it cannot be
    read (broken, encrypted with a password, or ``PdfTooSlow``: nothing read within
    ``timeout``)."""
    if isinstance(src, bytes):
        data = src
    else:
        try:
            data = await asyncio.to_thread(fs.read_in, src, MAX_PDF_BYTES)
        except OSError as e:
            raise ValueError(f"the PDF cannot be opened ({e.strerror or e})") from None
    bound = READ_TIMEOUT if timeout is None else timeout
    async with _pdf_slot():
        reading = await _read(data, max_chars, max_pages, bound)
    return reading.result(max_chars, bound)


_RUNNING: set[asyncio.subprocess.Process] = set()  # the children reading now
_STOPPED: list[Any] = []  # [the loop] whose daemon is stopping: no new child starts there


def stop_all() -> int:
    """Kill every child reading a PDF now, and start none after it on this loop (the daemon
    is stopping: SIGTERM → exit stays within its bound whatever is being read).  Their turns
    go on at once with a note that the document could not be read.  Returns how many were
    killed."""
    _STOPPED[:] = [asyncio.get_running_loop()]
    killed = 0
    for proc in list(_RUNNING):
        if proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
                killed += 1
    return killed


async def _read(data: bytes, max_chars: int, max_pages: int, timeout: float) -> _Reading:
    if _STOPPED and _STOPPED[0] is asyncio.get_running_loop():
        raise ValueError("it was not read: the assistant is shutting down")
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-E",
        str(WORKER),
        str(max_pages),
        str(max_chars),
        str(CPU_SECONDS),
        str(MEMORY_BYTES),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
        env={"PATH": os.environ.get("PATH", os.defpath), "LC_ALL": "C.UTF-8"},
        start_new_session=True,  # a Ctrl-C in the terminal is the daemon's to handle
    )
    feeding = asyncio.create_task(_feed(proc, data))
    reading = _Reading()
    _RUNNING.add(proc)
    try:
        await asyncio.wait_for(_collect(proc, reading, max_chars), timeout)
    except TimeoutError:
        reading.end = reading.end or "time"
    finally:
        _RUNNING.discard(proc)
        feeding.cancel()
        await _end(proc)
        await asyncio.wait([feeding])
    return reading


async def _feed(proc: asyncio.subprocess.Process, data: bytes) -> None:
    """The PDF's bytes to the child's standard input, then end of file.  A child that
    stopped reading (it died, or was killed) ends the feeding quietly."""
    assert proc.stdin is not None
    try:
        proc.stdin.write(data)
        await proc.stdin.drain()
    except OSError:  # BrokenPipeError, ConnectionResetError
        return
    finally:
        proc.stdin.close()


async def _collect(proc: asyncio.subprocess.Process, reading: _Reading, max_chars: int) -> None:
    """Read the child's lines until it ends (or writes more than its budget can explain)."""
    assert proc.stdout is not None
    cap = 12 * max_chars + 1024 * 1024  # \\uXXXX escapes, one page over, the JSON around it
    buf, seen = b"", 0
    while chunk := await proc.stdout.read(65536):
        seen += len(chunk)
        *lines, buf = (buf + chunk).split(b"\n")
        for line in lines:
            reading.take(line)
        if seen > cap:
            reading.end = reading.end or "chars"
            return
    await proc.wait()


async def _end(proc: asyncio.subprocess.Process) -> None:
    """Kill the child if it still runs, and reap it (a killed child is reaped at once)."""
    if proc.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(proc.wait(), 2)
