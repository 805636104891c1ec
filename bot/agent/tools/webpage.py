"""A fetched web page as text: its bytes decoded (header, BOM, ``<meta>`` charset, UTF-8,
detection) and its HTML turned into Markdown (trafilatura when installed, else a small
built-in converter that keeps headings, links, lists and paragraphs)."""

from __future__ import annotations

import logging
import re
from html.parser import HTMLParser
from typing import ClassVar
from urllib.parse import urljoin

log = logging.getLogger("bot.agent.tools.web")


# ------------------------------------------------------------------------------ decoding
_META_CHARSET = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?\s*([A-Za-z0-9_.:-]+)""", re.I)


def _known(enc: str | None) -> str | None:
    if not enc:
        return None
    import codecs

    try:
        return codecs.lookup(enc.strip().strip("\"'")).name
    except LookupError:
        return None


def decode_body(raw: bytes, header_charset: str | None, content_type: str) -> tuple[str, str]:
    """The text and the charset used: the header's, else a BOM, else a ``<meta>`` charset
    (HTML), else UTF-8 if it decodes, else a detected one, else windows-1252."""
    if raw.startswith(b"\xef\xbb\xbf"):
        return raw[3:].decode("utf-8", "replace"), "utf-8"
    if raw[:2] in (b"\xff\xfe", b"\xfe\xff"):
        return raw.decode("utf-16", "replace"), "utf-16"
    enc = _known(header_charset)
    if enc is None and ("html" in content_type or "xml" in content_type):
        m = _META_CHARSET.search(raw[:4096])
        enc = _known(m.group(1).decode("ascii", "ignore")) if m else None
    if enc is not None:
        return raw.decode(enc, "replace"), enc
    try:
        return raw.decode("utf-8"), "utf-8"
    except UnicodeDecodeError:
        pass
    try:
        from charset_normalizer import from_bytes

        best = from_bytes(raw[:200_000]).best()
        if best is not None and best.encoding:
            return raw.decode(best.encoding, "replace"), best.encoding
    except Exception:
        pass
    return raw.decode("cp1252", "replace"), "cp1252"


# ------------------------------------------------------------------------ HTML -> Markdown
_HEADING = re.compile(r"h[1-6]")
_MARKS = {"strong": "**", "b": "**", "em": "*", "i": "*"}  # opened and closed alike
_OPEN = {"li": "\n- ", "pre": "\n\n```\n", **_MARKS}


class _Markdownish(HTMLParser):
    """A small fallback converter: headings, paragraphs, list items, links, code blocks;
    scripts, styles and page chrome dropped."""

    SKIP: ClassVar[frozenset[str]] = frozenset(
        {
            "script",
            "style",
            "noscript",
            "template",
            "svg",
            "head",
            "nav",
            "footer",
            "form",
            "iframe",
        }
    )
    BLOCK: ClassVar[frozenset[str]] = frozenset(
        {
            "p",
            "div",
            "section",
            "article",
            "main",
            "header",
            "br",
            "tr",
            "table",
            "blockquote",
            "ul",
            "ol",
            "dl",
            "dd",
            "dt",
            "figure",
            "hr",
        }
    )

    def __init__(self, base: str) -> None:
        super().__init__(convert_charrefs=True)
        self.base = base
        self.out: list[str] = []
        self.skip = 0
        self.pre = 0
        self.href: list[str | None] = []
        self.title = ""
        self._in_title = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "title":
            self._in_title = True
        if tag in self.SKIP:
            self.skip += 1
            return
        if self.skip:
            return
        if tag == "a":
            href = dict(attrs).get("href")
            self.href.append(
                urljoin(self.base, href)
                if href and not href.startswith(("javascript:", "#"))
                else None
            )
            if self.href[-1]:
                self.out.append("[")
            return
        if tag == "pre":
            self.pre += 1
        self.out.append(self._opening(tag))

    def _opening(self, tag: str) -> str:
        if _HEADING.fullmatch(tag):
            return "\n\n" + "#" * int(tag[1]) + " "
        if tag == "code":
            return "" if self.pre else "`"
        return _OPEN.get(tag) or ("\n\n" if tag in self.BLOCK else "")

    def handle_endtag(self, tag: str) -> None:
        if tag == "title":
            self._in_title = False
        if tag in self.SKIP:
            self.skip = max(0, self.skip - 1)
            return
        if self.skip:
            return
        if _HEADING.fullmatch(tag) or tag in self.BLOCK:
            self.out.append("\n\n")
        elif tag == "pre":
            self.pre = max(0, self.pre - 1)
            self.out.append("\n```\n\n")
        elif tag == "a" and self.href:
            href = self.href.pop()
            if href:
                self.out.append(f"]({href})")
        elif tag == "code":
            self.out.append("" if self.pre else "`")
        else:
            self.out.append(_MARKS.get(tag, ""))

    def handle_data(self, data: str) -> None:
        if self._in_title:
            self.title += data
        if self.skip:
            return
        self.out.append(data if self.pre else re.sub(r"\s+", " ", data))

    def text(self) -> str:
        s = "".join(self.out)
        s = re.sub(r"[ \t]+\n", "\n", s)
        s = re.sub(r"\n[ \t]+", "\n", s)
        s = re.sub(r"\n{3,}", "\n\n", s)
        return s.strip()


def html_to_markdown(html: str, url: str = "") -> tuple[str, str]:
    """(title, markdown).  trafilatura when installed, else the built-in converter."""
    fallback = _Markdownish(url)
    try:
        fallback.feed(html)
        fallback.close()
    except Exception:
        pass
    title = " ".join(fallback.title.split())
    try:
        import trafilatura
    except ImportError:
        trafilatura = None  # type: ignore[assignment]
    if trafilatura is not None:
        try:
            md = trafilatura.extract(
                html,
                url=url or None,
                output_format="markdown",
                include_links=True,
                include_formatting=True,
                include_tables=True,
                favor_recall=True,
            )
        except Exception as e:
            log.info("trafilatura failed on %s: %s", url, e)
            md = None
        if md and md.strip():
            return title, md.strip()
    return title, fallback.text()
