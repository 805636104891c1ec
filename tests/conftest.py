"""Test-wide guards: no test may reach beyond this machine."""

from __future__ import annotations

import ipaddress
import os
import socket
from pathlib import Path

import pytest

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

_real_connect = socket.socket.connect
_real_connect_ex = socket.socket.connect_ex


def _check(address) -> None:
    if isinstance(address, tuple) and address:
        host = address[0]
        try:
            ip = ipaddress.ip_address(host)
        except ValueError:
            if host not in ("localhost",):
                raise OSError(f"tests must not touch the network: {host!r}") from None
            return
        if not ip.is_loopback:
            raise OSError(f"tests must not touch the network: {host!r}")


def _guarded_connect(self, address):
    _check(address)
    return _real_connect(self, address)


def _guarded_connect_ex(self, address):
    _check(address)
    return _real_connect_ex(self, address)


@pytest.fixture(autouse=True, scope="session")
def _no_internet():
    socket.socket.connect = _guarded_connect
    socket.socket.connect_ex = _guarded_connect_ex
    yield
    socket.socket.connect = _real_connect
    socket.socket.connect_ex = _real_connect_ex


# --------------------------------------------------------------- end-to-end fixtures
# The fake servers are imported lazily so unit tests do not pay for aiohttp/PTB.


@pytest.fixture
async def llm():
    """A started fake OpenAI-compatible LLM (tests/fakes/llm.py)."""
    from tests.fakes.llm import FakeLLM

    async with FakeLLM() as f:
        yield f


@pytest.fixture
async def tg():
    """A started fake Telegram Bot API (tests/fakes/telegram.py) for the token in tests/e2e/harness.py."""
    from tests.e2e import TG_TOKEN
    from tests.fakes.telegram import FakeTelegram

    f = FakeTelegram(token=TG_TOKEN, bot_username="chela_bot")
    await f.start()
    yield f
    await f.stop()


# ------------------------------------------------------------------------- test tiers
# The tier is the folder (ARCHITECTURE.md "Tests mirror the house"): tests/unit/<package>/ and
# tests/architecture/ are the fast tier (pure rules, stages over an in-memory store, a fake
# channel: no daemon, no subprocess, no sandbox), run with `pytest tests/unit tests/architecture`
# or `pytest -m "not e2e"`; every other test file drives an SDK against its wire fake, the
# daemon, a subprocess or a sandbox and is marked e2e.
TESTS = Path(__file__).resolve().parent
FAST_FOLDERS = frozenset({"unit", "architecture"})


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "e2e: starts fake servers or the daemon (deselect with -m 'not e2e')"
    )


def pytest_collection_modifyitems(config, items):
    for item in items:
        try:
            folder = item.path.resolve().relative_to(TESTS).parts[0]
        except (AttributeError, ValueError, IndexError):
            folder = ""
        if folder not in FAST_FOLDERS:
            item.add_marker(pytest.mark.e2e)


@pytest.fixture(autouse=True)
def _root_logger_restored():
    """`chela` commands run in-process (main([...])) set the root logger's level and handlers
    (setup_logging); put them back after each test, so a later test's caplog sees INFO lines
    whatever ran before it."""
    import logging

    root = logging.getLogger()
    level, handlers = root.level, root.handlers[:]
    yield
    root.setLevel(level)
    root.handlers[:] = handlers
