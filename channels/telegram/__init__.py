"""Telegram, through the Bot API (python-telegram-bot's ``Bot`` on our own transport).

``translate.py`` holds the pure Telegram ⇄ Chela translation (updates → ``InboundMessage``,
``OutboundMessage`` → Bot API calls), ``request.py`` moves the bytes (PTB's request
interface on aiohttp), and ``adapter.py`` wires them into ``TelegramChannel``: the long-poll
loop with its offset handling, the album hold, retries and the channel's state.
"""

from channels.telegram.adapter import TelegramChannel

__all__ = ["TelegramChannel"]
