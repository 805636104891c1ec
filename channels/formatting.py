"""Markdown → platform text (pure functions).

The core hands adapters Markdown chunks (already split by ``bot.rules.replies.chunk_markdown``);
each adapter renders a chunk with one of these:

- :func:`markdown_to_telegram_html` — Telegram Bot API ``parse_mode=HTML``;
- :func:`markdown_to_slack_mrkdwn` — Slack mrkdwn;
- :func:`markdown_to_signal` — Signal: plain text plus signal-cli text-style ranges;
- :func:`markdown_to_plain` — plain text.

The renderers share one small parser: fenced code blocks are found line by line; other lines
are headings, quotes, list items or paragraphs; inline code spans, links and bare URLs are
protected first, then emphasis is matched recursively, so every emphasis span is emitted as
a whole (open and close tag together) and the output is always well-formed.  Markers with no
partner are left as literal text.
"""

from __future__ import annotations

import dataclasses
import html
import re
from dataclasses import dataclass
from collections.abc import Callable
from channels.spans import same_link, unterminated_end

__all__ = [
    "markdown_to_plain",
    "markdown_to_signal",
    "markdown_to_slack_mrkdwn",
    "markdown_to_telegram_html",
    "markdown_to_whatsapp",
]


# --------------------------------------------------------------------------------------------
# Blocks

_FENCE_OPEN_RE = re.compile(r"^ {0,3}(`{3,}|~{3,})(.*)$")
_FENCE_CLOSE_RE = re.compile(r"^ {0,3}(`{3,}|~{3,})[ \t]*$")
_HEADING_RE = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.*?)(?:[ \t]+#+)?[ \t]*$")
_QUOTE_RE = re.compile(r"^ {0,3}>[ \t]?(.*)$")
_BULLET_RE = re.compile(r"^([ \t]*)[-*+][ \t]+(.*)$")
_HR_RE = re.compile(r"^ {0,3}([-*_])(?:[ \t]*\1){2,}[ \t]*$")


@dataclass
class _Code:
    lang: str
    text: str


@dataclass
class _Lines:
    lines: list[str]


def _blocks(md: str) -> list[_Code | _Lines]:
    out: list[_Code | _Lines] = []
    prose: list[str] = []
    code: list[str] | None = None
    fence = ""
    lang = ""
    for line in md.replace("\r\n", "\n").split("\n"):
        if code is None:
            m = _FENCE_OPEN_RE.match(line)
            if m and not (m.group(1)[0] == "`" and "`" in m.group(2)):
                if prose:
                    out.append(_Lines(prose))
                    prose = []
                code, fence = [], m.group(1)
                info = m.group(2).strip()
                lang = info.split()[0] if info else ""
            else:
                prose.append(line)
        else:
            m = _FENCE_CLOSE_RE.match(line)
            if m and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence):
                out.append(_Code(lang, "\n".join(code)))
                code = None
            else:
                code.append(line)
    if code is not None:  # unclosed fence: the rest is code
        out.append(_Code(lang, "\n".join(code)))
    if prose:
        out.append(_Lines(prose))
    return out


# --------------------------------------------------------------------------------------------
# Inline


@dataclass(frozen=True)
class _Style:
    escape: Callable[[str], str]
    bold: Callable[[str], str]
    italic: Callable[[str], str]
    strike: Callable[[str], str]
    code: Callable[[str], str]  # raw content → rendered
    link: Callable[[str, str], str]  # (rendered text, raw url) → rendered
    url: Callable[[str], str]  # bare raw url → rendered
    native: re.Pattern[str] | None = None  # the platform's own markup, passed through as written


_PH_OPEN, _PH_CLOSE = "\ue000", "\ue001"
_PH_RE = re.compile(_PH_OPEN + r"(\d+)" + _PH_CLOSE)
_BACKTICKS_RE = re.compile(r"`+")
_LINK_RE = re.compile(
    r"\[(?P<text>[^\[\]\n]+)\]\(\s*<?(?P<url>[^\s<>()]+(?:\([^\s<>()]*\)[^\s<>()]*)*)>?"
    r"(?:\s+\"[^\"\n]*\")?\s*\)"
)
_AUTOLINK_RE = re.compile(r"<(?P<url>(?:https?|mailto):[^\s<>]+)>")
_BARE_URL_RE = re.compile(r"(?<![\w/])https?://[^\s<>\[\]]*[^\s<>\[\].,;:!?'\")*~]")

# closing-delimiter finders: (regex, length)
_CLOSERS = {
    "**": re.compile(r"(?<=\S)\*\*(?!\*)"),
    "__": re.compile(r"(?<=\S)__(?!\w)"),
    "~~": re.compile(r"(?<=\S)~~"),
    "*": re.compile(r"(?<=[^\s*])\*(?![\w*])"),
    "_": re.compile(r"(?<=\S)_(?!\w)"),
}


