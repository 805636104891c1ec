"""Small helpers shared by the adapters (and the config's listen-address check)."""

from __future__ import annotations

import collections
import contextlib
import ipaddress
import os
from pathlib import Path
from typing import Any, BinaryIO
from collections.abc import Iterator

from channels.base import ChannelError, MediaTooLarge


class BoundedLRU:
    """A mapping that forgets its least recently used key beyond ``maxsize`` entries.

    Adapters use it for de-duplication sets (``put(key)``) and for bounded memories
    such as "which chat did this message id live in"."""

    def __init__(self, maxsize: int) -> None:
        self.maxsize = max(1, int(maxsize))
        self._data: collections.OrderedDict[Any, Any] = collections.OrderedDict()

    def get(self, key: Any, default: Any = None) -> Any:
        if key in self._data:
            self._data.move_to_end(key)
            return self._data[key]
        return default

    def put(self, key: Any, value: Any = True) -> None:
        self._data[key] = value
        self._data.move_to_end(key)
        while len(self._data) > self.maxsize:
            self._data.popitem(last=False)

    def __contains__(self, key: Any) -> bool:
        return key in self._data

    def __len__(self) -> int:
        return len(self._data)


def parse_listen(value: str) -> tuple[str, int]:
    """``"127.0.0.1:8787"`` → ``("127.0.0.1", 8787)``; ``"[::1]:80"`` works too.
    Raises ``ValueError`` naming the bad value."""
    host, sep, port = (value or "").rpartition(":")
    if not sep or not port.isdigit() or not (0 <= int(port) <= 65535):
        raise ValueError(f"bad listen address {value!r}: use host:port")
    return host.strip("[]") or "127.0.0.1", int(port)


def is_loopback(host: str) -> bool:
    """``localhost`` or a loopback address (127.0.0.0/8, ``::1``)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def host_of(header: str) -> str:
    """The host part of a ``Host`` header, lower-cased, without a trailing dot:
    ``"[::1]:80"`` → ``"::1"``; "" when the header is malformed (a bad port, an unclosed
    bracket, a bare IPv6 address)."""
    h = header.strip().lower()
    if h.startswith("["):
        end = h.find("]")
        if end < 0 or (h[end + 1 :] and not (h[end + 1] == ":" and h[end + 2 :].isdigit())):
            return ""
        return h[1:end]
    name, sep, port = h.rpartition(":")
    if sep:
        if not port.isdigit() or ":" in name:
            return ""
        h = name
    return h.rstrip(".")


@contextlib.contextmanager
def capped_file(dest: Path, max_bytes: int, label: str) -> Iterator[_CappedWriter]:
    """Write an inbound download to ``dest``: created exclusively without following links,
    mode 0600 whatever the umask, at most ``max_bytes`` (``MediaTooLarge`` past that).  On
    any failure, cancellation included, the partial file is removed; errors other than
    channel errors come out as ``ChannelError`` naming ``label``."""
    try:
        fd = os.open(
            dest, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600
        )
    except OSError as e:
        raise ChannelError(f"{label}: cannot create {dest.name} ({e.strerror or e})") from None
    try:
        with os.fdopen(fd, "wb") as out:
            os.fchmod(out.fileno(), 0o600)
            yield _CappedWriter(out, max_bytes, label)
    except BaseException as e:
        dest.unlink(missing_ok=True)
        if isinstance(e, ChannelError) or not isinstance(e, Exception):
            raise
        raise ChannelError(f"{label} failed ({type(e).__name__}: {e})") from None


class _CappedWriter:
    def __init__(self, out: BinaryIO, max_bytes: int, label: str):
        self._out, self._max, self._label = out, max_bytes, label
        self.written = 0

    def write(self, chunk: bytes) -> int:
        self.written += len(chunk)
        if self.written > self._max:
            raise MediaTooLarge(f"{self._label} is over {self._max} bytes")
        return self._out.write(chunk)
