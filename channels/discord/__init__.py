"""Discord, through discord.py (gateway + REST).

``transport.py`` sets up the discord.py client (its own API base and gateway) and guards its
gateway event parsers, ``translate.py`` holds the pure Discord ⇄ Chela translation,
``outbound.py`` the send keywords, uploads and preview edits, ``media.py`` the attachment
download, and ``adapter.py`` wires them into ``DiscordChannel`` with the channel's state.
"""

from channels.discord.adapter import DiscordChannel

__all__ = ["DiscordChannel"]
