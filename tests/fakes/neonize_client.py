"""A stand-in for neonize's asyncio client (``neonize.aioze.client.NewAClient``) for the
linked-device tests: a real WhatsApp server cannot be faked (whatsmeow pins Meta's server
key), so the tests stop at neonize's API.

The fake has the methods our transport and ``chela whatsapp`` call, with neonize's
signatures, and it emits neonize's OWN event objects (the protobuf classes of
``neonize.aioze.events``, built with real field values) to the handlers registered through
``client.event(...)`` and ``client.qr(...)`` — each event first goes through its wire form
(``FromString(SerializeToString())``), as neonize's ``Event.execute`` decodes what the Go
side hands it.  ``connect()`` returns a task that runs until ``disconnect``/``stop`` or a
test's :meth:`FakeClient.drop`, as neonize's connection task does.

Without neonize the importing test module is skipped, except under ``CI=true`` where that
is a failure (the test extra installs it)."""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import os
import time
from typing import Any

import pytest

try:
    from neonize.aioze.events import (
        ClientOutdatedEv,
        ConnectedEv,
        DisconnectedEv,
        LoggedOutEv,
        MessageEv,
        PairStatusEv,
        StreamReplacedEv,
        TemporaryBanEv,
    )
    from neonize.exc import GetJIDFromStoreError
    from neonize.proto import Neonize_pb2
    from neonize.proto.Neonize_pb2 import (
        JID,
        Device,
        MessageInfo,
        MessageSource,
        SendResponse,
        UploadResponse,
    )
    from neonize.proto.waE2E.WAWebProtobufsE2E_pb2 import (
        ContextInfo,
        ExtendedTextMessage,
        ImageMessage,
        Message,
    )
except ImportError as e:  # pragma: no cover - depends on the environment
    if os.environ.get("CI") == "true":
        raise RuntimeError(f"neonize (the test extra) is missing under CI: {e}") from e
    pytest.skip(
        f"neonize is not installed ({e}): pip install 'chela[whatsapp]'", allow_module_level=True
    )

PN = "s.whatsapp.net"
ME_PN, ME_LID = "491700000001", "880000000001"
OWNER = "+491700000099"
GROUP = "120363000000000001"

__all__ = [
    "GROUP",
    "ME_LID",
    "ME_PN",
    "OWNER",
    "ClientOutdatedEv",
    "ConnectedEv",
    "DisconnectedEv",
    "FakeClient",
    "FakeNeonize",
    "LoggedOutEv",
    "PairStatusEv",
    "StreamReplacedEv",
    "TemporaryBanEv",
    "jid",
    "message",
]

_ids = itertools.count(1)


def jid(user: str, server: str = PN, device: int = 0) -> JID:
    """A JID as whatsmeow fills it (every required field set; ``jid("")`` is the empty one
    whatsmeow sends for an absent alt/recipient)."""
    return JID(User=user, RawAgent=0, Device=device, Integrator=0, Server=server, IsEmpty=not user)


def message(
    text: str = "hello",
    *,
    sender: JID | None = None,
    alt: JID | None = None,
    chat: JID | None = None,
    from_me: bool = False,
    group: bool = False,
    msg_id: str = "",
    content: Message | None = None,
    push_name: str = "Alex",
) -> MessageEv:
    """A ``MessageEv`` as whatsmeow reports a received message."""
    sender = sender or jid("4915550000001")
    src = MessageSource(
        Chat=chat or sender,
        Sender=sender,
        IsFromMe=from_me,
        IsGroup=group,
        AddressingMode=Neonize_pb2.LID if sender.Server == "lid" else Neonize_pb2.PN,
        SenderAlt=alt or jid(""),
        RecipientAlt=jid(""),
        BroadcastListOwner=jid(""),
    )
    info = MessageInfo(
        MessageSource=src,
        ID=msg_id or f"3A{next(_ids):018X}",
        ServerID=0,
        Type="text" if content is None else "media",
        Pushname=push_name,
        Timestamp=int(time.time()),
        Category="",
        Multicast=False,
        MediaType="" if content is None else "image",
        Edit="",
    )
    flags = dict.fromkeys(
        (
            "IsEphemeral",
            "IsViewOnce",
            "IsViewOnceV2",
            "IsViewOnceV2Extension",
            "IsDocumentWithCaption",
            "IsLottieSticker",
            "IsEdit",
        ),
        False,
    )
    return MessageEv(
        Info=info,
        Message=content or Message(conversation=text),
        UnavailableRequestID="",
        RetryCount=0,
        **flags,
    )


def mention(text: str, *users: str) -> Message:
    ctx = ContextInfo(mentionedJID=list(users))
    return Message(extendedTextMessage=ExtendedTextMessage(text=text, contextInfo=ctx))


def reply(text: str, quoted_id: str, author: str, quoted: str = "the quoted text") -> Message:
    """A reply quoting message ``quoted_id`` written by ``author`` (a JID string: the phone
    number's, or the LID's in a LID-addressed group), as WhatsApp sends a quote."""
    ctx = ContextInfo(
        stanzaID=quoted_id, participant=author, quotedMessage=Message(conversation=quoted)
    )
    return Message(extendedTextMessage=ExtendedTextMessage(text=text, contextInfo=ctx))


