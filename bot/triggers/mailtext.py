"""A mail as an event turn reads it: From, To, Date, Subject and the text body (HTML turned
into text), attachments named with their size and never read.  Pure: bytes in, text out;
malformed MIME gives what could be read, never an exception."""

from __future__ import annotations

import email
import email.policy
import re
from dataclasses import dataclass
from email.message import Message
from html.parser import HTMLParser

MAX_BODY_CHARS = 20_000  # the text body shown to the model, at most
_BLOCK_TAGS = {"p", "div", "br", "li", "tr", "h1", "h2", "h3", "h4", "h5", "h6", "table"}


class _Text(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self.skip = 0

    def handle_starttag(self, tag: str, attrs: list) -> None:
        if tag in ("script", "style", "head"):
            self.skip += 1
        elif tag in _BLOCK_TAGS:
            self.parts.append("\n")

    def handle_endtag(self, tag: str) -> None:
        if tag in ("script", "style", "head") and self.skip:
            self.skip -= 1
        elif tag in _BLOCK_TAGS:
            self.parts.append("\n")

    def handle_data(self, data: str) -> None:
        if not self.skip:
            self.parts.append(data)


def html_to_text(html: str) -> str:
    p = _Text()
    try:
        p.feed(html)
        p.close()
    except Exception:  # html.parser is lenient; anything left is shown as tags stripped
        return re.sub(r"<[^>]*>", " ", html)
    text = "".join(p.parts)
    text = re.sub(r"[ \t\r\f\v]+", " ", text)
    return re.sub(r"\n\s*\n+", "\n\n", text).strip()


@dataclass(frozen=True)
class Mail:
    sender: str  # the From address, lower-case ("" when none parses)
    text: str  # the {mail} value


def _decoded(part: Message) -> str:
    try:
        payload = part.get_payload(decode=True)
    except Exception:
        return ""
    if not isinstance(payload, bytes):
        return ""
    charset = part.get_content_charset() or "utf-8"
    try:
        return payload.decode(charset, "replace")
    except LookupError:
        return payload.decode("utf-8", "replace")


def _attachment(part: Message, truncated: bool) -> str:
    name = part.get_filename() or "(unnamed)"
    try:
        raw = part.get_payload(decode=True)
    except Exception:
        raw = None
    size = len(raw) if isinstance(raw, bytes) else 0
    kb = max(1, round(size / 1024)) if size else 0
    where = f"{kb} KB" if not truncated else f"over {kb} KB"
    return f"{name} ({where})"


def _walk(msg: Message, truncated: bool) -> tuple[str, str, list[str]]:
    plain, html, attachments = "", "", []
    for part in msg.walk():
        if part.is_multipart():
            continue
        disposition = (part.get("Content-Disposition") or "").lower()
        ctype = part.get_content_type()
        if part.get_filename() or "attachment" in disposition:
            attachments.append(_attachment(part, truncated))
        elif ctype == "text/plain" and not plain:
            plain = _decoded(part)
        elif ctype == "text/html" and not html:
            html = _decoded(part)
    return plain, html, attachments


def _header(msg: Message, name: str) -> str:
    try:
        value = msg.get(name, "")
    except Exception:  # a header the parser cannot decode
        return ""
    return " ".join(str(value).split())


def render_mail(raw: bytes, *, total_size: int | None = None) -> Mail:
    """The ``{mail}`` text of a message (``raw`` may be only its first bytes: then
    ``total_size`` says how large the whole message is)."""
    truncated = total_size is not None and total_size > len(raw)
    try:
        msg = email.message_from_bytes(raw, policy=email.policy.compat32)
        plain, html, attachments = _walk(msg, truncated)
    except Exception:
        msg = email.message_from_bytes(b"")
        plain, html, attachments = raw.decode("utf-8", "replace"), "", []
    body = plain or html_to_text(html)
    if len(body) > MAX_BODY_CHARS:
        body = body[:MAX_BODY_CHARS] + "\n[… the rest of the body is not shown]"
    lines = [f"{h}: {_header(msg, h)}" for h in ("From", "To", "Date", "Subject")]
    if attachments:
        lines.append("Attachments (not read): " + "; ".join(attachments))
    if truncated:
        lines.append(f"(a large mail: {round((total_size or 0) / 1024)} KB in all)")
    text = "\n".join(lines) + "\n\n" + body.strip()
    return Mail(_sender(msg), text)


def _sender(msg: Message) -> str:
    """The address of the mail's one From header, lower-case; "" (allowed by no
    ``from_allow``) unless exactly one header names exactly one address with no defect: a
    display name that looks like an address, text after the address, a second sender."""
    try:
        values = msg.get_all("From") or []
        if len(values) != 1:
            return ""
        header = email.policy.default.header_factory("From", " ".join(str(values[0]).split()))
        addresses = header.addresses
    except Exception:  # a header the strict parser cannot read
        return ""
    if header.defects or len(addresses) != 1:
        return ""
    return addresses[0].addr_spec.lower()


def allowed(sender: str, allow: list[str]) -> bool:
    """Whether ``sender`` may wake the assistant: ``allow`` lists addresses and ``@domains``
    (lower-case); empty allows everyone."""
    if not allow:
        return True
    if not sender:
        return False
    domain = "@" + sender.rpartition("@")[2]
    return any(a == sender or (a.startswith("@") and a == domain) for a in allow)
