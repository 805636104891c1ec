"""Built-in tools, the registry, scrubbing and the text tool protocol (no LLM involved)."""

from __future__ import annotations

import asyncio
import logging
import os
import time
from pathlib import Path

import pytest

from channels.redact import scrub
from bot.rules.textproto import ParsedCall, format_tool_results, parse_tool_calls, split_reasoning
from bot.agent.tools import ExecPolicy, ToolContext, build_registry
from bot.agent.tools.exec_tool import check_allowlisted
from bot.memory import MemoryIndex
from bot.prompt.context import ToolSpec
from tests.integration.test_sandbox import PY, require_sandbox

ALL = [
    "read",
    "write",
    "edit",
    "exec",
    "memory_search",
    "memory_get",
    "message",
    "session_status",
    "sessions_spawn",
    "cron",
]


@pytest.fixture
def ws(tmp_path):
    w = tmp_path / "ws"
    w.mkdir()
    return w


@pytest.fixture
def reg():
    return build_registry(ALL)


def ctx_for(ws: Path, **kw) -> ToolContext:
    kw.setdefault("exec_policy", ExecPolicy("allowlist", ["ls", "cat", "echo", "sleep", "sh"], 5))
    return ToolContext(
        file_root=ws, session_key="agent:main:main", agent_id="main", media_dir=ws / "m", **kw
    )


# --------------------------------------------------------------------------------------
# registry


def test_registry_basics(reg, caplog):
    assert reg.names() == ALL
    specs = reg.specs()
    assert all(isinstance(s, ToolSpec) for s in specs)
    for s in specs:
        assert s.summary and "\n" not in s.summary and len(s.summary) <= 160
        assert s.parameters["type"] == "object"
    tools = reg.openai_tools()
    assert tools[0]["type"] == "function" and tools[0]["function"]["name"] == "read"
    assert reg.get("exec").name == "exec" and reg.get("nope") is None
    with caplog.at_level(logging.WARNING):
        r2 = build_registry(["read", "bogus", "read"])
    assert r2.names() == ["read"]
    assert "bogus" in caplog.text
    assert reg.without("sessions_spawn").names() == [n for n in ALL if n != "sessions_spawn"]


async def test_execute_rejects_non_dict_args(reg, ws):
    assert (await reg.execute("read", ["a"], ctx_for(ws))).startswith("Error:")


# --------------------------------------------------------------------------------------
# read / write / edit


async def test_read_write_edit(reg, ws):
    ctx = ctx_for(ws)
    out = await reg.execute("write", {"path": "sub/dir/n.txt", "content": "one\ntwo\nthree\n"}, ctx)
    assert out.startswith("Wrote 14 bytes to sub/dir/n.txt")
    assert (ws / "sub/dir/n.txt").read_text() == "one\ntwo\nthree\n"
    assert await reg.execute("read", {"path": "sub/dir/n.txt"}, ctx) == "one\ntwo\nthree\n"
    sl = await reg.execute("read", {"path": "sub/dir/n.txt", "offset": 2, "limit": 1}, ctx)
    assert sl.startswith("two\n[... lines 2-2 of 3; continue with offset=3]")
    assert await reg.execute("read", {"path": "sub/dir/n.txt", "offset": 3}, ctx) == "three\n"
    out = await reg.execute(
        "edit", {"path": "sub/dir/n.txt", "old_text": "two", "new_text": "TWO"}, ctx
    )
    assert out.startswith("Edited")
    assert (ws / "sub/dir/n.txt").read_text() == "one\nTWO\nthree\n"


async def test_edit_errors(reg, ws):
    ctx = ctx_for(ws)
    (ws / "f.txt").write_text("a a a")
    missing = await reg.execute("edit", {"path": "f.txt", "old_text": "b", "new_text": "c"}, ctx)
    assert missing.startswith("Error: old_text was not found")
    amb = await reg.execute("edit", {"path": "f.txt", "old_text": "a", "new_text": "c"}, ctx)
    assert amb.startswith("Error: old_text occurs 3 times")
    ok = await reg.execute(
        "edit", {"path": "f.txt", "old_text": "a", "new_text": "c", "replace_all": True}, ctx
    )
    assert "replaced 3 occurrences" in ok
    assert (ws / "f.txt").read_text() == "c c c"
    nofile = await reg.execute("edit", {"path": "zz.txt", "old_text": "a", "new_text": "b"}, ctx)
    assert nofile.startswith("Error: file not found")


