"""Inbound message → stored replies (docs/architecture.md "How a message flows").

The stages hand frozen values (``types``) to each other; today the command table
(``commands``) lives here, the rest of the pipeline is still ``bot.conversation`` while it moves in.
"""
