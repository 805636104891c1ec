"""WhatsApp as a linked device (WhatsApp Web's multi-device protocol through ``neonize``,
the optional extra ``chela[whatsapp]``).  Unofficial: WhatsApp may restrict or ban the
number, so a dedicated number is the safe choice.

``session.py`` holds what the CLI calls (login, logout, status) and the session database's
place and lock; ``ids.py`` turns WhatsApp addresses (JIDs) into Chela's ids and back;
``messages.py`` reads neonize's message events and builds what is sent; ``guards.py`` keeps
the rules a linked number needs (own echoes, who wrote first, groups, reconnect breaker);
``media.py`` keeps outbound files until their send and fetches inbound ones; ``inbound.py``
hands what the transport queued to the core.  The transport itself is
``channels/whatsapp/transport/linked_device.py``.  Nothing here imports neonize until a
linked device is used (:func:`session.require_neonize`)."""
