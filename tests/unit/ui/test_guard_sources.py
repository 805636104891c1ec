"""The guard's pieces that the red team's wire tests reach only in part: every loopback form
is one login rate-limit source (the wire test binds 127.0.0.2; ``::1`` and the IPv4-mapped
form cannot be bound there), and every ``chela_ui`` value of a Cookie header is seen."""

from __future__ import annotations

from aiohttp.test_utils import make_mocked_request

from bot.ui.auth import LOOPBACK, RateLimit, source_key
from bot.ui.guard import COOKIES_TRIED, cookie_values


def test_every_loopback_form_is_one_source():
    forms = ["127.0.0.1", "127.0.0.2", "127.255.255.254", "::1", "::ffff:127.0.0.9"]
    assert {source_key(f) for f in forms} == {LOOPBACK}
    limit = RateLimit()
    assert [limit.allow(source_key(f), now=1.0) for f in forms] == [True] * 5
    assert not limit.allow(source_key("127.0.0.77"), now=1.0)


def test_twin_other_addresses_keep_their_own_source():
    assert source_key("10.0.0.1") == source_key("::ffff:10.0.0.1") == "10.0.0.1"
    assert source_key("192.168.1.2") != source_key("192.168.1.3")
    assert source_key("fe80::1%eth0") == "fe80::1"
    assert source_key("") == "" and source_key("not-an-address") == "not-an-address"


def test_every_chela_ui_value_is_seen_in_order():
    req = make_mocked_request(
        "GET", "/ui/api/bootstrap", headers={"Cookie": 'chela_ui=real; theme=dark; chela_ui="x"'}
    )
    assert cookie_values(req) == ["real", "x"]
    req = make_mocked_request(
        "GET", "/ui/api/bootstrap", headers={"Cookie": "chela_ui=j; chela_ui=j; chela_ui=real"}
    )
    assert cookie_values(req) == ["j", "real"]  # a repeated value is looked up once


def test_twin_other_cookies_and_empty_values_are_not_sessions_and_the_list_is_bounded():
    req = make_mocked_request(
        "GET", "/ui/api/bootstrap", headers={"Cookie": "xchela_ui=a; chela_ui=; theme=b"}
    )
    assert cookie_values(req) == []
    many = "; ".join(f"chela_ui=v{i}" for i in range(50))
    req = make_mocked_request("GET", "/ui/api/bootstrap", headers={"Cookie": many})
    assert len(cookie_values(req)) == COOKIES_TRIED
