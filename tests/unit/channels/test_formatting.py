"""Markdown → Telegram HTML / Slack mrkdwn / plain text (channels.formatting)."""

from __future__ import annotations

import random
import re
from html.parser import HTMLParser

import pytest

from channels.formatting import (
    markdown_to_plain,
    markdown_to_slack_mrkdwn,
    markdown_to_telegram_html,
)

TELEGRAM_TAGS = {"b", "i", "s", "u", "code", "pre", "a", "blockquote"}


class _Checker(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=False)
        self.stack: list[str] = []
        self.errors: list[str] = []

    def handle_starttag(self, tag, attrs):
        if tag not in TELEGRAM_TAGS:
            self.errors.append(f"unsupported tag {tag}")
        if "pre" in self.stack and tag != "code":
            self.errors.append(f"{tag} inside pre")
        self.stack.append(tag)

    def handle_endtag(self, tag):
        if not self.stack or self.stack[-1] != tag:
            self.errors.append(f"misnested </{tag}> with {self.stack}")
        else:
            self.stack.pop()


def well_formed(html_text: str) -> bool:
    # every & starts an entity, every < starts one of our tags
    if re.search(r"&(?!(?:amp|lt|gt|quot|#x27|#39);)", html_text):
        return False
    if re.search(r"<(?!/?(?:b|i|s|u|code|pre|a|blockquote)\b)", html_text):
        return False
    checker = _Checker()
    checker.feed(html_text)
    checker.close()
    return not checker.errors and not checker.stack


# ---------------------------------------------------------------------------------- Telegram


@pytest.mark.parametrize(
    "bad", ["<b><i>x</b></i>", "<b>x", "a & b", "a < b", "<pre><b>x</b></pre>", "<span>x</span>"]
)
def test_checker_rejects_malformed(bad):
    assert not well_formed(bad)


@pytest.mark.parametrize(
    "md, html",
    [
        ("plain text", "plain text"),
        ("a & b < c > d", "a &amp; b &lt; c &gt; d"),
        ("<script>alert(1)</script>", "&lt;script&gt;alert(1)&lt;/script&gt;"),
        ("**bold**", "<b>bold</b>"),
        ("__bold__", "<b>bold</b>"),
        ("*italic*", "<i>italic</i>"),
        ("_italic_", "<i>italic</i>"),
        ("~~gone~~", "<s>gone</s>"),
        ("`x < y && z`", "<code>x &lt; y &amp;&amp; z</code>"),
        ("``a ` b``", "<code>a ` b</code>"),
        ("`**not bold**`", "<code>**not bold**</code>"),
        ("*a **b** c*", "<i>a <b>b</b> c</i>"),
        ("**b *i* b**", "<b>b <i>i</i> b</b>"),
        ("snake_case_name and __init__", "snake_case_name and <b>init</b>"),
        ("my_var_name_x", "my_var_name_x"),
        ("2*3*4 = 24", "2*3*4 = 24"),
        ("5 * 3 * 2", "5 * 3 * 2"),
        ("a lone * star", "a lone * star"),
        ("**unclosed bold", "**unclosed bold"),
        ("*unclosed italic", "*unclosed italic"),
        ("~~unclosed", "~~unclosed"),
        ("`unclosed code", "<code>unclosed code</code>"),  # closed as code (issue 27)
        ("**bold *both** it*", "<b>bold *both</b> it*"),
        ("[site](https://ex.com/a?b=1&c=2)", '<a href="https://ex.com/a?b=1&amp;c=2">site</a>'),
        ('[q](https://ex.com/"x")', '<a href="https://ex.com/&quot;x&quot;">q</a>'),
        ("[**bold** link](https://x.y)", '<a href="https://x.y"><b>bold</b> link</a>'),
        (
            "[wiki](https://en.wikipedia.org/wiki/Foo_(bar))",
            '<a href="https://en.wikipedia.org/wiki/Foo_(bar)">wiki</a>',
        ),
        ("see https://x.com/_a_b_ ok", "see https://x.com/_a_b_ ok"),
        ("# Title", "<b>Title</b>"),
        ("### Sub **title** ###", "<b>Sub title</b>"),
        ("> quoted *text*\n> more", "<blockquote>quoted <i>text</i>\nmore</blockquote>"),
        ("- one\n- two\n* three\n  + nested", "• one\n• two\n• three\n  • nested"),
        ("1. first\n2. second", "1. first\n2. second"),
        (
            "```python\nx = a < b and **c**\n```",
            '<pre><code class="language-python">x = a &lt; b and **c**</code></pre>',
        ),
        ("```\nplain\n```", "<pre><code>plain</code></pre>"),
        ("~~~sh\necho <hi>\n~~~", '<pre><code class="language-sh">echo &lt;hi&gt;</code></pre>'),
        ("```\nunclosed *x*", "<pre><code>unclosed *x*</code></pre>"),
        (
            "before\n```js\nf()\n```\nafter",
            'before\n<pre><code class="language-js">f()</code></pre>\nafter',
        ),
    ],
)
def test_telegram_html(md, html):
    out = markdown_to_telegram_html(md)
    assert out == html
    assert well_formed(out), out


