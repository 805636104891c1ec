"""Telegram, through the Bot API (python-telegram-bot's ``Bot`` on our own transport).

``translate.py`` holds the pure Telegram ⇄ Chela translation (updates → ``InboundMessage``,
``OutboundMessage`` → Bot API calls), ``request.py`` moves the bytes (PTB's request
interface on aiohttp), and ``adapter.py`` wires them into ``TelegramChannel``: the long-poll
loop with its offset handling, the album hold, retries and the channel's state.
"""

import sys

# python-telegram-bot imports httpx (for its stock transport, which we replace), and httpx's
# __init__ imports its command-line client when click, rich and pygments are installed: ~100
# modules and half of PTB's import time in `chela run`'s start-up, for a CLI this process
# never runs.  None in sys.modules makes that one optional import fail as when they are
# absent (httpx then keeps its stub ``main``); nothing else of httpx changes.
sys.modules.setdefault("httpx._main", None)  # type: ignore[arg-type]

from channels.telegram.adapter import TelegramChannel  # noqa: E402

__all__ = ["TelegramChannel"]
