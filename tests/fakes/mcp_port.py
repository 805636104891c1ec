"""The Agent's MCP port for unit tests that build an Agent without running a turn: it offers
whatever tools a test puts in ``offered`` (the real manager, bot/mcp, is tested against real
MCP servers in tests/e2e)."""

from __future__ import annotations

from bot.agent.tools import Tool


class FakeMcp:
    def __init__(self) -> None:
        self.offered: list[Tool] = []

    def tools(self) -> list[Tool]:
        return list(self.offered)


async def echo(args, ctx) -> str:
    return "ok"


class Nowhere:
    """A model endpoint for a config whose agent never calls the model."""

    base_url = "http://127.0.0.1:9/v1"
