"""WhatsApp addresses (JIDs: ``user@server``) ⇄ the ids Chela keeps, as pure functions.

A person is ``+<phone number>`` whenever the number is known (so ``allow_from`` and the
pairing list hold phone numbers), else ``<lid>@lid`` (WhatsApp's hidden-number id); a group
is ``<id>@g.us``.  The same person seen by LID and by number is one id: the transport learns
the pair (``guards.Memory``) and always names them by number."""

from __future__ import annotations

PN = "s.whatsapp.net"  # a phone-number JID
LID = "lid"  # a hidden-number JID
GROUP = "g.us"
CHATS = (PN, LID, GROUP)  # where a conversation is (not status@broadcast, not a newsletter)


def person_id(pn: str, lid: str) -> str:
    """A person's id: by number when known, else by LID."""
    return f"+{pn}" if pn else f"{lid}@{LID}"


def chat_id(user: str, server: str) -> str:
    """Chela's id of a chat JID (a group, or a person's direct chat)."""
    if server == PN:
        return f"+{user}"
    return f"{user}@{server}"


def address(chat: str) -> tuple[str, str]:
    """Chela's chat id → (user, server) of the JID to send to."""
    chat = chat.strip()
    if "@" in chat:
        user, _, server = chat.partition("@")
        return user, server
    return chat.lstrip("+"), PN


def same_person(a: str, b: str) -> bool:
    """Two ids of one number, written with or without the ``+``."""
    return bool(a) and a.lstrip("+") == b.lstrip("+")


def user_of(jid: str) -> str:
    """``4917…:3@s.whatsapp.net`` → ``4917…`` (device and server dropped)."""
    return jid.partition("@")[0].partition(":")[0]