class FakeClient:
    def __init__(self, name: str, hub: FakeNeonize) -> None:
        self.name, self.hub = name, hub
        self.handlers: dict[type, Any] = {}
        self.qr_handler: Any = None
        self.connects = self.disconnects = self.stops = self.logouts = 0
        self.sent: list[tuple[JID, Message, float]] = []
        self.reads: list[tuple[str, JID]] = []
        self.presence: list[JID] = []
        self.uploads: list[tuple[bytes, Any]] = []
        self.phone_asked: list[str] = []
        self._end: asyncio.Future[None] | None = None

    # ----------------------------------------------------------- neonize's API
    def event(self, ev_type: type) -> Any:
        def register(handler: Any) -> None:
            self.handlers[ev_type] = handler

        return register

    def qr(self, handler: Any) -> None:
        self.qr_handler = handler

    async def connect(self) -> asyncio.Task[None]:
        self.connects += 1
        self._end = asyncio.get_running_loop().create_future()
        return asyncio.ensure_future(self._session(self._end))

    @staticmethod
    async def _session(end: asyncio.Future[None]) -> None:
        await end

    async def disconnect(self) -> None:
        self.disconnects += 1
        self._finish()

    async def stop(self) -> None:
        self.stops += 1
        self._finish()

    async def logout(self) -> None:
        self.logouts += 1

    async def get_me(self) -> Device:
        if self.hub.me_error is not None:
            raise self.hub.me_error
        return Device(
            JID=jid(ME_PN, device=7),
            LID=jid(ME_LID, "lid", device=7),
            Platform="android",
            BussinessName="",
            PushName="Chela",
            Initialized=True,
        )

    async def get_pn_from_lid(self, lid: JID) -> JID:
        await asyncio.sleep(0)  # neonize asks its Go side: other handlers run meanwhile
        pn = self.hub.lid_to_pn.get(lid.User)
        if pn is None:
            raise GetJIDFromStoreError("no phone number stored for this LID")
        return jid(pn)

    async def send_message(self, to: JID, message: Message) -> SendResponse:
        self.sent.append((to, message, time.monotonic()))
        return SendResponse(ID=f"3EB0{next(_ids):016X}", Timestamp=int(time.time()))

    async def upload(self, binary: bytes, media_type: Any = None) -> UploadResponse:
        self.uploads.append((binary, media_type))
        digest = hashlib.sha256(binary).digest()
        self.hub.media[digest] = binary
        return UploadResponse(
            url="https://mmg.whatsapp.net/fake",
            DirectPath="/v/fake",
            MediaKey=os.urandom(32),
            FileEncSHA256=hashlib.sha256(b"enc" + binary).digest(),
            FileSHA256=digest,
            FileLength=len(binary),
        )

    async def download_any(self, message: Message) -> bytes:
        for field in ("imageMessage", "documentMessage", "audioMessage", "videoMessage"):
            if message.HasField(field):
                return self.hub.media[getattr(message, field).fileSHA256]
        raise ValueError("no media in that message")

    async def mark_read(
        self, *ids: str, chat: JID, sender: JID, receipt: Any, timestamp: Any = None
    ) -> None:
        self.reads += [(i, chat) for i in ids]

    async def send_chat_presence(self, jid_: JID, state: Any, media: Any) -> None:
        self.presence.append(jid_)

    async def PairPhone(self, phone: str, show_push_notification: bool, *a: Any) -> str:
        self.phone_asked.append(phone)
        return "KQ4R-7ZP2"

    # ----------------------------------------------------------- what a test drives
    async def emit(self, ev: Any) -> None:
        """Deliver one of neonize's event objects to the handler registered for its type."""
        ev = type(ev).FromString(ev.SerializeToString())  # what neonize decodes from Go
        handler = self.handlers.get(type(ev))
        if handler is not None:
            await handler(self, ev)

    async def show_qr(self, payload: str) -> None:
        await self.qr_handler(self, payload.encode())

    def drop(self, error: str = "websocket closed") -> None:
        """neonize's connection task ends with an error (as a failed connect does)."""
        if self._end is not None and not self._end.done():
            self._end.set_exception(RuntimeError(error))

    def _finish(self) -> None:
        if self._end is not None and not self._end.done():
            self._end.set_result(None)


class FakeNeonize:
    """Makes the clients (``factory`` is the transport's ``client_factory``) and holds
    what neonize's store would: LID → phone number, uploaded media."""

    def __init__(self) -> None:
        self.clients: list[FakeClient] = []
        self.lid_to_pn: dict[str, str] = {}
        self.media: dict[bytes, bytes] = {}
        self.me_error: Exception | None = None  # get_me raises it (the store not ready)
        self.kept: dict[str, object] = {}  # what the app's store keeps for the account

    def factory(self, name: str) -> FakeClient:
        client = FakeClient(name, self)
        self.clients.append(client)
        return client

    @property
    def client(self) -> FakeClient:
        return self.clients[-1]

    def image(self, data: bytes, caption: str = "") -> Message:
        """An image message whose file the fake serves (as if someone uploaded it)."""
        digest = hashlib.sha256(data).digest()
        self.media[digest] = data
        img = ImageMessage(
            URL="https://mmg.whatsapp.net/in",
            mimetype="image/jpeg",
            caption=caption,
            fileSHA256=digest,
            fileLength=len(data),
            mediaKey=os.urandom(32),
            directPath="/v/in",
        )
        return Message(imageMessage=img)


def logged_out() -> LoggedOutEv:
    return LoggedOutEv(OnConnect=False, Reason=Neonize_pb2.LOGGED_OUT)


def temporary_ban(seconds: int = 3600) -> TemporaryBanEv:
    return TemporaryBanEv(Code=TemporaryBanEv.SEND_TO_TOO_MANY_PEOPLE, Expire=seconds)


def paired(user: str = ME_PN) -> PairStatusEv:
    return PairStatusEv(
        ID=jid(user, device=7), BusinessName="", Platform="android", Status=PairStatusEv.SUCCESS
    )
