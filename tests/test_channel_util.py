"""The helpers the adapters share."""

import pytest

from channels.util import BoundedLRU, parse_listen


def test_bounded_lru_forgets_least_recently_used():
    lru = BoundedLRU(2)
    lru.put("a", 1)
    lru.put("b", 2)
    assert lru.get("a") == 1      # touching "a" makes "b" the oldest
    lru.put("c", 3)
    assert "b" not in lru and "a" in lru and "c" in lru and len(lru) == 2
    lru.put("d")
    assert lru.get("d") is True and "a" not in lru


@pytest.mark.parametrize("value, expected", [
    ("127.0.0.1:8787", ("127.0.0.1", 8787)),
    ("[::1]:80", ("::1", 80)),
    (":3000", ("127.0.0.1", 3000)),
])
def test_parse_listen(value, expected):
    assert parse_listen(value) == expected


@pytest.mark.parametrize("value", ["nowhere", "host:port", "h:70000", ""])
def test_parse_listen_rejects(value):
    with pytest.raises(ValueError, match="bad listen address"):
        parse_listen(value)
