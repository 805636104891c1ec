"""``web_fetch`` and ``web_search`` (SPEC §14).

web_fetch follows redirects itself (``allow_redirects=False`` and a hop limit).  At every
hop the host is resolved once, every address it resolves to is checked (loopback,
private, link-local, shared, multicast, reserved and cloud metadata addresses are
refused unless the owner listed the host or a covering CIDR in
``tools.web.allow_private_hosts``; metadata addresses are refused whatever the list
says), and the connection is made to exactly those checked addresses through a pinned
resolver, so a second DNS answer cannot swap in an internal address.

HTML becomes Markdown with trafilatura when it is installed (``pip install
'chela[web]'``), else with a small built-in converter that keeps headings, links, lists
and paragraphs.  The result is fenced as untrusted data (``bot.untrusted``).
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import logging
import re
import socket
import ssl
from dataclasses import dataclass
from html.parser import HTMLParser
from typing import ClassVar
from urllib.parse import parse_qs, urljoin, urlsplit

import aiohttp
from aiohttp.abc import AbstractResolver, ResolveResult

from bot.untrusted import untrusted_block

from .base import Tool, ToolContext, ToolError, arg_int, arg_str, schema
import contextlib

log = logging.getLogger(__name__)

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

# Cloud metadata services: never reachable, whatever allow_private_hosts says.
METADATA_ADDRESSES = frozenset(
    ipaddress.ip_address(a)
    for a in (
        "169.254.169.254",  # AWS, GCP, Azure, OpenStack, DigitalOcean, ...
        "169.254.170.2",  # AWS ECS task metadata
        "169.254.169.253",  # AWS DNS resolver
        "169.254.169.123",  # AWS time sync
        "100.100.100.200",  # Alibaba Cloud
        "fd00:ec2::254",  # AWS IPv6 metadata
        "fd00:ec2::253",
    )
)
METADATA_HOSTS = frozenset(
    {
        "metadata.google.internal",
        "metadata.goog",
        "metadata",
        "instance-data",
        "instance-data.ec2.internal",
    }
)

_SPECIAL_V4 = [
    ipaddress.ip_network(n)
    for n in (
        "0.0.0.0/8",
        "10.0.0.0/8",
        "100.64.0.0/10",
        "127.0.0.0/8",
        "169.254.0.0/16",
        "172.16.0.0/12",
        "192.0.0.0/24",
        "192.0.2.0/24",
        "192.88.99.0/24",
        "192.168.0.0/16",
        "198.18.0.0/15",
        "198.51.100.0/24",
        "203.0.113.0/24",
        "224.0.0.0/4",
        "240.0.0.0/4",
    )
]

TEXT_TYPES = (
    "text/",
    "application/xhtml",
    "application/xml",
    "application/json",
    "application/ld+json",
    "application/rss",
    "application/atom",
    "application/javascript",
)


class FetchError(ToolError):
    """A web_fetch failure; the message starts with its name (DNS, TLS, timeout, ...)."""


# ------------------------------------------------------------------------ address rules
def _plain(ip: IPAddress) -> IPAddress:
    """IPv4-mapped / NAT64-style IPv6 forms judged as the IPv4 address they carry."""
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return ip.ipv4_mapped
        if ip in ipaddress.ip_network("64:ff9b::/96"):
            return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return ip


def is_metadata(ip: IPAddress) -> bool:
    return _plain(ip) in METADATA_ADDRESSES


def is_internal(ip: IPAddress) -> bool:
    """Anything that is not a public unicast address."""
    ip = _plain(ip)
    if isinstance(ip, ipaddress.IPv4Address):
        return any(ip in n for n in _SPECIAL_V4)
    return (
        ip.is_loopback
        or ip.is_private
        or ip.is_link_local
        or ip.is_multicast
        or ip.is_reserved
        or ip.is_unspecified
        or ip.is_site_local
        or not ip.is_global
    )


class HostRules:
    """``allow_private_hosts``: exact host names (case-insensitive) and IPs / CIDRs."""

    def __init__(self, allow: list[str] | tuple[str, ...] = ()) -> None:
        self.names: set[str] = set()
        self.nets: list[ipaddress.IPv4Network | ipaddress.IPv6Network] = []
        for entry in allow:
            e = entry.strip().lower().rstrip(".")
            try:
                self.nets.append(ipaddress.ip_network(e.strip("[]"), strict=False))
            except ValueError:
                self.names.add(e)

    def check(self, host: str, addrs: list[IPAddress]) -> None:
        """Raise ``FetchError`` unless every address of ``host`` may be contacted."""
        h = host.lower().rstrip(".")
        if h in METADATA_HOSTS:
            raise FetchError(f"blocked address: {host} is a cloud metadata service")
        for ip in addrs:
            if is_metadata(ip):
                raise FetchError(
                    f"blocked address: {host} resolves to {ip}, a cloud metadata address "
                    "(never allowed)"
                )
            if not is_internal(ip):
                continue
            if h in self.names or any(
                a.version == n.version and a in n for n in self.nets for a in {ip, _plain(ip)}
            ):
                continue
            raise FetchError(
                f"blocked address: {host} resolves to {ip}, a loopback, private or link-local "
                "address (add the host or its network to tools.web.allow_private_hosts to "
                "allow it)"
            )


class PinnedResolver(AbstractResolver):
    """Answers only from the addresses checked for the current hop (no second lookup)."""

    def __init__(self) -> None:
        self.pinned: dict[str, list[IPAddress]] = {}

    async def resolve(
        self, host: str, port: int = 0, family: int = socket.AF_UNSPEC
    ) -> list[ResolveResult]:
        addrs = self.pinned.get(host.lower().rstrip("."))
        if not addrs:
            raise OSError(f"no vetted address for {host}")
        return [
            {
                "hostname": host,
                "host": str(ip),
                "port": port,
                "family": socket.AF_INET6 if ip.version == 6 else socket.AF_INET,
                "proto": 0,
                "flags": socket.AI_NUMERICHOST,
            }
            for ip in addrs
        ]

    async def close(self) -> None:
        pass


async def resolve_host(host: str, port: int) -> list[IPAddress]:
    h = host.strip("[]")
    try:
        return [ipaddress.ip_address(h)]
    except ValueError:
        pass
    loop = asyncio.get_running_loop()
    try:
        infos = await loop.getaddrinfo(h, port, type=socket.SOCK_STREAM)
    except socket.gaierror as e:
        raise FetchError(f"DNS: cannot resolve {host}: {e.strerror or e}") from None
    out: list[IPAddress] = []
    for *_, sockaddr in infos:
        ip = ipaddress.ip_address(str(sockaddr[0]).split("%")[0])
        if ip not in out:
            out.append(ip)
    if not out:
        raise FetchError(f"DNS: {host} has no address")
    return out


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
        if re.fullmatch(r"h[1-6]", tag):
            self.out.append("\n\n" + "#" * int(tag[1]) + " ")
        elif tag == "li":
            self.out.append("\n- ")
        elif tag == "pre":
            self.pre += 1
            self.out.append("\n\n```\n")
        elif tag in self.BLOCK:
            self.out.append("\n\n")
        elif tag == "a":
            href = dict(attrs).get("href")
            self.href.append(
                urljoin(self.base, href)
                if href and not href.startswith(("javascript:", "#"))
                else None
            )
            if self.href[-1]:
                self.out.append("[")
        elif tag in ("strong", "b"):
            self.out.append("**")
        elif tag in ("em", "i"):
            self.out.append("*")
        elif tag == "code" and not self.pre:
            self.out.append("`")

    def handle_endtag(self, tag: str) -> None:
        if tag == "title":
            self._in_title = False
        if tag in self.SKIP:
            self.skip = max(0, self.skip - 1)
            return
        if self.skip:
            return
        if re.fullmatch(r"h[1-6]", tag) or tag in self.BLOCK:
            self.out.append("\n\n")
        elif tag == "pre":
            self.pre = max(0, self.pre - 1)
            self.out.append("\n```\n\n")
        elif tag == "a" and self.href:
            href = self.href.pop()
            if href:
                self.out.append(f"]({href})")
        elif tag in ("strong", "b"):
            self.out.append("**")
        elif tag in ("em", "i"):
            self.out.append("*")
        elif tag == "code" and not self.pre:
            self.out.append("`")

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


# ----------------------------------------------------------------------------- fetching
@dataclass
class Page:
    url: str
    status: int
    content_type: str
    charset: str
    text: str
    title: str
    truncated_bytes: bool


class WebFetcher:
    def __init__(self, web_cfg) -> None:
        self.cfg = web_cfg
        self.rules = HostRules(web_cfg.allow_private_hosts)

    async def fetch(self, url: str) -> Page:
        cfg = self.cfg
        resolver = PinnedResolver()
        connector = aiohttp.TCPConnector(resolver=resolver, use_dns_cache=False, force_close=True)
        timeout = aiohttp.ClientTimeout(
            total=cfg.timeout_seconds, connect=min(10.0, cfg.timeout_seconds)
        )
        headers = {
            "User-Agent": cfg.user_agent,
            "Accept": "text/html,application/xhtml+xml,text/plain;q=0.9,*/*;q=0.5",
            "Accept-Encoding": "gzip, deflate",
        }
        async with aiohttp.ClientSession(
            connector=connector, timeout=timeout, headers=headers, trust_env=False
        ) as session:
            current = url
            for _hop in range(cfg.max_redirects + 1):
                parts = _check_url(current)
                host = parts.hostname or ""
                port = parts.port or (443 if parts.scheme == "https" else 80)
                addrs = await resolve_host(host, port)
                self.rules.check(host, addrs)
                resolver.pinned = {host.lower().rstrip("."): addrs}
                try:
                    async with session.get(current, allow_redirects=False) as resp:
                        if resp.status in (301, 302, 303, 307, 308):
                            loc = resp.headers.get("Location")
                            if not loc:
                                raise FetchError(
                                    f"HTTP {resp.status}: a redirect without a Location"
                                )
                            current = urljoin(current, loc)
                            continue
                        return await self._read(current, resp)
                except FetchError:
                    raise
                except TimeoutError:
                    raise FetchError(
                        f"timeout: {host} did not answer within {cfg.timeout_seconds:g}s"
                    ) from None
                except aiohttp.ClientConnectorCertificateError as e:
                    raise FetchError(
                        f"TLS: the certificate of {host} is not valid: {e.certificate_error}"
                    ) from None
                except (aiohttp.ClientSSLError, ssl.SSLError) as e:
                    raise FetchError(f"TLS: handshake with {host} failed: {e}") from None
                except aiohttp.ClientConnectorError as e:
                    raise FetchError(
                        f"connection: cannot connect to {host}:{port}: {e.os_error or e}"
                    ) from None
                except aiohttp.ClientPayloadError as e:
                    raise FetchError(f"connection: the body from {host} was broken: {e}") from None
                except aiohttp.ClientError as e:
                    raise FetchError(f"connection: {type(e).__name__}: {e}") from None
            raise FetchError(f"too many redirects: more than {cfg.max_redirects}")

    async def _read(self, url: str, resp: aiohttp.ClientResponse) -> Page:
        cap = self.cfg.max_bytes
        ctype = resp.headers.get("Content-Type", "").split(";")[0].strip().lower()
        is_text = not ctype or ctype.startswith(TEXT_TYPES) or ctype.endswith(("+xml", "+json"))
        declared = resp.content_length
        if not is_text:
            if declared is not None and declared > cap:
                raise FetchError(
                    f"too large: {declared} bytes of {ctype}; only text pages are read"
                )
            raise FetchError(
                f"unsupported content type {ctype!r}: web_fetch reads text and HTML pages"
            )
        buf = bytearray()
        cut = False
        async for chunk in resp.content.iter_chunked(65536):
            buf += chunk
            if len(buf) > cap:
                del buf[cap:]
                cut = True
                break
        text, charset = decode_body(bytes(buf), resp.charset, ctype)
        title = ""
        if "html" in ctype or (not ctype and "<html" in text[:2000].lower()):
            title, text = html_to_markdown(text, url)
        elif "json" in ctype:
            with contextlib.suppress(ValueError):
                text = json.dumps(json.loads(text), indent=2, ensure_ascii=False)
        return Page(
            url=url,
            status=resp.status,
            content_type=ctype or "unknown",
            charset=charset,
            text=text,
            title=title,
            truncated_bytes=cut,
        )


def _check_url(url: str):
    try:
        parts = urlsplit(url.strip())
    except ValueError:
        raise FetchError(f"bad URL {url!r}") from None
    if parts.scheme not in ("http", "https"):
        raise FetchError(f"bad URL {url!r}: only http and https are fetched")
    if not parts.hostname:
        raise FetchError(f"bad URL {url!r}: no host")
    if parts.username or parts.password:
        raise FetchError("bad URL: credentials in the URL are not sent")
    try:
        _ = parts.port  # urllib raises on a bad port only when it is read
    except ValueError:
        raise FetchError(f"bad URL {url!r}: bad port") from None
    return parts


def format_page(page: Page, max_chars: int) -> str:
    body = page.text
    notes = []
    if page.truncated_bytes:
        notes.append("the download was cut at the size limit")
    if len(body) > max_chars:
        notes.append(f"{len(body) - max_chars} more characters not shown (max_chars={max_chars})")
        body = body[:max_chars]
    if page.status >= 400:
        notes.insert(0, f"the server answered HTTP {page.status}")
    head = [f"URL: {page.url}", f"Status: {page.status}", f"Content-Type: {page.content_type}"]
    if page.title:
        head.append(f"Title: {' '.join(page.title.split())[:300]}")
    if notes:
        body += "\n\n[" + "; ".join(notes) + "]"
    return untrusted_block("Fetched web page", page.url, "\n".join(head) + "\n\n" + body)


def make_web_fetch(web_cfg) -> Tool:
    fetcher = WebFetcher(web_cfg)

    async def handler(ctx: ToolContext, args: dict) -> str:
        url = arg_str(args, "url")
        max_chars = arg_int(args, "max_chars", web_cfg.max_chars, minimum=100) or web_cfg.max_chars
        max_chars = min(max_chars, 100_000)
        page = await fetcher.fetch(url)
        log.info(
            "web_fetch session=%s %s -> %s %s", ctx.session_key, url, page.status, page.content_type
        )
        return format_page(page, max_chars)

    return Tool(
        "web_fetch",
        "Fetch a web page (http/https) and return its readable text as Markdown; the content is untrusted",
        schema(
            {
                "url": {"type": "string", "description": "the http(s) URL to fetch"},
                "max_chars": {
                    "type": "integer",
                    "description": f"most characters to return (default {web_cfg.max_chars})",
                },
            },
            ["url"],
        ),
        handler,
    )


# ------------------------------------------------------------------------------ search
@dataclass
class Hit:
    title: str
    url: str
    snippet: str


def search_provider(web_cfg, env=None) -> str | None:
    """The provider web_search uses, or None when none can work (then it is not offered)."""
    import os

    env = os.environ if env is None else env
    has = {
        "brave": bool(web_cfg.brave_api_key_env and env.get(web_cfg.brave_api_key_env)),
        "tavily": bool(web_cfg.tavily_api_key_env and env.get(web_cfg.tavily_api_key_env)),
        "searxng": bool(web_cfg.searxng_url),
        "duckduckgo": bool(web_cfg.duckduckgo_url),
    }
    choice = web_cfg.search_provider
    if choice == "auto":
        return next((p for p in ("brave", "tavily", "searxng", "duckduckgo") if has[p]), None)
    return choice if has[choice] else None


class _DdgParser(HTMLParser):
    """Results of DuckDuckGo's HTML endpoint: ``a.result__a`` (title, link) and
    ``.result__snippet``."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.hits: list[Hit] = []
        self._field: str | None = None
        self._depth = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        classes = (a.get("class") or "").split()
        if self._field:
            self._depth += 1
            return
        if tag == "a" and "result__a" in classes:
            self.hits.append(Hit("", _ddg_target(a.get("href") or ""), ""))
            self._field, self._depth = "title", 0
        elif "result__snippet" in classes and self.hits:
            self._field, self._depth = "snippet", 0

    def handle_endtag(self, tag: str) -> None:
        if self._field:
            if self._depth == 0:
                self._field = None
            else:
                self._depth -= 1

    def handle_data(self, data: str) -> None:
        if self._field and self.hits:
            h = self.hits[-1]
            setattr(h, self._field, getattr(h, self._field) + data)


