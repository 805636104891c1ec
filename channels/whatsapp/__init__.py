"""WhatsApp, through Meta's official Agent Platform (an agent the owner creates in WhatsApp).

``translate.py`` holds the pure translation (updates → ``InboundMessage``, Markdown →
WhatsApp text, files → message types), ``transport/`` the ways of reaching WhatsApp behind one
interface (today the Agent Platform over aiohttp), ``polling.py`` the long poll and its stored
cursor, and ``adapter.py`` wires them into ``WhatsAppChannel``.
"""

from channels.whatsapp.adapter import WhatsAppChannel

__all__ = ["WhatsAppChannel"]
