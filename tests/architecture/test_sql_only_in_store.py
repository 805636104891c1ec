"""Only bot/store/ speaks SQL (ARCHITECTURE.md: ``store/`` is SQLite; the UI "reads through
the store").

Every .py file under bot/ and channels/ outside bot/store/ is parsed; a call of
``.execute(`` / ``.executemany(`` / ``.executescript(`` on a database must not be there.
A call counts as one on a database when the method is ``executemany``/``executescript``
(nothing but a DB-API connection or cursor has those), or it is ``execute`` and any of:
the receiver is named like a connection or cursor (``db``, ``conn``, ``cursor``, ``store.db``
...), the first argument is SQL text, or the file imports a SQLite driver.  A tool
registry's ``registry.execute(name, args, ctx)`` is none of these.

A query the product needs is a named, typed method of a Store mixin (e.g. bot/store/views.py
for the Control UI).  Ratchet: ALLOWED may only shrink, each entry with its reason."""

from __future__ import annotations

import ast
import functools
import re

import pytest
from tests.architecture import tree

STORE = "bot/store/"

# file -> why it may run SQL itself.  MAY ONLY SHRINK.
ALLOWED: dict[str, str] = {}

METHODS = frozenset({"execute", "executemany", "executescript"})
ALWAYS_SQL = frozenset({"executemany", "executescript"})
DB_NAMES = frozenset({"db", "conn", "connection", "con", "cur", "cursor", "sqlite", "database"})
DRIVERS = frozenset({"sqlite3", "aiosqlite", "apsw", "sqlalchemy"})
SQL_TEXT = re.compile(
    r"^\s*(SELECT|INSERT|UPDATE|DELETE|REPLACE|CREATE|DROP|ALTER|PRAGMA|WITH|BEGIN|COMMIT"
    r"|ROLLBACK|SAVEPOINT|RELEASE|VACUUM|ANALYZE|ATTACH|DETACH)\b",
    re.IGNORECASE,
)


def _names_a_database(receiver: ast.AST) -> bool:
    """``db``, ``self.db``, ``store.db``, ``conn``, ``self._conn``, ``sqlite3.connect(..)``,
    ``x.cursor()`` ..."""
    if isinstance(receiver, ast.Call):
        last = tree.dotted(receiver.func).rsplit(".", 1)[-1]
        return last in ("connect", "cursor")
    last = tree.dotted(receiver).rsplit(".", 1)[-1].lstrip("_").lower()
    return last in DB_NAMES or last.endswith(("_db", "_conn", "_cursor"))


def _text_of(arg: ast.AST) -> str:
    """The leading literal text of a str constant, f-string or ``+`` concatenation."""
    if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
        return arg.value
    if isinstance(arg, ast.JoinedStr) and arg.values:
        return _text_of(arg.values[0])
    if isinstance(arg, ast.BinOp) and isinstance(arg.op, ast.Add):
        return _text_of(arg.left)
    return ""


def _imports_a_driver(nodes: tuple[ast.AST, ...]) -> bool:
    for node in nodes:
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            names = [node.module or ""]
        else:
            continue
        if any(n.split(".", 1)[0] in DRIVERS for n in names):
            return True
    return False


def sql_calls(source: str) -> list[str]:
    """The database ``execute*`` calls in ``source``, as ``line: receiver.method(``."""
    nodes = tree.walk(source)
    driver = _imports_a_driver(nodes)
    found: list[tuple[int, str]] = []
    for node in nodes:
        if not (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in METHODS
        ):
            continue
        receiver, method = node.func.value, node.func.attr
        first = _text_of(node.args[0]) if node.args else ""
        if method in ALWAYS_SQL or driver or _names_a_database(receiver) or SQL_TEXT.match(first):
            found.append((node.lineno, f"{node.lineno}: {tree.dotted(receiver)}.{method}("))
    return [call for _, call in sorted(found)]


@functools.cache  # one scan per session: several tests read it, none changes it
def scan() -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for p in tree.product_files():
        rel = p.relative_to(tree.ROOT).as_posix()
        if rel.startswith(STORE):
            continue
        calls = sql_calls(p.read_text(encoding="utf-8"))
        if calls:
            out[rel] = calls
    return out


def test_no_sql_outside_the_store():
    stray = {f: calls for f, calls in scan().items() if f not in ALLOWED}
    assert not stray, (
        "these files run SQL themselves; only bot/store/ speaks SQL: give the query a named,"
        f" typed method on a Store mixin and call that: {stray}"
    )


def test_the_allow_list_only_shrinks():
    """An entry whose file no longer runs SQL must leave the list."""
    found = scan()
    stale = [f for f in ALLOWED if f not in found]
    assert not stale, f"remove from ALLOWED (they no longer run SQL): {stale}"


def test_every_allowed_entry_has_a_reason():
    assert all(len(why) > 20 for why in ALLOWED.values())
    assert not any(f.startswith(STORE) for f in ALLOWED)


def test_the_control_ui_is_not_on_the_list():
    for f in ("bot/ui/api/transcript.py", "bot/ui/api/channels.py", "bot/ui/hub.py"):
        assert f not in ALLOWED and f not in scan()


@pytest.mark.parametrize(
    "snippet",
    [
        "def f(store, key):\n    return store.db.execute('SELECT 1 FROM sessions').fetchone()\n",
        "def f(store, q, args):\n    return store.db.execute(q, args)\n",  # SQL in a variable
        "def f(self):\n    self._conn.execute(self.sql)\n",
        "def f(ctx):\n    db = ctx.store.db\n    return list(db.execute('SELECT channel FROM x'))\n",
        "def f(x, rows):\n    x.executemany('INSERT INTO t VALUES (?)', rows)\n",
        "def f(x):\n    x.executescript('DROP TABLE t')\n",
        "def f(cur):\n    cur.execute('x')\n",
        "def f(handle, k):\n    handle.execute(f'SELECT * FROM t WHERE k={k}')\n",
        "def f(handle, k):\n    handle.execute('UPDATE t SET a=1 ' + k)\n",
        "import sqlite3\nc = sqlite3.connect('x')\nc.execute(sql)\n",
        "from sqlite3 import connect\nh = connect('x')\nh.execute(sql)\n",
        "import sqlite3\nsqlite3.connect('x').execute(sql)\n",
    ],
)
def test_the_scanner_sees_sql(snippet):
    assert sql_calls(snippet)


@pytest.mark.parametrize(
    "snippet",
    [
        "async def f(t, name, args, ctx):\n    return await t.registry.execute(name, args, ctx)\n",
        "async def f(reg, ctx):\n    return await reg.execute('exec', {'command': 'ls'}, ctx)\n",
        "def f(store, key):\n    return store.transcript_rows(key)\n",
        "def f(pool, job):\n    pool.execute(job)\n",
        "'''store.db.execute(\"SELECT 1\")'''\n",  # prose about SQL is not SQL
    ],
)
def test_twin_the_scanner_passes_other_execute_calls(snippet):
    assert sql_calls(snippet) == []
