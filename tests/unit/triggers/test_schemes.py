"""The signature schemes as a table: each correctly signed request passes, and each twin
(wrong, missing, other body, stale, future, garbage) is refused."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json

import pytest

from bot.triggers.hooks import Key, Signed, body_text, shown_headers, standard_key, verify

SECRET = "s3cret"
NOW = 1_800_000_000.0
BODY = json.dumps({"id": "evt_1", "type": "charge.succeeded"}).encode()
WHSEC = "whsec_" + base64.b64encode(b"0123456789abcdef").decode()


def _hex(secret: str, msg: bytes) -> str:
    return hmac.new(secret.encode(), msg, hashlib.sha256).hexdigest()


def headers(scheme: str, body: bytes = BODY, at: float = NOW) -> dict[str, str]:
    t = str(int(at))
    if scheme == "github":
        return {"x-hub-signature-256": "sha256=" + _hex(SECRET, body), "x-github-delivery": "g1"}
    if scheme == "stripe":
        return {"stripe-signature": f"t={t},v1=00,v1={_hex(SECRET, t.encode() + b'.' + body)}"}
    if scheme == "standard":
        mac = hmac.new(standard_key(WHSEC), b"m1." + t.encode() + b"." + body, "sha256")
        sig = base64.b64encode(mac.digest()).decode()
        return {"webhook-id": "m1", "webhook-timestamp": t, "webhook-signature": f"v0,x v1,{sig}"}
    if scheme == "hmac":
        return {"x-sig": _hex(SECRET, body), "x-delivery-id": "h1"}
    return {"authorization": f"Bearer {SECRET}", "x-delivery-id": "t1"}


def key(scheme: str) -> Key:
    return Key(WHSEC if scheme == "standard" else SECRET, "x-sig", 300.0)


def check(scheme: str, hdrs: dict, body: bytes = BODY, now: float = NOW):
    return verify(scheme, Signed(hdrs, body, now), key(scheme))


EXPECTED_ID = {"github": "g1", "stripe": "evt_1", "standard": "m1", "hmac": "h1", "token": "t1"}


@pytest.mark.parametrize("scheme", list(EXPECTED_ID))
def test_signed_correctly_passes_with_its_delivery_id(scheme):
    v = check(scheme, headers(scheme))
    assert v.ok and v.delivery_id == EXPECTED_ID[scheme]


def test_hmac_takes_the_sha256_prefix_too():
    h = headers("hmac")
    assert check("hmac", {**h, "x-sig": "sha256=" + h["x-sig"]}).ok


@pytest.mark.parametrize("scheme", list(EXPECTED_ID))
def test_missing_signature_is_refused(scheme):
    assert not check(scheme, {}).ok


@pytest.mark.parametrize("scheme", ["github", "stripe", "standard", "hmac"])
def test_another_body_is_refused(scheme):
    assert not check(scheme, headers(scheme), body=BODY + b" ").ok


@pytest.mark.parametrize("scheme", ["stripe", "standard"])
@pytest.mark.parametrize("shift", [-301, 301])
def test_a_timestamp_outside_the_tolerance_is_refused_past_or_future(scheme, shift):
    assert not check(scheme, headers(scheme, at=NOW + shift)).ok
    assert check(scheme, headers(scheme, at=NOW + shift / 2)).ok  # twin: inside


@pytest.mark.parametrize(
    ("scheme", "header", "value"),
    [
        ("github", "x-hub-signature-256", "sha256=zz\x00"),
        ("stripe", "stripe-signature", "t=,v1=,,=,t=abc"),
        ("standard", "webhook-signature", ",,, v1, v1,@@@"),
        ("hmac", "x-sig", "é" * 64),
        ("token", "authorization", "Bearer"),
    ],
)
def test_garbage_in_the_signature_header_is_refused(scheme, header, value):
    assert not check(scheme, {**headers(scheme), header: value}).ok


def test_an_empty_secret_never_passes():
    assert not verify("token", Signed({"authorization": "Bearer "}, b"", NOW), Key("")).ok


def test_shown_headers_leave_out_credentials_and_signatures():
    shown = shown_headers(
        {
            "Authorization": "Bearer x",
            "Cookie": "c",
            "X-Hub-Signature-256": "s",
            "Stripe-Signature": "s",
            "webhook-signature": "s",
            "X-Sig": "s",
            "X-GitHub-Event": "push",
        },
        "x-sig",
    )
    assert shown == "X-GitHub-Event: push"


def test_body_text_is_pretty_json_else_text():
    assert body_text(b'{"a":1}') == '{\n  "a": 1\n}'
    assert body_text(b"plain \xff") == "plain \ufffd"


def test_a_deeply_nested_body_is_text_not_a_crash():
    deep = b"[" * 100_000
    assert body_text(deep) == deep.decode()
    t = str(int(NOW))
    hdrs = {"stripe-signature": f"t={t},v1={_hex(SECRET, t.encode() + b'.' + deep)}"}
    v = check("stripe", hdrs, body=deep)
    assert v.ok and v.delivery_id == ""  # signed: taken, with no delivery id to read


def test_a_non_ascii_secret_is_compared_byte_for_byte():
    secret = "pässwörd"
    good = {"authorization": f"Bearer {secret}"}
    assert verify("token", Signed(good, b"", NOW), Key(secret)).ok
    for guess in ("p?ssw?rd", "pöss wärd".replace(" ", ""), "p\ufffdssw\ufffdrd"):
        bad = {"authorization": f"Bearer {guess}"}
        assert not verify("token", Signed(bad, b"", NOW), Key(secret)).ok, guess


def test_github_takes_sha256_only_never_sha1():
    sha1 = "sha1=" + hmac.new(SECRET.encode(), BODY, hashlib.sha1).hexdigest()
    assert not check("github", {"x-hub-signature": sha1, "x-github-delivery": "g1"}).ok
    h = headers("github")
    assert not check("github", {**h, "x-hub-signature-256": sha1}).ok
    assert check("github", {**h, "x-hub-signature": sha1}).ok  # twin: sha256 present


def test_a_header_carrying_the_secret_under_another_name_is_left_out():
    hdrs = {"X-Api-Key": SECRET, "X-Token": f"k={SECRET};", "X-Request-Id": "r1"}
    assert shown_headers(hdrs, "", SECRET) == "X-Request-Id: r1"
    assert shown_headers(hdrs, "") == "\n".join(f"{k}: {v}" for k, v in hdrs.items())  # twin
