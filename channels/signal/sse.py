"""Server-Sent Events parsing for signal-cli's ``GET /api/v1/events`` stream.

Pure: bytes go in as they arrive, complete events come out.  No I/O, no asyncio.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class SSEEvent:
    event: str
    data: str
    id: str | None

    def __repr__(self) -> str:  # pragma: no cover - debugging aid
        return f"SSEEvent(event={self.event!r}, id={self.id!r}, data={self.data[:60]!r})"


class SSEParser:
    """Incremental Server-Sent Events parser (WHATWG rules).

    Feed raw bytes as they arrive; complete events are returned.  Lines may end in CRLF,
    LF or CR (also split across chunks); ``:`` lines are comments; several ``data:``
    lines join with ``\\n``; a blank line dispatches; an event without data is dropped.
    ``last_event_id`` persists across events as the spec requires.
    """

    def __init__(self) -> None:
        self._buf = bytearray()
        self._data: list[str] = []
        self._event = ""
        self._started = False
        self._skip_lf = False
        self.last_event_id: str | None = None
        self.retry_ms: int | None = None

    def feed(self, chunk: bytes) -> list[SSEEvent]:
        self._buf.extend(chunk)
        events: list[SSEEvent] = []
        for line in self._lines():
            ev = self._line(line)
            if ev is not None:
                events.append(ev)
        return events

    def _lines(self) -> Iterator[str]:
        buf = self._buf
        start = 0
        i = 0
        if self._skip_lf and buf[:1] == b"\n":
            start = i = 1  # second half of a CRLF split across chunks
        self._skip_lf = False
        n = len(buf)
        while i < n:
            b = buf[i]
            if b == 0x0A:  # LF
                yield self._decode(buf[start:i])
                i += 1
                start = i
            elif b == 0x0D:  # CR or CRLF
                yield self._decode(buf[start:i])
                if i + 1 < n:
                    i += 2 if buf[i + 1] == 0x0A else 1
                else:
                    i += 1
                    self._skip_lf = True  # the LF may arrive with the next chunk
                start = i
            else:
                i += 1
        del buf[:start]

    def _decode(self, raw: bytes | bytearray) -> str:
        text = bytes(raw).decode("utf-8", errors="replace")
        if not self._started:
            self._started = True
            if text.startswith("\ufeff"):
                text = text[1:]
        return text

    def _line(self, line: str) -> SSEEvent | None:
        if line == "":
            if not self._data:
                self._event = ""
                return None
            ev = SSEEvent(self._event or "message", "\n".join(self._data), self.last_event_id)
            self._data = []
            self._event = ""
            return ev
        if line.startswith(":"):
            return None  # comment / keep-alive
        field, sep, value = line.partition(":")
        if sep and value.startswith(" "):
            value = value[1:]
        if field == "data":
            self._data.append(value)
        elif field == "event":
            self._event = value
        elif field == "id":
            if "\x00" not in value:
                self.last_event_id = value
        elif field == "retry" and value.isdigit():
            self.retry_ms = int(value)
        return None
