"""Why a send failed (bot/delivery/failures.py): refused for good, or worth a retry and after
how long — read from the exception chain's flags, SDK type names, HTTP status and text."""

from __future__ import annotations

import datetime

import pytest

from bot.delivery.failures import classify


def named(name: str, *bases: type, **attrs) -> type:
    return type(name, bases or (Exception,), attrs)


NetworkError = named("NetworkError")
BadRequest = named("BadRequest", NetworkError)  # as in python-telegram-bot


def status(code: int, text: str = "x") -> Exception:
    e = Exception(text)
    e.status = code  # type: ignore[attr-defined]
    return e


def with_attr(exc: Exception, **attrs) -> Exception:
    for k, v in attrs.items():
        setattr(exc, k, v)
    return exc


def caused(outer: Exception, inner: Exception) -> Exception:
    outer.__cause__ = inner
    return outer


CASES = [
    # an explicit flag wins, whatever else the exception says
    ("flag permanent", with_attr(Exception("timeout"), permanent=True), (True, None)),
    ("flag transient", with_attr(Exception("forbidden"), permanent=False), (False, None)),
    # SDK type names; permanent names first (PTB's BadRequest is a NetworkError)
    ("Forbidden", named("Forbidden")("nope"), (True, None)),
    ("BadRequest under NetworkError", BadRequest("Bad Request: x"), (True, None)),
    ("NetworkError", NetworkError("Bad Gateway"), (False, None)),
    ("TimeoutError", TimeoutError(), (False, None)),
    ("ConnectionResetError", ConnectionResetError("reset"), (False, None)),
    (
        "RetryAfter timedelta",
        with_attr(named("RetryAfter")("flood"), retry_after=datetime.timedelta(seconds=3)),
        (False, 3.0),
    ),
    ("PTB _retry_after", with_attr(named("RetryAfter")("flood"), _retry_after=5), (False, 5.0)),
    ("negative retry_after ignored", with_attr(NetworkError("x"), retry_after=-1), (False, None)),
    ("unreadable retry_after", with_attr(NetworkError("x"), retry_after="soon"), (False, None)),
    # HTTP status
    ("403", status(403), (True, None)),
    ("404", status(404), (True, None)),
    ("408 is a retry", status(408), (False, None)),
    ("409 is a retry", status(409), (False, None)),
    ("425 is a retry", status(425), (False, None)),
    ("429 with retry_after", with_attr(status(429), retry_after=2), (False, 2.0)),
    ("500", status(500), (False, None)),
    ("status outside 4xx/5xx falls to the text", status(302, "boom"), (False, None)),
    ("status outside 4xx/5xx, permanent text", status(302, "chat not found"), (True, None)),
    # the text
    ("marker text", Exception("Chat not found"), (True, None)),
    ("slack marker", Exception("nothing delivered to C1 (channel_not_found)"), (True, None)),
    ("unknown text", Exception("internal_error"), (False, None)),
    (
        "marker text with a retry_after",
        with_attr(Exception("forbidden"), retry_after=4),
        (False, 4.0),
    ),
    # the chain: cause first seen through the wrapper
    ("wrapped Forbidden", caused(RuntimeError("send failed"), named("Forbidden")()), (True, None)),
    (
        "the longest retry_after of the chain",
        caused(with_attr(Exception("a"), retry_after=2), with_attr(Exception("b"), retry_after=7)),
        (False, 7.0),
    ),
    (
        "marker only in the cause's text",
        caused(Exception("x"), Exception("bot was kicked")),
        (True, None),
    ),
]


@pytest.mark.parametrize(("exc", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_classify(exc, expected):
    assert classify(exc) == expected


def test_a_cyclic_chain_ends():
    a, b = Exception("a"), Exception("b")
    a.__context__, b.__context__ = b, a
    assert classify(a) == (False, None)


def test_the_chain_is_read_ten_deep_at_most():
    top = e = Exception("0")
    for i in range(1, 12):
        nxt = Exception(str(i))
        e.__cause__ = nxt
        e = nxt
    e.__cause__ = named("Forbidden")()  # the 13th: not read
    assert classify(top) == (False, None)