def test_telegram_code_language_is_sanitised():
    out = markdown_to_telegram_html('```py"><b>x\ncode\n```')
    assert well_formed(out), out
    assert out.startswith('<pre><code class="language-pybx">')


def test_telegram_paragraphs_preserved():
    md = "First paragraph.\n\nSecond **one**.\n\n- a\n- b"
    assert markdown_to_telegram_html(md) == "First paragraph.\n\nSecond <b>one</b>.\n\n• a\n• b"


_PIECES = [
    "*",
    "**",
    "_",
    "__",
    "~~",
    "`",
    "```",
    "[",
    "](",
    ")",
    "<",
    ">",
    "&",
    "#",
    "> ",
    "- ",
    "word",
    "snake_case",
    " ",
    "\n",
    "\n\n",
    "https://x.y/_z_",
    "[t](http://u.v)",
    '"',
    "'",
]


@pytest.mark.parametrize("seed", range(30))
def test_telegram_html_always_well_formed(seed):
    rng = random.Random(seed)
    for _ in range(50):
        md = "".join(rng.choice(_PIECES) for _ in range(rng.randint(1, 60)))
        out = markdown_to_telegram_html(md)
        assert well_formed(out), (md, out)


# ---------------------------------------------------------------------------------- Slack


@pytest.mark.parametrize(
    "md, mrkdwn",
    [
        ("plain", "plain"),
        ("**bold**", "*bold*"),
        ("__bold__", "*bold*"),
        ("*italic*", "_italic_"),
        ("_italic_", "_italic_"),
        ("~~strike~~", "~strike~"),
        ("a & b < c > d", "a &amp; b &lt; c &gt; d"),
        ("<!channel> hi", "<!channel> hi"),  # Slack markup the model writes passes (issue 18)
        ("[text](https://ex.com/a?b=1&c=2)", "<https://ex.com/a?b=1&amp;c=2|text>"),
        ("[a|b](https://ex.com)", "<https://ex.com|a¦b>"),
        ("see https://ex.com/x now", "see <https://ex.com/x> now"),
        ("# Heading", "*Heading*"),
        ("## **Bold** heading", "*Bold heading*"),
        ("`code **x**`", "`code **x**`"),
        ("```\nfn main() { *x* }\n```", "```\nfn main() { *x* }\n```"),
        ("```rust\nlet a = 1;\n```", "```\nlet a = 1;\n```"),
        ("> quote **b**", "> quote *b*"),
        ("- item\n- item2", "• item\n• item2"),
        ("snake_case_name", "snake_case_name"),
        ("**unbalanced", "**unbalanced"),
    ],
)
def test_slack_mrkdwn(md, mrkdwn):
    assert markdown_to_slack_mrkdwn(md) == mrkdwn


def test_slack_code_is_escaped_but_unchanged_otherwise():
    assert markdown_to_slack_mrkdwn("`a < b`") == "`a &lt; b`"
    assert (
        markdown_to_slack_mrkdwn("```\nif a < b && c:\n```")
        == "```\nif a &lt; b &amp;&amp; c:\n```"
    )


# ---------------------------------------------------------------------------------- plain