def _ddg_target(href: str) -> str:
    """DuckDuckGo wraps result links as ``//duckduckgo.com/l/?uddg=<url>``."""
    parts = urlsplit(href if "://" in href else "https:" + href if href.startswith("//") else href)
    if parts.path.startswith("/l/"):
        target = parse_qs(parts.query).get("uddg")
        if target:
            return target[0]
    return href


class WebSearcher:
    def __init__(self, web_cfg, provider: str) -> None:
        self.cfg = web_cfg
        self.provider = provider

    async def search(self, query: str, count: int) -> list[Hit]:
        import os

        c = self.cfg
        timeout = aiohttp.ClientTimeout(total=c.timeout_seconds)
        headers = {"User-Agent": c.user_agent, "Accept": "application/json"}
        try:
            async with aiohttp.ClientSession(timeout=timeout, headers=headers, trust_env=True) as s:
                if self.provider == "brave":
                    url = c.brave_api_base.rstrip("/") + "/res/v1/web/search"
                    async with s.get(
                        url,
                        params={"q": query, "count": str(count)},
                        headers={"X-Subscription-Token": os.environ.get(c.brave_api_key_env, "")},
                    ) as r:
                        data = await _json(r, "Brave")
                    return [
                        Hit(x.get("title", ""), x.get("url", ""), x.get("description", ""))
                        for x in (data.get("web") or {}).get("results", [])
                    ]
                if self.provider == "tavily":
                    url = c.tavily_api_base.rstrip("/") + "/search"
                    key = os.environ.get(c.tavily_api_key_env, "")
                    async with s.post(
                        url,
                        json={"query": query, "max_results": count, "search_depth": "basic"},
                        headers={"Authorization": f"Bearer {key}"},
                    ) as r:
                        data = await _json(r, "Tavily")
                    return [
                        Hit(x.get("title", ""), x.get("url", ""), x.get("content", ""))
                        for x in data.get("results", [])
                    ]
                if self.provider == "searxng":
                    url = c.searxng_url.rstrip("/") + "/search"
                    async with s.get(url, params={"q": query, "format": "json"}) as r:
                        data = await _json(r, "SearXNG")
                    return [
                        Hit(x.get("title", ""), x.get("url", ""), x.get("content", ""))
                        for x in data.get("results", [])
                    ]
                url = c.duckduckgo_url.rstrip("/") + "/html/"
                async with s.post(url, data={"q": query}, headers={"Accept": "text/html"}) as r:
                    if r.status >= 400:
                        raise ToolError(f"search failed: DuckDuckGo answered HTTP {r.status}")
                    p = _DdgParser()
                    p.feed(await r.text(errors="replace"))
                    return [h for h in p.hits if h.url]
        except TimeoutError:
            raise ToolError(
                f"timeout: the search provider ({self.provider}) did not answer within "
                f"{c.timeout_seconds:g}s"
            ) from None
        except aiohttp.ClientError as e:
            raise ToolError(f"search failed: cannot reach {self.provider}: {e}") from None