async def test_read_errors(reg, ws):
    ctx = ctx_for(ws)
    assert (await reg.execute("read", {"path": "nope.txt"}, ctx)).startswith(
        "Error: file not found"
    )
    assert (await reg.execute("read", {}, ctx)).startswith(
        "Error: missing required argument 'path'"
    )
    (ws / "d").mkdir()
    assert "directory" in await reg.execute("read", {"path": "d"}, ctx)


@pytest.mark.parametrize(
    "path",
    ["../x", "../../etc/passwd", "/etc/passwd", "sub/../../x", "link/secret.txt", "filelink"],
)
async def test_path_escapes_refused(reg, ws, tmp_path, path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("TOPSECRET")
    (tmp_path / "x").write_text("TOPSECRET")
    (ws / "sub").mkdir()
    os.symlink(outside, ws / "link")
    os.symlink(outside / "secret.txt", ws / "filelink")
    ctx = ctx_for(ws)
    for tool, args in (
        ("read", {"path": path}),
        ("write", {"path": path, "content": "pwned"}),
        ("edit", {"path": path, "old_text": "TOPSECRET", "new_text": "pwned"}),
    ):
        out = await reg.execute(tool, args, ctx)
        assert out.startswith("Error:") and "outside the workspace" in out, (tool, out)
    assert (outside / "secret.txt").read_text() == "TOPSECRET"
    assert (tmp_path / "x").read_text() == "TOPSECRET"


async def test_paths_inside_allowed(reg, ws):
    ctx = ctx_for(ws)
    (ws / "a").mkdir()
    (ws / "a" / "f.txt").write_text("inner")
    os.symlink(ws / "a" / "f.txt", ws / "inlink")
    assert await reg.execute("read", {"path": "a/../a/f.txt"}, ctx) == "inner"
    assert await reg.execute("read", {"path": str(ws / "a" / "f.txt")}, ctx) == "inner"
    assert await reg.execute("read", {"path": "inlink"}, ctx) == "inner"


# --------------------------------------------------------------------------------------
# exec


@pytest.mark.parametrize(
    "command",
    [
        "ls; rm -rf /",
        "ls | cat",
        "ls && rm x",
        "echo `id`",
        "echo $(id)",
        "ls > out",
        "cat < f",
        "ls\nrm x",
        "ls & sleep 1",
    ],
)
def test_exec_allowlist_refuses_metacharacters(command):
    with pytest.raises(Exception) as ei:
        check_allowlisted(command, ["ls", "cat", "echo", "rm", "sleep"])
    assert "not allowed" in str(ei.value)


def test_exec_allowlist_parsing():
    assert check_allowlisted("echo 'a b' c", ["echo"]) == ["echo", "a b", "c"]
    with pytest.raises(Exception, match="not on the exec allow list"):
        check_allowlisted("rm -rf x", ["ls"])
    with pytest.raises(Exception, match="plain program name"):
        check_allowlisted("./ls", ["ls"])
    with pytest.raises(Exception, match="cannot parse"):
        check_allowlisted("echo 'unclosed", ["echo"])


@pytest.fixture(params=[True, False], ids=["sandbox", "no-sandbox"])
def sandboxed(request):
    """Each exec test runs sandboxed (the default; skipped without bwrap, failed on CI) and not."""
    if request.param:
        require_sandbox()
    return request.param


async def test_exec_allowlist_runs_in_workspace(reg, ws, sandboxed):
    (ws / "hello.txt").write_text("hi there")
    ctx = ctx_for(
        ws,
        exec_policy=ExecPolicy(
            "allowlist", ["ls", "cat", "echo", "sleep", "sh"], 5, sandbox=sandboxed
        ),
    )
    out = await reg.execute("exec", {"command": "cat hello.txt"}, ctx)
    assert out.startswith("hi there\n[exit code 0")
    out = await reg.execute("exec", {"command": "ls"}, ctx)
    assert "hello.txt" in out
    out = await reg.execute("exec", {"command": "cat missing.txt"}, ctx)
    assert "[exit code 1" in out
    out = await reg.execute("exec", {"command": "python3 -c 1"}, ctx)
    assert out.startswith("Error: command refused: 'python3' is not on the exec allow list")


async def test_exec_deny_policy(reg, ws, sandboxed):
    ctx = ctx_for(ws, exec_policy=ExecPolicy("deny", ["ls"], 5, sandbox=sandboxed))
    out = await reg.execute("exec", {"command": "ls"}, ctx)
    assert out.startswith("Error:") and "disabled" in out


async def test_exec_full_policy_uses_shell(reg, ws, sandboxed):
    ctx = ctx_for(ws, exec_policy=ExecPolicy("full", [], 5, sandbox=sandboxed))
    out = await reg.execute("exec", {"command": "echo one && echo two >&2; exit 3"}, ctx)
    assert out.startswith("one\ntwo\n[exit code 3")


async def test_exec_children_do_not_get_secret_variables(reg, ws, monkeypatch, sandboxed):
    monkeypatch.setenv("CHELA_TEST_BOT_TOKEN", "123:very-secret-token")
    monkeypatch.setenv("CHELA_TEST_PLAIN", "visible")
    ctx = ctx_for(
        ws,
        exec_policy=ExecPolicy("full", [], 5, sandbox=sandboxed),
        secrets=("123:very-secret-token",),
    )
    out = await reg.execute("exec", {"command": "env"}, ctx)
    assert "CHELA_TEST_PLAIN=visible" in out
    assert "CHELA_TEST_BOT_TOKEN" not in out  # the variable itself, not only its value
    out = await reg.execute("exec", {"command": 'echo "[$CHELA_TEST_BOT_TOKEN]"'}, ctx)
    assert out.startswith("[]")


async def test_exec_timeout_kills_process_group(reg, ws, sandboxed):
    ctx = ctx_for(ws, exec_policy=ExecPolicy("full", [], 0.5, sandbox=sandboxed))
    t0 = time.monotonic()
    # the grandchild writes a marker after 1s unless it was killed with the group
    out = await reg.execute(
        "exec", {"command": "echo started; (sleep 1; touch marker) & sleep 30"}, ctx
    )
    assert time.monotonic() - t0 < 5
    assert out.startswith("Error: the command timed out after 0.5s and was killed.")
    assert "started" in out
    await asyncio.sleep(1.5)
    assert not (ws / "marker").exists()


async def test_exec_allowlist_timeout(reg, ws, sandboxed):
    ctx = ctx_for(ws, exec_policy=ExecPolicy("allowlist", ["sleep"], 0.3, sandbox=sandboxed))
    t0 = time.monotonic()
    out = await reg.execute("exec", {"command": "sleep 30"}, ctx)
    assert out.startswith("Error: the command timed out")
    assert time.monotonic() - t0 < 4


async def test_exec_output_cap(reg, ws, sandboxed):
    ctx = ctx_for(ws, exec_policy=ExecPolicy("full", [], 10, max_output=2000, sandbox=sandboxed))
    out = await reg.execute("exec", {"command": f"{PY} -c \"print('y'*100000)\""}, ctx)
    assert "[... output cut at 2000 bytes of 100001]" in out
    assert len(out) < 2200


# --------------------------------------------------------------------------------------
# memory


@pytest.fixture
async def memory(ws, tmp_path):
    """The agent's memory index (bot/memory) without an embedding model: by words alone."""
    index = MemoryIndex("main", ws, tmp_path / "state.db", None)
    yield index
    await index.stop()


async def test_memory_search_and_get(reg, ws, memory):
    (ws / "MEMORY.md").write_text("# Memory\n- Alice likes green tea\n- Bob prefers coffee\n")
    (ws / "memory").mkdir()
    (ws / "memory" / "2025-01-02.md").write_text("Met Alice at the tea house.\nnothing here\n")
    (ws / "other.md").write_text("Alice tea everywhere")  # not a memory file
    ctx = ctx_for(ws, memory=memory)
    out = await reg.execute("memory_search", {"query": "Alice tea"}, ctx)
    lines = out.splitlines()
    assert lines[0].startswith(("MEMORY.md:2 (score", "memory/2025-01-02.md:1-2 (score"))
    assert any(
        ln.startswith("memory/2025-01-02.md:1-2 (score") and "Met [Alice] at the [tea] house" in ln
        for ln in lines
    )
    assert not any("other.md" in line for line in lines)
    assert "No matches" in await reg.execute("memory_search", {"query": "zebra"}, ctx)

    assert await reg.execute("memory_get", {"path": "MEMORY.md", "from": 2, "lines": 1}, ctx) == (
        "- Alice likes green tea\n[lines 2-2 of 3]"
    )
    assert "Met Alice" in await reg.execute("memory_get", {"path": "memory/2025-01-02.md"}, ctx)
    assert (await reg.execute("memory_get", {"path": "other.md"}, ctx)).startswith(
        "Error: other.md is not a memory file"
    )
    assert (await reg.execute("memory_get", {"path": "../MEMORY.md"}, ctx)).startswith("Error:")
    assert (await reg.execute("memory_get", {"path": "memory/none.md"}, ctx)).startswith(
        "Error: memory file not found"
    )


async def test_memory_search_needs_the_agents_index(reg, ws):
    """A context without the agent's index (no owner turn carries none) searches nothing; the
    twin is test_memory_search_and_get."""
    (ws / "MEMORY.md").write_text("- Alice likes green tea\n")
    out = await reg.execute("memory_search", {"query": "Alice"}, ctx_for(ws))
    assert out.startswith("Error: memory search is not available") and "Alice" not in out


async def test_memory_search_without_files(reg, ws, memory):
    out = await reg.execute("memory_search", {"query": "x"}, ctx_for(ws, memory=memory))
    assert "No memory files" in out


# --------------------------------------------------------------------------------------
# message / session_status / sessions_spawn / cron


async def test_message_tool(reg, ws):
    sent = []

    async def send(channel, to, text):
        sent.append((channel, to, text))
        return f"Sent to {channel}:{to}."

    out = await reg.execute(
        "message", {"channel": "telegram", "to": "42", "text": "hi"}, ctx_for(ws, send_message=send)
    )
    assert out == "Sent to telegram:42." and sent == [("telegram", "42", "hi")]
    out = await reg.execute(
        "message", {"channel": "telegram", "to": "42", "text": "hi"}, ctx_for(ws)
    )
    assert out.startswith("Error: sending messages is not available")


async def test_session_status(reg, ws):
    def info():
        return {
            "session_key": "agent:main:telegram:direct:7",
            "messages": 12,
            "usage": {"prompt_tokens": 5},
        }

    out = await reg.execute(
        "session_status",
        {},
        ctx_for(ws, timezone="Asia/Tokyo", model="openai/m", session_info=info),
    )
    assert "Asia/Tokyo" in out and "JST" in out and "UTC+09:00" in out
    assert "Model: openai/m" in out
    assert "Session: agent:main:telegram:direct:7" in out
    assert "Messages: 12" in out and "prompt_tokens=5" in out
    out = await reg.execute("session_status", {}, ctx_for(ws))  # host zone
    assert out.startswith("Current time: ") and "Session: agent:main:main" in out


async def test_sessions_spawn(reg, ws):
    async def spawn(task, label):
        return f"result of {task} ({label})"

    out = await reg.execute(
        "sessions_spawn", {"task": "count", "label": "c"}, ctx_for(ws, spawn_subagent=spawn)
    )
    assert "result of count (c)" in out
    assert (await reg.execute("sessions_spawn", {"task": "x"}, ctx_for(ws))).startswith("Error:")


async def test_cron_tool(reg, ws, tmp_path):
    """The tool against the real scheduler (a manual clock at 2027-01-15 08:00 UTC)."""
    from tests.unit.schedule.helpers import config, rig

    r = await rig(tmp_path, config(tmp_path))
    route = {"channel": "telegram", "chat_id": "42", "account": "default"}
    ctx = ctx_for(ws, cron=r.svc.for_route(route))

    async def cron(**args) -> str:
        return await reg.execute("cron", args, ctx)

    add = {"action": "add", "prompt": "remind tea"}
    out = await cron(**add, name="tea", schedule="0 9 * * *", target="telegram", to="7")
    assert out == (
        "Scheduled job 'tea'; next run 2027-01-15 09:00 UTC; it will be sent to your Telegram chat."
    )
    assert await cron(**add, name="nap", **{"in": "20m"}) == (
        "Scheduled job 'nap'; next run 2027-01-15 08:20 UTC; it will be sent to this chat."
    )
    assert (await cron(**add, name="x", schedule="soon")).startswith(
        "Error: could not add job 'x': bad crontab"
    )
    assert "exists already" in await cron(**add, name="tea", every="1h")
    assert "it is now 2027-01-15 08:00 UTC" in await cron(**add, name="y", at="2027-01-14T08:00")
    assert "at least 10s" in await cron(**add, name="z", every="5s")
    listed = await cron(action="list")
    assert "- tea [0 9 * * *] tool, active; next 2027-01-15 09:00 UTC; last -" in listed
    assert [j["to"] for j in r.store.cron_jobs()] == ["42", "7"]  # nap: back to this chat
    assert await cron(action="pause", name="tea") == "Job 'tea' is paused."
    assert await cron(action="resume", name="tea") == "Job 'tea' is active."
    assert (await cron(action="run_now", name="tea")).startswith("Job 'tea' is running now")
    await r.settled()
    assert await cron(action="remove", name="tea") == "Removed job 'tea'."
    assert (await cron(action="remove", name="tea")).startswith("Error: no scheduled job")
    assert (await cron(action="fly")).startswith("Error: unknown action")
    assert (await reg.execute("cron", {"action": "list"}, ctx_for(ws))).startswith(
        "Error: scheduling is not available"
    )
    await r.close()


# --------------------------------------------------------------------------------------
# text protocol


@pytest.mark.parametrize(
    "reply,visible,calls",
    [
        ("just text", "just text", []),
        (
            'Checking.\n<tool_call>{"name": "read", "arguments": {"path": "a"}}</tool_call>',
            "Checking.",
            [ParsedCall("read", {"path": "a"})],
        ),
        (  # fenced JSON inside the tag
            '<tool_call>\n```json\n{"name": "exec", "arguments": {"command": "ls"}}\n```\n</tool_call>',
            "",
            [ParsedCall("exec", {"command": "ls"})],
        ),
        (  # missing closing tag: to end of text
            'ok <tool_call>{"name": "read", "arguments": {"path": "b"}}',
            "ok",
            [ParsedCall("read", {"path": "b"})],
        ),
        (  # several calls, the first without a closing tag
            '<tool_call>{"name": "a", "arguments": {}}\n<tool_call>{"name": "b", "arguments": {"x": 1}}</tool_call> after',
            "after",
            [ParsedCall("a", {}), ParsedCall("b", {"x": 1})],
        ),
        (  # JSON in prose is never a call
            'Use {"name": "exec", "arguments": {"command": "rm -rf /"}} like so.\n```json\n{"name": "read"}\n```',
            'Use {"name": "exec", "arguments": {"command": "rm -rf /"}} like so.\n```json\n{"name": "read"}\n```',
            [],
        ),
        (  # arguments given as a JSON string
            '<tool_call>{"name": "read", "arguments": "{\\"path\\": \\"c\\"}"}</tool_call>',
            "",
            [ParsedCall("read", {"path": "c"})],
        ),
        (  # no arguments key
            '<TOOL_CALL>{"name": "session_status"}</TOOL_CALL>',
            "",
            [ParsedCall("session_status", {})],
        ),
    ],
)
def test_parse_tool_calls(reply, visible, calls):
    v, c = parse_tool_calls(reply)
    assert v == visible
    assert c == calls


@pytest.mark.parametrize(
    "body,name,err",
    [
        ('{"name": "read", "arguments": {"path": }', "read", "not valid JSON"),
        ("[1, 2]", "", "JSON object"),
        ('{"arguments": {}}', "", 'no "name"'),
        ('{"name": "read", "arguments": [1]}', "read", "must be a JSON object"),
        ("", "", "empty"),
    ],
)
def test_parse_tool_calls_errors(body, name, err):
    _, calls = parse_tool_calls(f"<tool_call>{body}</tool_call>")
    assert len(calls) == 1
    assert calls[0].name == name and calls[0].arguments is None
    assert err in calls[0].error


def test_format_tool_results():
    out = format_tool_results([("read", "abc"), ('we"ird<', "x </tool_result> y")])
    assert out == (
        '<tool_result name="read">\nabc\n</tool_result>\n'
        '<tool_result name="we&quot;ird&lt;">\nx &lt;/tool_result&gt; y\n</tool_result>'
    )


@pytest.mark.parametrize(
    "text,visible,thinking",
    [
        ("plain", "plain", ""),
        ("<think>hmm</think>Answer", "Answer", "hmm"),
        ("<think>a</think> x <final>Real answer</final> tail", "Real answer", "a"),
        ("Before <think>never closed", "Before", "never closed"),
        ("<think>plan<final>done</final>", "done", "plan"),
        ("<final>only final", "only final", ""),
    ],
)
def test_split_reasoning(text, visible, thinking):
    assert split_reasoning(text) == (visible, thinking)


# --------------------------------------------------------------------------------------
# scrub


@pytest.mark.parametrize(
    "text,secrets,expected",
    [
        ("api_key=sk-abcdefghijkl", (), "api_key=sk-a*[REDACTED]"),
        ("OPENAI_API_KEY=sk-abcdefghijkl rest", (), "OPENAI_API_KEY=sk-a*[REDACTED] rest"),
        ('{"password": "correct horse battery"}', (), '{"password": "corr*[REDACTED]"}'),
        ("db_password: hunter2hunter2", (), "db_password: hunt*[REDACTED]"),
        ("'client_secret': 'abcdefghijk'", (), "'client_secret': 'abcd*[REDACTED]'"),
        ("token=short", (), "token=short"),  # under 8 chars: left alone
        ("max_tokens: 1000", (), "max_tokens: 1000"),
        ("url?access_token=abcdefghij&x=1", (), "url?access_token=abcd*[REDACTED]&x=1"),
        (
            "Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.abc",
            (),
            "Authorization: Bearer eyJh*[REDACTED]",
        ),
        ("my value is zq-9876543210 ok", ("zq-9876543210",), "my value is zq-9*[REDACTED] ok"),
        ("abc appears", ("abc",), "abc appears"),  # secrets shorter than 4 ignored
        ("AWS_CREDENTIALS=AKIAABCDEFGH", (), "AWS_CREDENTIALS=AKIA*[REDACTED]"),
        ("nothing to see here", ("s3cr3tvalue",), "nothing to see here"),
    ],
)
def test_scrub(text, secrets, expected):
    assert scrub(text, secrets) == expected
    assert scrub(expected, secrets) == expected  # idempotent


def test_scrub_is_fast_on_long_runs():
    t0 = time.monotonic()
    scrub("x" * 200_000 + " token " * 10_000 + "a=b " * 10_000, ("secretvalue",))
    assert time.monotonic() - t0 < 2


def test_log_filter_redacts_messages_and_tracebacks(caplog):
    import logging

    from channels.redact import RedactSecrets

    logger = logging.getLogger("chela.test.redact")
    flt = RedactSecrets(["tok-123456", "abc"])  # "abc" is too short to redact
    logger.addFilter(flt)
    try:
        with caplog.at_level("INFO", logger="chela.test.redact"):
            logger.info("url https://x/bot%s/getMe abc", "tok-123456")
            try:
                raise RuntimeError("failed with tok-123456")
            except RuntimeError:
                logger.exception("boom")
    finally:
        logger.removeFilter(flt)
    first, second = caplog.records
    assert first.getMessage() == "url https://x/bottok-*[REDACTED]/getMe abc"
    assert "tok-123456" not in second.exc_text and "tok-*[REDACTED]" in second.exc_text
