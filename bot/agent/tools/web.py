"""``web_fetch`` and ``web_search``.

web_fetch fetches through ``bot.net``: the host judged as the HTTP client
connects to it, resolved once, every address checked against ``tools.web.allow_private_hosts``,
the connection pinned to the checked addresses, at every redirect hop.  Only text is read.

HTML becomes Markdown with trafilatura when it is installed (``pip install
'chela[web]'``), else with a small built-in converter that keeps headings, links, lists
and paragraphs.  The result is fenced as untrusted data (``bot.rules.untrusted``).
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
from dataclasses import dataclass
from html.parser import HTMLParser
from urllib.parse import parse_qs, urlsplit

import aiohttp

from bot import net
from bot.rules.untrusted import untrusted_block

from .base import Tool, ToolContext, ToolError, arg_int, arg_str, schema
from .webpage import decode_body, html_to_markdown

log = logging.getLogger(__name__)

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
        self.rules = net.HostRules(web_cfg.allow_private_hosts)
        self.limits = net.Limits(
            max_bytes=web_cfg.max_bytes,
            timeout=web_cfg.timeout_seconds,
            max_redirects=web_cfg.max_redirects,
            overflow="cut",
        )
        self.headers = {
            "User-Agent": web_cfg.user_agent,
            "Accept": "text/html,application/xhtml+xml,text/plain;q=0.9,*/*;q=0.5",
            "Accept-Encoding": "gzip, deflate",
        }

    async def fetch(self, url: str) -> Page:
        try:
            got = await net.fetch_url(
                url, self.rules, self.limits, headers=self.headers, check_head=self._text_only
            )
        except net.FetchError as e:
            raise FetchError(str(e)) from None
        return _page(got)

    def _text_only(self, head: net.Head) -> None:
        """web_fetch reads text; anything else is refused before its body is read."""
        ctype = head.content_type
        if not ctype or ctype.startswith(TEXT_TYPES) or ctype.endswith(("+xml", "+json")):
            return
        declared = head.content_length
        if declared is not None and declared > self.limits.max_bytes:
            raise FetchError(f"too large: {declared} bytes of {ctype}; only text pages are read")
        raise FetchError(f"unsupported content type {ctype!r}: web_fetch reads text and HTML pages")


def _page(got: net.Fetched) -> Page:
    ctype = got.head.content_type
    text, charset = decode_body(got.body, got.head.charset, ctype)
    title = ""
    if "html" in ctype or (not ctype and "<html" in text[:2000].lower()):
        title, text = html_to_markdown(text, got.url)
    elif "json" in ctype:
        with contextlib.suppress(ValueError):
            text = json.dumps(json.loads(text), indent=2, ensure_ascii=False)
    return Page(
        url=got.url,
        status=got.head.status,
        content_type=ctype or "unknown",
        charset=charset,
        text=text,
        title=title,
        truncated_bytes=got.truncated,
    )


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
        headers = {"User-Agent": c.user_agent, "Accept": "application/json"}
        try:
            async with net.endpoint_session(c.timeout_seconds, headers) as s:
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
