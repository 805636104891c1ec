"""The Control UI's files as shipped (SPEC §16.1, §16.3, §16.6): within the size budget, no
inline script, style attribute or event-handler attribute anywhere (the CSP forbids them),
content never parsed as HTML by the scripts, every module import resolvable, and the files
are package data (pyproject)."""

from __future__ import annotations

import re
import tomllib
from fnmatch import fnmatch
from html.parser import HTMLParser
from pathlib import Path

import bot.ui

STATIC = Path(bot.ui.__file__).resolve().parent / "static"
ROOT = Path(__file__).resolve().parents[3]
FILES = sorted(p for p in STATIC.rglob("*") if p.is_file())
SCRIPTS = [p for p in FILES if p.suffix == ".js"]


class Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.found: list[tuple[str, dict[str, str | None]]] = []
        self.script_text = ""
        self._in_script = False

    def handle_starttag(self, tag, attrs):
        self.found.append((tag, dict(attrs)))
        self._in_script = tag == "script"

    def handle_endtag(self, tag):
        self._in_script = False

    def handle_data(self, data):
        if self._in_script:
            self.script_text += data.strip()


def test_all_static_files_fit_the_budget():
    assert 0 < sum(p.stat().st_size for p in FILES) <= 150 * 1024
    assert [p.name for p in FILES if p.suffix == ".css"] == ["app.css"]  # one CSS file


def test_the_page_has_no_inline_script_style_or_handler():
    parser = Tags()
    parser.feed((STATIC / "index.html").read_text())
    assert parser.script_text == ""
    for tag, attrs in parser.found:
        assert tag != "style"
        assert "style" not in attrs
        assert not [a for a in attrs if a.lower().startswith("on")], (tag, attrs)
        if tag == "script":
            assert attrs.get("type") == "module" and attrs.get("src")


def test_scripts_never_parse_content_as_html():
    banned = re.compile(
        r"innerHTML|outerHTML|insertAdjacentHTML|document\.write|\beval\(|new Function|"
        r"setAttribute\(\s*[\"']on|\.style\.|createContextualFragment|DOMParser"
    )
    for path in SCRIPTS:
        code = "\n".join(
            line for line in path.read_text().splitlines() if not line.lstrip().startswith("//")
        )
        assert not banned.search(code), path.name


def test_every_module_import_resolves():
    pattern = re.compile(r"""(?:from\s+|import\(\s*)["'](\.{1,2}/[^"'`$]+)["']""")
    for path in SCRIPTS:
        for target in pattern.findall(path.read_text()):
            assert (path.parent / target).resolve().is_file(), (path.name, target)
    pages = re.findall(r'\["([a-z]+)", "[A-Z][a-z]+"\]', (STATIC / "js" / "main.js").read_text())
    assert len(pages) == 10  # the ten pages of §16.6, each its own module
    for page in pages:
        assert (STATIC / "js" / f"page-{page}.js").is_file(), page
    html = (STATIC / "index.html").read_text()
    for ref in re.findall(r'(?:src|href)="([^":]+)"', html):
        assert (STATIC / ref).is_file(), ref


def test_the_files_are_package_data():
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())
    patterns = data["tool"]["setuptools"]["package-data"]["bot"]
    for path in FILES:
        rel = path.relative_to(STATIC.parents[1]).as_posix()  # ui/static/...
        assert any(fnmatch(rel, p) and rel.count("/") == p.count("/") for p in patterns), rel
