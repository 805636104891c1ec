"""A protocol-level fake IMAP server on 127.0.0.1 (plain TCP; the client under test is the
real ``imaplib``): one folder, messages by UID with their flags, LOGIN, CAPABILITY,
SELECT/EXAMINE, STATUS, UID SEARCH, UID FETCH (``BODY.PEEK[]`` leaves flags alone, a plain
``BODY[]`` sets ``\\Seen`` as a real server does), STORE/COPY/MOVE/EXPUNGE (recorded as
changes), NOOP, IDLE (new mail pushed as ``* N EXISTS``) and LOGOUT.  ``drop()`` closes
every connection, mid-IDLE included; ``garbage`` makes the next answer to a command garbage.

Chosen over a throwaway Dovecot: it needs no package or root-owned config in CI, starts in
milliseconds, and can drop a connection at the exact moment a test needs."""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass, field

_TOKEN = re.compile(rb'"((?:[^"\\]|\\.)*)"|(\S+)')


@dataclass
class Stored:
    uid: int
    raw: bytes
    flags: set[str] = field(default_factory=set)


def _args(text: bytes) -> list[str]:
    out = []
    for m in _TOKEN.finditer(text):
        if m.group(1) is not None:
            out.append(re.sub(rb"\\(.)", rb"\1", m.group(1)).decode())
        else:
            out.append(m.group(2).decode())
    return out