@pytest.mark.parametrize(
    "md, plain",
    [
        ("**bold** and *it* and ~~s~~", "bold and it and s"),
        ("[text](https://ex.com)", "text (https://ex.com)"),
        ("[https://ex.com](https://ex.com)", "https://ex.com"),
        ("# Title\nbody", "Title\nbody"),
        ("`a < b`", "a < b"),
        ("```py\nx = **1** < 2\n```", "x = **1** < 2"),
        ("- a\n- b", "• a\n• b"),
        ("a & b <c>", "a & b <c>"),
        ("snake_case *lone", "snake_case *lone"),
    ],
)
def test_plain(md, plain):
    assert markdown_to_plain(md) == plain


def test_empty_inputs():
    assert markdown_to_telegram_html("") == ""
    assert markdown_to_slack_mrkdwn("") == ""
    assert markdown_to_plain("") == ""


# ---------------------------------------------------------------------------- Signal styles


def _styled(text: str, styles: list[str]) -> list[tuple[str, str]]:
    """(styled substring, STYLE) for each range, read back through UTF-16 like Signal does."""
    u16 = text.encode("utf-16-le")
    out = []
    for st in styles:
        start, length, style = st.split(":")
        a, n = int(start), int(length)
        out.append((u16[2 * a : 2 * (a + n)].decode("utf-16-le"), style))
    return sorted(out)


@pytest.mark.parametrize(
    "md, spans",
    [
        ("**bold** and _it_", [("bold", "BOLD"), ("it", "ITALIC")]),
        ("***both***", [("both", "BOLD"), ("both", "ITALIC")]),
        ("**outer *inner* end**", [("inner", "ITALIC"), ("outer inner end", "BOLD")]),
        ("😀😀 **x😀y** `c`", [("c", "MONOSPACE"), ("x😀y", "BOLD")]),
        ("# Heading **not nested**", [("Heading not nested", "BOLD")]),
        ("```py\nprint('**no**')\n```", [("print('**no**')", "MONOSPACE")]),
        (
            "[**docs**](https://example.com/a_b) ~~old~~",
            [("docs", "BOLD"), ("old", "STRIKETHROUGH")],
        ),
        ("2 * 3 * 4 and snake_case_name", []),
        ("> **quoted**", [("quoted", "BOLD")]),
        ("marker \ue010chars\ue011 are dropped", []),
    ],
)
def test_markdown_to_signal_styles(md, spans):
    from channels.formatting import markdown_to_signal

    text, styles = markdown_to_signal(md)
    assert text == markdown_to_plain(md.replace("\ue010", "").replace("\ue011", "")).strip("\n")
    assert _styled(text, styles) == sorted(spans)


@pytest.mark.parametrize(
    "md",
    [
        "[**docs**](https://example.com/a_b) and <https://example.com/x>",
        "# Heading\n\n> quote\n\n- item\n  - nested\n\n---\n\n```py\ncode\n```",
        "`code` ~~gone~~ *it* __b__ 2 * 3 snake_case",
    ],
)
def test_signal_rendering_never_grows_a_chunk(md):
    """The Signal adapter relies on this: a chunk within the limit stays within it."""
    from channels.formatting import markdown_to_signal

    assert len(markdown_to_signal(md)[0]) <= len(md)


@pytest.mark.parametrize(
    "md, out",
    [
        ("hi <@U123ABC>", "hi <@U123ABC>"),
        ("ping <!here> now", "ping <!here> now"),
        ("see <https://example.com/a?b=1|the page>", "see <https://example.com/a?b=1|the page>"),
        ("in <#C0123|general>", "in <#C0123|general>"),
        ("mail <mailto:a@b.c|me>", "mail <mailto:a@b.c|me>"),
        # the twin: anything else in angle brackets is still escaped, and code stays literal
        ("a <b> c", "a &lt;b&gt; c"),
        ("`<@U123ABC>`", "`&lt;@U123ABC&gt;`"),
        ("<https://x.y>", "<https://x.y>"),
    ],
)
def test_slack_markup_written_by_the_model_reaches_slack(md, out):
    assert markdown_to_slack_mrkdwn(md) == out


def test_signal_keeps_the_blank_line_before_a_code_block_and_its_offsets():
    from channels.formatting import markdown_to_signal

    text, styles = markdown_to_signal("para\n\n```\ncode\n```\nend")
    assert text == "para\n\ncode\nend"
    start, length, style = styles[0].split(":")
    assert text[int(start) : int(start) + int(length)] == "code" and style == "MONOSPACE"
    assert markdown_to_plain("para\n\n```\ncode\n```") == "para\n\ncode"