def _protect(text: str, style: _Style, saved: list[str]) -> str:
    """Replace code spans, links and URLs with placeholders (rendered into ``saved``)."""

    def hold(rendered: str) -> str:
        saved.append(rendered)
        return f"{_PH_OPEN}{len(saved) - 1}{_PH_CLOSE}"

    # code spans first: nothing inside them is markup
    out: list[str] = []
    pos = start = 0
    while True:
        m = _BACKTICKS_RE.search(text, pos)
        if not m:
            break
        run = m.group(0)
        c = re.compile(r"(?<!`)" + re.escape(run) + r"(?!`)").search(text, m.end())
        end = c.start() if c else unterminated_end(text, m.end())
        if end < 0:
            pos = m.end()
            continue
        content = text[m.end() : end].replace("\n", " ")
        if len(content) >= 2 and content[0] == " " and content[-1] == " " and content.strip():
            content = content[1:-1]
        out.append(text[start : m.start()])
        out.append(hold(style.code(content.rstrip() if c is None else content)))
        pos = start = c.end() if c else end
    out.append(text[start:])
    text = "".join(out)

    if style.native is not None:
        text = style.native.sub(lambda m: hold(m.group(0)), text)
    text = _LINK_RE.sub(
        lambda m: hold(style.link(_emphasis(m.group("text"), style), m.group("url"))), text
    )
    text = _AUTOLINK_RE.sub(lambda m: hold(style.url(m.group("url"))), text)
    return _BARE_URL_RE.sub(lambda m: hold(style.url(m.group(0))), text)


def _can_open(s: str, i: int, d: str) -> bool:
    after = s[i + len(d)] if i + len(d) < len(s) else ""
    if not after or after.isspace():
        return False
    before = s[i - 1] if i > 0 else ""
    # no emphasis inside words (snake_case, 2*3*4)
    if d in ("*", "_", "__") and before and (before.isalnum() or before == "_"):
        return False
    return not (d == "*" and after == "*")


def _emphasis(s: str, style: _Style) -> str:
    out: list[str] = []
    i = 0
    n = len(s)
    failed: dict[str, int] = {}  # delimiter → position from which no closer exists
    while i < n:
        ch = s[i]
        if ch in "*_~":
            two = s[i : i + 2]
            for d in ((two,) if two in ("**", "__", "~~") else ()) + ((ch,) if ch != "~" else ()):
                if not _can_open(s, i, d):
                    continue
                start = i + len(d)
                if failed.get(d, n + 1) <= start:
                    continue
                m = _CLOSERS[d].search(s, start + 1)  # content is never empty
                if not m:
                    failed[d] = min(failed.get(d, n + 1), start)
                    continue
                inner = _emphasis(s[start : m.start()], style)
                wrap = {
                    "**": style.bold,
                    "__": style.bold,
                    "~~": style.strike,
                    "*": style.italic,
                    "_": style.italic,
                }[d]
                out.append(wrap(inner))
                i = m.start() + len(d)
                break
            else:
                # a run of delimiter characters that opened nothing stays literal as a whole
                j = i
                while j < n and s[j] == ch:
                    j += 1
                out.append(style.escape(s[i:j]))
                i = j
            continue
        j = i
        while j < n and s[j] not in "*_~":
            j += 1
        out.append(style.escape(s[i:j]))
        i = j
    return "".join(out)


def _inline(text: str, style: _Style) -> str:
    text = text.replace(_PH_OPEN, "").replace(_PH_CLOSE, "")
    saved: list[str] = []
    rendered = _emphasis(_protect(text, style, saved), style)
    # placeholders nest (a link text holding a code span): resolve until none is left
    while _PH_OPEN in rendered:
        rendered = _PH_RE.sub(lambda m: saved[int(m.group(1))], rendered)
    return rendered


# --------------------------------------------------------------------------------------------
# Renderers


