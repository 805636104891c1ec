"""Small helpers shared by the adapters (and the config's listen-address check)."""

from __future__ import annotations

import collections
import ipaddress
from typing import Any


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
