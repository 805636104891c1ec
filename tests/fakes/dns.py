"""A fake system resolver for tests: ``socket.getaddrinfo`` answering names from a table and
every other name with one address, the way a wildcard zone, a captive portal or an ISP's
"NXDOMAIN redirect" resolver does.  IP literals and ``localhost`` still go to the real
resolver, so the daemon, its wire fakes and the fake model keep working.

A name arrives the way the C library would send it: a ``str`` host is first encoded with
Python's ``idna`` codec (IDNA 2003), exactly as ``socket.getaddrinfo`` does.  Every query is
recorded in ``queries`` (the encoded name)."""

from __future__ import annotations

import ipaddress
import socket
from typing import Any


class WildcardDNS:
    def __init__(self, answer: str, names: dict[str, str] | None = None) -> None:
        self.answer = answer
        self.names = dict(names or {})
        self.queries: list[str] = []
        self._real = socket.getaddrinfo

    def install(self, monkeypatch: Any) -> WildcardDNS:
        monkeypatch.setattr(socket, "getaddrinfo", self.getaddrinfo)
        return self

    def getaddrinfo(self, host, port, family=0, type=0, proto=0, flags=0):
        name = host.decode("ascii") if isinstance(host, bytes) else host
        if name is None or name == "localhost" or _is_ip(name):
            return self._real(host, port, family, type, proto, flags)
        if not name.isascii():
            name = name.encode("idna").decode("ascii")  # what the C layer is handed
        name = name.lower().rstrip(".")
        self.queries.append(name)
        address = self.names.get(name, self.answer)
        return self._real(address, port, family, type, proto, flags | socket.AI_NUMERICHOST)


def _is_ip(name: str) -> bool:
    try:
        ipaddress.ip_address(name.split("%", maxsplit=1)[0])
    except ValueError:
        return False
    return True
