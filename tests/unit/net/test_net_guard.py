"""bot.net's host normaliser and URL reading (SPEC §9.5 "URLs"): the host is judged as the HTTP
client (yarl) connects to it.  Table-driven; the daemon-level proofs are in
tests/e2e/test_ssrf_host_spelling.py."""

from __future__ import annotations

import ipaddress

import pytest
import yarl

from bot.net import FetchError, HostRules, canonical_host, check_url

MAPPED = [
    ("127.0.0.\U0001fbf1", "127.0.0.1"),  # SEGMENTED DIGIT ONE
    ("\uff11\uff12\uff17.\uff10.\uff10.\uff11", "127.0.0.1"),  # fullwidth digits
    ("127\u30020\u30020\u30021", "127.0.0.1"),  # ideographic full stops
    ("EXAMPLE.Com", "example.com"),
    ("example.com.", "example.com"),  # trailing dot
    ("bücher.example", "xn--bcher-kva.example"),
    ("BÜCHER.example", "xn--bcher-kva.example"),
    ("straße.de", "xn--strae-oqa.de"),  # ß kept (IDNA 2008, as yarl), not folded to ss
    ("\uff45xample.com", "example.com"),  # fullwidth e
    ("[::1]", "::1"),
    ("0:0:0:0:0:0:0:1", "::1"),
    ("a_b.example", "a_b.example"),  # yarl accepts underscores; so do we
]

REFUSED = [
    "exa\u200bmple.com",  # zero-width space: UTS 46 would drop it silently
    "exa\u200dmple.com",  # zero-width joiner
    "exa\u00admple.com",  # soft hyphen
    "a\u202eb.example",  # right-to-left override
    "a\u2066b.example",  # left-to-right isolate
    "exa\ufe0fmple.com",  # variation selector
    "\ufeffexample.com",  # BOM
    "a..b",
    "a b.example",
    "a%2eb.example",
    "",
    ".",
]


@pytest.mark.parametrize(("host", "expected"), MAPPED)
def test_a_host_is_spelled_as_the_client_connects_to_it(host, expected):
    assert canonical_host(host) == expected


@pytest.mark.parametrize(("host", "expected"), MAPPED[:10])
def test_the_table_agrees_with_the_http_client(host, expected):
    assert yarl.URL(f"http://{host}:81/").raw_host.rstrip(".") == expected


@pytest.mark.parametrize("host", REFUSED)
def test_a_host_that_does_not_map_to_plain_ascii_is_refused(host):
    with pytest.raises(FetchError, match="bad URL"):
        canonical_host(host)


@pytest.mark.parametrize(
    ("url", "host", "port"),
    [
        ("http://127.0.0.\U0001fbf1:8080/secret", "127.0.0.1", 8080),
        ("https://Bücher.Example./x?y=1", "xn--bcher-kva.example", 443),
        ("http://[::ffff:127.0.0.1]/", "::ffff:7f00:1", 80),
    ],
)
def test_check_url_gives_the_host_and_port_the_client_dials(url, host, port):
    target = check_url(url)
    assert (target.host, target.port) == (host, port)
    assert target.url.port == port


@pytest.mark.parametrize(
    "url",
    [
        "file:///etc/passwd",
        "http://user:pw@example.com/",
        "http://exa\u200bmple.com/",
        "http://example.com:99999/",
        "http:///path-only",
    ],
)
def test_check_url_refuses(url):
    with pytest.raises(FetchError, match="bad URL"):
        check_url(url)


def test_allow_list_entries_are_spelled_like_urls():
    rules = HostRules(["Bücher.Example.", "10.0.0.0/8"])
    loop = [ipaddress.ip_address("127.0.0.1")]
    rules.check("xn--bcher-kva.example", loop)  # the IDN entry matches its ASCII form
    rules.check("host", [ipaddress.ip_address("10.1.2.3")])
    with pytest.raises(FetchError, match="blocked address"):
        rules.check("b.example", loop)  # twin: a name not on the list