class FakeImap:
    def __init__(
        self, user: str = "me@example.com", password: str = "pw", *, idle: bool = True
    ) -> None:
        self.user, self.password, self.idle = user, password, idle
        self.folder = "INBOX"
        self.uidvalidity = 1000
        self.next_uid = 1
        self.messages: list[Stored] = []
        self.commands: list[str] = []  # every command name received, in order
        self.changes: list[str] = []  # commands that would change the mailbox
        self.logins: list[tuple[str, bool]] = []  # (user, accepted)
        self.idling = 0  # connections in IDLE now
        # command name -> what the server answers to it next, once ({tag} is its tag):
        # a server answering garbage
        self.garbage: dict[str, bytes] = {}
        self._writers: set[asyncio.StreamWriter] = set()
        self._idle_writers: set[asyncio.StreamWriter] = set()
        self._server: asyncio.AbstractServer | None = None
        self.port = 0

    async def start(self) -> FakeImap:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def stop(self) -> None:
        self.drop()
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    # ------------------------------------------------------------------ test controls
    def add(self, raw: bytes) -> int:
        """A new message in the folder; IDLE clients are told."""
        uid = self.next_uid
        self.next_uid += 1
        self.messages.append(Stored(uid, raw))
        for w in list(self._idle_writers):
            w.write(b"* %d EXISTS\r\n" % len(self.messages))
        return uid

    def flags(self) -> dict[int, set[str]]:
        return {m.uid: set(m.flags) for m in self.messages}

    def drop(self) -> None:
        for w in list(self._writers):
            w.close()

    # ------------------------------------------------------------------------ serving
    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._writers.add(writer)
        try:
            writer.write(b"* OK fake IMAP ready\r\n")
            state = {"auth": False, "selected": False}
            while True:
                line = await reader.readline()
                if not line:
                    return
                tag, _, rest = line.rstrip(b"\r\n").partition(b" ")
                name, _, args = rest.partition(b" ")
                cmd = name.decode().upper()
                self.commands.append(cmd if cmd != "UID" else "UID " + _args(args)[0].upper())
                if cmd == "LOGOUT":
                    writer.write(b"* BYE bye\r\n" + tag + b" OK LOGOUT done\r\n")
                    await writer.drain()
                    return
                if cmd == "IDLE":
                    await self._idle(reader, writer, tag)
                    continue
                if cmd in self.garbage or self.commands[-1] in self.garbage:
                    said = self.garbage.pop(cmd, None) or self.garbage.pop(self.commands[-1])
                    writer.write(said.replace(b"{tag}", tag))
                else:
                    writer.write(self._answer(tag, cmd, args, state))
                await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError):
            return
        finally:
            self._writers.discard(writer)
            self._idle_writers.discard(writer)
            writer.close()

    async def _idle(self, reader, writer, tag: bytes) -> None:
        writer.write(b"+ idling\r\n")
        self._idle_writers.add(writer)
        self.idling += 1
        try:
            line = await reader.readline()
        finally:
            self.idling -= 1
            self._idle_writers.discard(writer)
        if not line:
            raise ConnectionError
        writer.write(tag + b" OK IDLE terminated\r\n")

    def _answer(self, tag: bytes, cmd: str, args: bytes, state: dict) -> bytes:
        ok = tag + b" OK " + cmd.encode() + b" completed\r\n"
        if cmd == "CAPABILITY":
            caps = b"IMAP4rev1 IDLE" if self.idle else b"IMAP4rev1"
            return b"* CAPABILITY " + caps + b"\r\n" + ok
        if cmd == "NOOP":
            return b"* %d EXISTS\r\n" % len(self.messages) + ok
        if cmd == "LOGIN":
            user, password = [*_args(args), "", ""][:2]
            accepted = (user, password) == (self.user, self.password)
            self.logins.append((user, accepted))
            state["auth"] = accepted
            if not accepted:
                return tag + b" NO [AUTHENTICATIONFAILED] Authentication failed.\r\n"
            return ok
        if not state["auth"]:
            return tag + b" BAD not logged in\r\n"
        if cmd in ("SELECT", "EXAMINE"):
            state["selected"] = True
            state["readonly"] = cmd == "EXAMINE"
            return (
                b"* %d EXISTS\r\n* 0 RECENT\r\n" % len(self.messages)
                + b"* OK [UIDVALIDITY %d] UIDs valid\r\n" % self.uidvalidity
                + b"* OK [UIDNEXT %d] next\r\n" % self.next_uid
                + tag
                + (
                    b" OK [READ-ONLY] done\r\n"
                    if cmd == "EXAMINE"
                    else b" OK [READ-WRITE] done\r\n"
                )
            )
        if cmd == "STATUS":
            return (
                b'* STATUS "%s" (UIDNEXT %d MESSAGES %d)\r\n'
                % (self.folder.encode(), self.next_uid, len(self.messages))
                + ok
            )
        if cmd in ("STORE", "COPY", "MOVE", "EXPUNGE"):
            self.changes.append(cmd)
            return ok
        if cmd == "UID":
            return self._uid(tag, _args(args), args, ok)
        return tag + b" BAD unknown command\r\n"

    def _uid(self, tag: bytes, words: list[str], raw: bytes, ok: bytes) -> bytes:
        sub = words[0].upper() if words else ""
        if sub == "SEARCH":
            m = re.search(rb"UID (\d+):\*", raw)
            start = int(m.group(1)) if m else 1
            uids = [s.uid for s in self.messages if s.uid >= start]
            if not uids and self.messages:  # "N:*" always names the last message
                uids = [self.messages[-1].uid]
            return b"* SEARCH " + b" ".join(b"%d" % u for u in uids) + b"\r\n" + ok
        if sub == "FETCH":
            return self._fetch(int(words[1]), raw, ok)
        if sub in ("STORE", "COPY", "MOVE", "EXPUNGE"):
            self.changes.append("UID " + sub)
            return ok
        return tag + b" BAD unknown UID command\r\n"

    def _fetch(self, uid: int, raw: bytes, ok: bytes) -> bytes:
        for seq, s in enumerate(self.messages, 1):
            if s.uid != uid:
                continue
            m = re.search(rb"BODY(\.PEEK)?\[\]<0\.(\d+)>", raw)
            limit = int(m.group(2)) if m else len(s.raw)
            if not (m and m.group(1)):  # a plain BODY[] marks the message read
                s.flags.add("\\Seen")
            part = s.raw[:limit]
            head = b"* %d FETCH (UID %d RFC822.SIZE %d BODY[]<0> {%d}\r\n" % (
                seq,
                uid,
                len(s.raw),
                len(part),
            )
            return head + part + b")\r\n" + ok
        return ok
