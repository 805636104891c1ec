"""Pure parts of the UI's door and config (SPEC §16.1, §16.3): origin comparison with
ports, Host parsing, the [ui] section's errors naming their key, `chela check`'s warnings,
the login rate limit."""

from __future__ import annotations

import pytest

from bot.config import ConfigError, config_warnings, parse_config
from bot.ui.app import not_served_reason
from bot.ui.auth import RateLimit
from bot.ui.guard import same_origin
from channels.util import host_of


@pytest.mark.parametrize(
    ("origin", "own", "same"),
    [
        ("http://127.0.0.1:8787", ["http://127.0.0.1:8787"], True),
        ("http://127.0.0.1:8788", ["http://127.0.0.1:8787"], False),  # another local port
        ("https://127.0.0.1:8787", ["http://127.0.0.1:8787"], False),  # scheme
        ("http://localhost:8787", ["http://127.0.0.1:8787"], False),  # host
        ("http://LOCALHOST", ["http://localhost:80"], True),  # default port, case
        ("null", ["http://127.0.0.1:8787"], False),
        ("http://127.0.0.1:8787/x", ["http://127.0.0.1:8787"], False),
        ("https://chela.example.net", ["http://x:1", "https://chela.example.net:443"], True),
        ("http://[::1]:8787", ["http://[::1]:8787"], True),
    ],
)
def test_origin_is_scheme_host_and_port(origin, own, same):
    assert same_origin(origin, own) is same


@pytest.mark.parametrize(
    ("header", "host"),
    [
        ("127.0.0.1:8787", "127.0.0.1"),
        ("[::1]:80", "::1"),
        ("Evil.Example.", "evil.example"),
        ("a:b:c", ""),
        ("[::1]x", ""),
        ("", ""),
    ],
)
def test_host_of(header, host):
    assert host_of(header) == host


@pytest.mark.parametrize(
    ("key", "value", "named"),
    [
        ("session_idle", "soon", "ui.session_idle"),
        ("session_max", "0s", "ui.session_max"),
        ("public_origin", "https://x.example/ui", "ui.public_origin"),
        ("read_only", "maybe", "ui.read_only"),
        ("colour", "red", "ui.colour: unknown key"),
    ],
)
def test_a_broken_ui_value_names_its_key(key, value, named):
    with pytest.raises(ConfigError, match=named.replace(".", r"\.")):
        parse_config({"ui": {key: value}})


def test_defaults_are_the_specs():
    ui = parse_config({}).ui
    assert (ui.enabled, ui.idle_seconds, ui.max_seconds, ui.read_only, ui.public_origin) == (
        True,
        12 * 3600,
        7 * 86400,
        False,
        "",
    )


def test_check_warns_about_a_public_origin_that_is_not_https():
    http = {"enabled": True, "listen": "0.0.0.0:8787"}
    plain = parse_config({"channels": {"http": http}, "ui": {"public_origin": "http://box:80"}})
    tls = parse_config({"channels": {"http": http}, "ui": {"public_origin": "https://box"}})
    assert any("ui.public_origin" in w and "https" in w for w in config_warnings(plain))
    assert not any("ui.public_origin" in w for w in config_warnings(tls))


def test_non_loopback_listen_without_public_origin_is_not_served():
    wide = parse_config({"channels": {"http": {"enabled": True, "listen": "0.0.0.0:8787"}}})
    assert "ui.public_origin is empty" in not_served_reason(wide)
    assert any("Control UI is not served" in w for w in config_warnings(wide))
    local = parse_config({"channels": {"http": {"enabled": True}}})
    assert not_served_reason(local) == ""
    off = parse_config({"channels": {"http": {"enabled": False}}})
    assert "HTTP channel is off" in not_served_reason(off)


def test_rate_limit_five_a_minute_per_address():
    limit = RateLimit()
    assert all(limit.allow("127.0.0.1", now=float(i)) for i in range(5))
    assert not limit.allow("127.0.0.1", now=10.0)
    assert limit.allow("127.0.0.2", now=10.0)  # another address
    assert limit.allow("127.0.0.1", now=60.5)  # the first attempt left the window