def _render(
    md: str,
    style: _Style,
    *,
    code_block: Callable[[_Code], str],
    heading: Callable[[str], str],
    quote: Callable[[list[str]], str],
    bullet: str = "• ",
    hr: str = "———",
) -> str:
    parts: list[str] = []
    heading_style = dataclasses.replace(style, bold=lambda t: t)
    for block in _blocks(md or ""):
        if isinstance(block, _Code):
            parts.append(code_block(block))
            continue
        lines_out: list[str] = []
        quoted: list[str] = []

        def flush(lines_out: list[str] = lines_out, quoted: list[str] = quoted) -> None:
            if quoted:
                lines_out.append(quote([_inline(q, style) for q in quoted]))
                quoted.clear()

        for line in block.lines:
            q = _QUOTE_RE.match(line)
            if q:
                quoted.append(q.group(1))
                continue
            flush()
            h = _HEADING_RE.match(line)
            if h:
                # a heading is rendered bold as a whole: no bold nested inside it
                lines_out.append(heading(_inline(h.group(2), heading_style)))
                continue
            if _HR_RE.match(line):
                lines_out.append(hr)
                continue
            b = _BULLET_RE.match(line)
            if b:
                lines_out.append(b.group(1) + bullet + _inline(b.group(2), style))
                continue
            lines_out.append(_inline(line, style))
        flush()
        parts.append("\n".join(lines_out))
    return _join_blocks(parts)


def _join_blocks(parts: list[str]) -> str:
    # one line break between blocks; a part that ends with an empty line (the blank line
    # before a code block) keeps it, so plain text and Signal's style offsets stay right
    return "\n".join(parts).strip("\n")


# Telegram HTML ------------------------------------------------------------------------------