async def _json(r: aiohttp.ClientResponse, who: str) -> dict:
    if r.status in (401, 403):
        raise ToolError(f"search failed: {who} refused the API key (HTTP {r.status})")
    if r.status == 429:
        raise ToolError(f"search failed: {who} rate limit reached (HTTP 429); try again later")
    if r.status >= 400:
        raise ToolError(f"search failed: {who} answered HTTP {r.status}")
    try:
        data = await r.json(content_type=None)
    except ValueError:
        raise ToolError(f"search failed: {who} did not answer JSON") from None
    if not isinstance(data, dict):
        raise ToolError(f"search failed: unexpected answer from {who}")
    return data


def make_web_search(web_cfg, provider: str) -> Tool:
    searcher = WebSearcher(web_cfg, provider)

    async def handler(ctx: ToolContext, args: dict) -> str:
        query = arg_str(args, "query").strip()
        if not query:
            raise ToolError("argument 'query' must not be empty")
        count = max(1, min(arg_int(args, "count", 5) or 5, 20))
        hits = (await searcher.search(query, count))[:count]
        log.info(
            "web_search session=%s provider=%s results=%d", ctx.session_key, provider, len(hits)
        )
        if not hits:
            return f"No results for {json.dumps(query, ensure_ascii=False)}."
        lines = []
        for i, h in enumerate(hits, 1):
            lines.append(f"{i}. {' '.join(h.title.split()) or '(no title)'}\n   {h.url}")
            snippet = " ".join(re.sub(r"<[^>]+>", "", h.snippet).split())
            if snippet:
                lines.append(f"   {snippet[:500]}")
        return untrusted_block(f"Web search results ({provider})", query, "\n".join(lines))

    return Tool(
        "web_search",
        "Search the web; returns titles, URLs and snippets (untrusted). Use web_fetch to read a result",
        schema(
            {
                "query": {"type": "string", "description": "what to search for"},
                "count": {"type": "integer", "description": "number of results, 1-20 (default 5)"},
            },
            ["query"],
        ),
        handler,
    )


def web_tools(web_cfg) -> dict[str, Tool]:
    """The web tools that can work with this config (web_search only with a provider)."""
    out = {"web_fetch": make_web_fetch(web_cfg)}
    provider = search_provider(web_cfg)
    if provider is not None:
        out["web_search"] = make_web_search(web_cfg, provider)
    else:
        log.info(
            "web_search is not offered: tools.web.search_provider = %r has no key or URL configured",
            web_cfg.search_provider,
        )
    return out
