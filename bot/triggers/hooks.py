"""How a webhook request proves who sent it: one function per signature scheme, in a
table.  Each checks the raw body bytes against the hook's secret, compares in constant
time, and answers a :class:`Verdict` (with the delivery id and event name when signed).
Pure: the clock is an argument."""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass

# headers never shown to the model, stored or logged: credentials and signatures
SECRET_HEADERS = frozenset(
    {
        "authorization",
        "cookie",
        "proxy-authorization",
        "x-hub-signature",
        "x-hub-signature-256",
        "stripe-signature",
        "webhook-signature",
    }
)


@dataclass(frozen=True)
class Signed:
    """What a scheme needs of a request: its headers (names lower-case) and raw body."""

    headers: Mapping[str, str]
    body: bytes
    now: float


@dataclass(frozen=True)
class Verdict:
    ok: bool
    delivery_id: str = ""
    event: str = ""


REFUSED = Verdict(False)


@dataclass(frozen=True)
class Key:
    """A hook's credential as the schemes use it."""

    secret: str
    header: str = ""  # hmac: the header holding the signature (lower-case)
    tolerance: float = 300.0


def _hex_hmac(key: bytes, msg: bytes) -> str:
    return hmac.new(key, msg, hashlib.sha256).hexdigest()


def _same(a: str, b: str) -> bool:
    """Constant-time equality of two header values byte for byte (a non-ASCII character is
    never folded into ``?``)."""
    return hmac.compare_digest(
        a.encode("utf-8", "surrogatepass"), b.encode("utf-8", "surrogatepass")
    )


def _fresh(stamp: str, now: float, tolerance: float) -> bool:
    """A signed unix time within ``tolerance`` of now, in the past or the future."""
    try:
        t = int(stamp.strip())
    except ValueError:
        return False
    return abs(now - t) <= tolerance


def github(req: Signed, key: Key) -> Verdict:
    got = req.headers.get("x-hub-signature-256", "").strip()
    want = "sha256=" + _hex_hmac(key.secret.encode(), req.body)
    if not got or not _same(got.lower(), want):
        return REFUSED
    return Verdict(
        True,
        req.headers.get("x-github-delivery", "").strip(),
        req.headers.get("x-github-event", "").strip(),
    )


def _stripe_parts(header: str) -> tuple[str, list[str]]:
    stamp, sigs = "", []
    for part in header.split(","):
        name, _, value = part.strip().partition("=")
        if name == "t":
            stamp = value
        elif name == "v1":
            sigs.append(value.strip().lower())
    return stamp, sigs


def _parsed(body: bytes | str) -> object:
    """The body as JSON, or None: not JSON, or nested too deep to parse."""
    try:
        return json.loads(body)
    except (ValueError, RecursionError):
        return None


def _body_field(body: bytes, name: str) -> str:
    data = _parsed(body)
    value = data.get(name) if isinstance(data, dict) else None
    return value if isinstance(value, str) else ""


def stripe(req: Signed, key: Key) -> Verdict:
    stamp, sigs = _stripe_parts(req.headers.get("stripe-signature", ""))
    if not stamp or not sigs:
        return REFUSED
    want = _hex_hmac(key.secret.encode(), stamp.encode() + b"." + req.body)
    matched = False
    for sig in sigs:  # every one compared: the time taken does not say which matched
        matched |= _same(sig, want)
    if not matched or not _fresh(stamp, req.now, key.tolerance):
        return REFUSED
    return Verdict(True, _body_field(req.body, "id"), _body_field(req.body, "type"))


def standard_key(secret: str) -> bytes:
    """The signing key of a Standard Webhooks secret (``whsec_<base64>``); a secret that is
    not base64 is used as its bytes."""
    raw = secret.removeprefix("whsec_")
    try:
        return base64.b64decode(raw, validate=True)
    except (binascii.Error, ValueError):
        return raw.encode()


def standard(req: Signed, key: Key) -> Verdict:
    msg_id = req.headers.get("webhook-id", "").strip()
    stamp = req.headers.get("webhook-timestamp", "").strip()
    header = req.headers.get("webhook-signature", "")
    if not msg_id or not stamp or not header:
        return REFUSED
    mac = hmac.new(standard_key(key.secret), f"{msg_id}.{stamp}.".encode() + req.body, "sha256")
    want = base64.b64encode(mac.digest()).decode()
    matched = False
    for entry in header.split():
        version, _, sig = entry.partition(",")
        matched |= version == "v1" and _same(sig, want)
    if not matched or not _fresh(stamp, req.now, key.tolerance):
        return REFUSED
    return Verdict(True, msg_id, req.headers.get("webhook-event", "").strip())


def hmac_header(req: Signed, key: Key) -> Verdict:
    got = req.headers.get(key.header, "").strip().lower().removeprefix("sha256=")
    want = _hex_hmac(key.secret.encode(), req.body)
    if not got or not _same(got, want):
        return REFUSED
    return Verdict(True, req.headers.get("x-delivery-id", "").strip())


def token(req: Signed, key: Key) -> Verdict:
    scheme, _, value = req.headers.get("authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not _same(value.strip(), key.secret):
        return REFUSED
    return Verdict(True, req.headers.get("x-delivery-id", "").strip())


SCHEMES: dict[str, Callable[[Signed, Key], Verdict]] = {
    "github": github,
    "stripe": stripe,
    "standard": standard,
    "hmac": hmac_header,
    "token": token,
}


def verify(scheme: str, req: Signed, key: Key) -> Verdict:
    """The verdict of ``scheme`` on a request; an empty secret never passes."""
    if not key.secret:
        return REFUSED
    return SCHEMES[scheme](req, key)


def shown_headers(headers: Mapping[str, str], extra_secret: str = "", secret: str = "") -> str:
    """The headers a hook turn may see: one ``Name: value`` line each, credentials and
    signatures (and the hmac scheme's own header) left out, and any header whose value
    holds the hook's ``secret`` (a sender that sends it twice, under another name)."""
    hidden = SECRET_HEADERS | ({extra_secret.lower()} if extra_secret else set())
    return "\n".join(
        f"{k}: {v}"
        for k, v in headers.items()
        if k.lower() not in hidden and not (secret and secret in v)
    )


def body_text(body: bytes) -> str:
    """The body as the turn shows it: pretty JSON when it parses, else text."""
    text = body.decode("utf-8", "replace")
    try:
        return json.dumps(json.loads(text), indent=2, ensure_ascii=False)
    except (ValueError, RecursionError):  # not JSON, or nested too deep to parse
        return text