def _escape_amp_lt_gt(text: str) -> str:
    """The three characters both Telegram HTML and Slack mrkdwn need escaped, the same way."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


_tg_escape = _escape_amp_lt_gt


def _tg_href(url: str) -> str:
    return html.escape(url, quote=True)


_TG = _Style(
    escape=_tg_escape,
    bold=lambda t: f"<b>{t}</b>",
    italic=lambda t: f"<i>{t}</i>",
    strike=lambda t: f"<s>{t}</s>",
    code=lambda c: f"<code>{_tg_escape(c)}</code>",
    link=lambda t, u: f'<a href="{_tg_href(u)}">{t}</a>',
    url=_tg_escape,
)


def _tg_code_block(block: _Code) -> str:
    lang = re.sub(r"[^\w+#.\-]", "", block.lang)
    attr = f' class="language-{lang}"' if lang else ""
    return f"<pre><code{attr}>{_tg_escape(block.text)}</code></pre>"


def markdown_to_telegram_html(md: str) -> str:
    """Markdown → Telegram ``parse_mode=HTML`` (always well-formed, tags balanced)."""
    return _render(
        md,
        _TG,
        code_block=_tg_code_block,
        heading=lambda t: f"<b>{t}</b>",
        quote=lambda lines: "<blockquote>" + "\n".join(lines) + "</blockquote>",
    )


# Slack mrkdwn -------------------------------------------------------------------------------


slack_escape = _escape_amp_lt_gt


def _slack_url(url: str) -> str:
    return url.replace("&", "&amp;").replace("<", "%3C").replace(">", "%3E").replace("|", "%7C")


def slack_link(url: str, text: str = "") -> str:
    """``<url|text>`` with both parts made safe for mrkdwn (``text`` is raw, not rendered)."""
    return _slack_link(slack_escape(text), url)


def _slack_link(rendered_text: str, url: str) -> str:
    if same_link(rendered_text, url) or same_link(rendered_text, _slack_url(url)):
        return f"<{_slack_url(url)}>"  # the label is the URL: once
    return f"<{_slack_url(url)}|{rendered_text.replace('|', '¦')}>"


# Slack's own markup, as the model may write it: user/channel mentions (<@U123>, <#C123|x>),
# special mentions (<!here>, <!channel>, <!everyone>, <!subteam^S123>, <!date^…|…>) and
# labelled links (<https://x|label>, <mailto:a@b|label>).  Escaping them would kill them.
_SLACK_NATIVE = re.compile(
    r"<(?:[@#][UWCGS][A-Z0-9]{2,}(?:\|[^<>\n]*)?"
    r"|!(?:here|channel|everyone)(?:\|[^<>\n]*)?"
    r"|!(?:subteam|date)\^[^<>\n]+"
    r"|(?:https?|mailto):[^\s<>|]+\|[^<>\n]+)>"
)

_SLACK = _Style(
    escape=slack_escape,
    bold=lambda t: f"*{t}*",
    italic=lambda t: f"_{t}_",
    strike=lambda t: f"~{t}~",
    code=lambda c: f"`{slack_escape(c)}`",
    link=_slack_link,
    url=lambda u: f"<{_slack_url(u)}>",
    native=_SLACK_NATIVE,
)


def markdown_to_slack_mrkdwn(md: str) -> str:
    """Markdown → Slack mrkdwn.

    ``&``, ``<``, ``>`` are escaped everywhere (code included — Slack shows ``&lt;`` as ``<``
    inside code) except in the ``<url|text>`` links generated here, Slack markup the text
    already contains (mentions, ``<!here>``, labelled links) and the leading ``>`` of quote
    lines.  Code spans and blocks keep their backtick syntax and content.
    """
    return _render(
        md,
        _SLACK,
        code_block=lambda b: "```\n" + slack_escape(b.text) + "\n```",
        heading=lambda t: f"*{t}*" if t else "",
        quote=lambda lines: "\n".join("> " + line if line else ">" for line in lines),
    )


# Plain text ---------------------------------------------------------------------------------


def _plain_link(text: str, url: str) -> str:
    return url if same_link(text, url) else f"{text} ({url})"


_PLAIN = _Style(
    escape=lambda t: t,
    bold=lambda t: t,
    italic=lambda t: t,
    strike=lambda t: t,
    code=lambda c: c,
    link=_plain_link,
    url=lambda u: u,
)


def markdown_to_plain(md: str) -> str:
    """Markdown → plain text (Signal): markup removed, links as ``text (url)``, code kept."""
    return _render(
        md,
        _PLAIN,
        code_block=lambda b: b.text,
        heading=lambda t: t,
        quote=lambda lines: "\n".join("> " + line if line else ">" for line in lines),
    )


# Signal: plain text + style ranges ---------------------------------------------------------
#
# The renderer wraps each styled span in private-use marker characters (always balanced, as
# for the other renderers); _style_ranges then removes them and turns each span into
# signal-cli's "start:length:STYLE", counted in UTF-16 code units as Signal requires.

_SIG_STYLES = ("BOLD", "ITALIC", "STRIKETHROUGH", "MONOSPACE")
_SIG_OPEN = {style: chr(0xE010 + 2 * i) for i, style in enumerate(_SIG_STYLES)}
_SIG_CLOSE = {style: chr(0xE011 + 2 * i) for i, style in enumerate(_SIG_STYLES)}
_SIG_MARKERS = re.compile("[" + "".join(_SIG_OPEN.values()) + "".join(_SIG_CLOSE.values()) + "]")
_SIG_BY_CHAR = {
    **{c: (s, True) for s, c in _SIG_OPEN.items()},
    **{c: (s, False) for s, c in _SIG_CLOSE.items()},
}


def _sig(style: str) -> Callable[[str], str]:
    return lambda t: f"{_SIG_OPEN[style]}{t}{_SIG_CLOSE[style]}" if t else t


_SIGNAL = dataclasses.replace(
    _PLAIN,
    bold=_sig("BOLD"),
    italic=_sig("ITALIC"),
    strike=_sig("STRIKETHROUGH"),
    code=_sig("MONOSPACE"),
)


def _style_ranges(marked: str) -> tuple[str, list[str]]:
    out: list[str] = []
    ranges: list[str] = []
    open_at: dict[str, list[int]] = {s: [] for s in _SIG_STYLES}
    pos = 0  # UTF-16 code units so far
    for ch in marked:
        hit = _SIG_BY_CHAR.get(ch)
        if hit is None:
            out.append(ch)
            pos += 2 if ord(ch) > 0xFFFF else 1
            continue
        style, opening = hit
        if opening:
            open_at[style].append(pos)
        elif open_at[style]:
            start = open_at[style].pop()
            if pos > start:
                ranges.append(f"{start}:{pos - start}:{style}")
    return "".join(out), ranges


def markdown_to_signal(md: str) -> tuple[str, list[str]]:
    """Markdown → (plain text, text styles) for signal-cli's ``send``.

    The text is :func:`markdown_to_plain`'s; bold (and headings), italics, strikethrough and
    code become ``"start:length:STYLE"`` ranges in UTF-16 code units.
    """
    marked = _render(
        _SIG_MARKERS.sub("", md or ""),
        _SIGNAL,
        code_block=lambda b: _sig("MONOSPACE")(b.text),
        heading=_sig("BOLD"),
        quote=lambda lines: "\n".join("> " + line if line else ">" for line in lines),
    )
    return _style_ranges(marked.strip("\n"))


# WhatsApp: *bold* _italic_ ~strike~ `code` and ``` blocks; links as text (url) -------------
_WA = dataclasses.replace(_PLAIN, bold="*{}*".format, italic="_{}_".format, strike="~{}~".format)


def markdown_to_whatsapp(md: str) -> str:
    """Markdown → WhatsApp's own text markup (headings bold, quotes kept, code as typed)."""
    return _render(
        md,
        dataclasses.replace(_WA, code="`{}`".format),
        code_block=lambda b: "```\n" + b.text + "\n```",
        heading=lambda t: f"*{t}*" if t else "",
        quote=lambda lines: "\n".join("> " + line if line else ">" for line in lines),
    )
