"""Test-wide guards: no test may reach beyond this machine."""

from __future__ import annotations

import ipaddress
import os
import socket

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
    """A started fake Telegram Bot API (tests/fakes/telegram.py) for the token in tests/e2e.py."""
    from tests.e2e import TG_TOKEN
    from tests.fakes.telegram import FakeTelegram

    f = FakeTelegram(token=TG_TOKEN, bot_username="chela_bot")
    await f.start()
    yield f
    await f.stop()


# ------------------------------------------------------------------------- test tiers
# `pytest -m "not e2e"` is the fast tier (the pure translators, the reply rules, config, store,
# prompt, tools): seconds, for the edit-test loop.  A test is end-to-end when it starts a fake
# platform or model server (these fixtures), lives in a module that drives the daemon, an adapter
# against its wire-level fake, or subprocesses, or calls `exec` (a sandbox per call).
E2E_FIXTURES = {"llm", "tg", "fake_llm", "site", "search"}
E2E_MODULE_PREFIXES = (
    "test_e2e_",
    "test_first_hour",
    "test_crash",
    "test_startstop",
    "test_mcp",
    "test_trust_e2e",
    "test_commands_e2e",
    "test_compaction_e2e",
    "test_telegram",
    "test_slack",
    "test_signal",
    "test_discord",
    "test_sandbox",
    "test_llm",
    "test_failover",
    "test_media",
    "test_outbox",
    "test_web_tools",
    "test_http_security",
    "test_files_safety",
    "test_state_errors",
    "test_systemd",
)


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "e2e: starts fake servers or the daemon (deselect with -m 'not e2e')"
    )


def pytest_collection_modifyitems(config, items):
    for item in items:
        module = item.path.name if item.path else ""
        fixtures = set(getattr(item, "fixturenames", ()))
        if module.endswith("_translate.py"):
            continue  # an adapter's pure translators: table tests, no server
        if (
            module.startswith(E2E_MODULE_PREFIXES)
            or fixtures & E2E_FIXTURES
            or any(f.startswith("fake_") for f in fixtures)
            or "exec" in item.name
            or "sandbox" in item.name
        ):
            item.add_marker(pytest.mark.e2e)
