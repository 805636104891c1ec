"""run_agent_loop end to end: fake OpenAI-compatible server <- REAL litellm <- loop <- tools.

Everything stays on 127.0.0.1.
"""

from __future__ import annotations

import asyncio
import json

import pytest

from bot.model import LLMClient
from bot.agent.loop import run_agent_loop, truncate_output
from bot.agent.tools import ExecPolicy, Tool, ToolContext, ToolRegistry, build_registry, schema
from tests.fakes.llm import FakeLLM, error, raw_tool_calls, text, tool_calls

SYSTEM = {"role": "system", "content": "You are a test."}
USER = {"role": "user", "content": "please help"}


@pytest.fixture
async def fake():
    async with FakeLLM() as f:
        yield f


@pytest.fixture
def ws(tmp_path):
    w = tmp_path / "ws"
    w.mkdir()
    return w


def make_llm(fake: FakeLLM, **kw) -> LLMClient:
    kw.setdefault("backoff_base", 0.001)
    return LLMClient("openai/fake-model", api_base=fake.base_url, **kw)


def make_ctx(ws, **kw) -> ToolContext:
    kw.setdefault("exec_policy", ExecPolicy("allowlist", ["ls", "cat", "echo"], 5))
    return ToolContext(
        file_root=ws, session_key="agent:main:main", agent_id="main", media_dir=ws / ".media", **kw
    )


def tool_msgs(req: dict) -> list[dict]:
    return [m for m in req["messages"] if m["role"] == "tool"]


async def test_plain_text_reply(fake, ws):
    fake.script(text("Hello!", usage={"prompt_tokens": 10, "completion_tokens": 2}))
    msgs = [SYSTEM, USER]
    res = await run_agent_loop(make_llm(fake), msgs, build_registry(["read"]), make_ctx(ws))
    assert res.text == "Hello!"
    assert res.error is None
    assert res.iterations == 1 and res.tool_calls == 0
    assert res.usage == {"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12}
    assert res.new_messages == [{"role": "assistant", "content": "Hello!"}]
    assert msgs == [SYSTEM, USER]  # caller's list untouched
    assert fake.requests[0]["tools"][0]["function"]["name"] == "read"


async def test_one_tool_call_reads_file(fake, ws):
    (ws / "a.txt").write_text("the file content\n")
    fake.script(
        tool_calls([("read", {"path": "a.txt"}, "call_A")]), text("It says: the file content")
    )
    res = await run_agent_loop(
        make_llm(fake), [SYSTEM, USER], build_registry(["read"]), make_ctx(ws)
    )
    assert res.text == "It says: the file content"
    assert res.iterations == 2 and res.tool_calls == 1
    second = fake.requests[1]["messages"]
    assert second[:2] == [SYSTEM, USER]
    assert second[2]["role"] == "assistant"
    assert second[2]["tool_calls"][0]["function"] == {
        "name": "read",
        "arguments": '{"path": "a.txt"}',
    }
    assert second[3] == {"role": "tool", "tool_call_id": "call_A", "content": "the file content\n"}
    # new_messages: assistant(tool_calls), tool, assistant(final)
    assert [m["role"] for m in res.new_messages] == ["assistant", "tool", "assistant"]
    assert res.new_messages[0]["tool_calls"][0] == {
        "id": "call_A",
        "type": "function",
        "function": {"name": "read", "arguments": '{"path": "a.txt"}'},
    }
    json.dumps(res.new_messages)  # plain, serialisable dicts


async def test_parallel_tool_calls_run_concurrently(fake, ws):
    # each tool sets its own event and waits for the other's: only concurrent execution finishes
    events = {"a": asyncio.Event(), "b": asyncio.Event()}

    def make(name, other):
        async def handler(ctx, args):
            events[name].set()
            await asyncio.wait_for(events[other].wait(), 5)
            return f"{name} done"

        return Tool(name, f"tool {name}", schema({}), handler)

    reg = ToolRegistry([make("a", "b"), make("b", "a")])
    fake.script(tool_calls([("b", {}), ("a", {})]), text("both done"))
    res = await run_agent_loop(make_llm(fake), [USER], reg, make_ctx(ws))
    assert res.text == "both done"
    tm = tool_msgs(fake.requests[1])
    assert [m["content"] for m in tm] == ["b done", "a done"]  # results in call order
    assert res.tool_calls == 2


async def test_text_protocol(fake, ws):
    (ws / "notes.md").write_text("remember the milk")
    reply = (
        'Let me look.\n<tool_call>{"name": "read", "arguments": {"path": "notes.md"}}</tool_call>'
    )
    fake.script(text(reply), text("You need milk."))
    res = await run_agent_loop(
        make_llm(fake),
        [SYSTEM, USER],
        build_registry(["read", "write"]),
        make_ctx(ws),
        native_tools=False,
    )
    assert res.text == "You need milk."
    for req in fake.requests:
        assert "tools" not in req
    second = fake.requests[1]["messages"]
    assert second[2] == {"role": "assistant", "content": reply}
    assert second[3]["role"] == "user"
    assert second[3]["content"] == '<tool_result name="read">\nremember the milk\n</tool_result>'
    assert [m["role"] for m in res.new_messages] == ["assistant", "user", "assistant"]


async def test_text_protocol_prose_json_not_executed(fake, ws):
    reply = 'Here is an example: {"name": "write", "arguments": {"path": "x", "content": "y"}}'
    fake.script(text(reply))
    res = await run_agent_loop(
        make_llm(fake), [USER], build_registry(["write"]), make_ctx(ws), native_tools=False
    )
    assert res.text == reply
    assert not (ws / "x").exists()
    assert len(fake.requests) == 1


async def test_text_protocol_malformed_json(fake, ws):
    fake.script(
        text('<tool_call>{"name": "read", "arguments": {"path": }</tool_call>'), text("sorry")
    )
    res = await run_agent_loop(
        make_llm(fake), [USER], build_registry(["read"]), make_ctx(ws), native_tools=False
    )
    assert res.text == "sorry"
    content = fake.requests[1]["messages"][-1]["content"]
    assert content.startswith('<tool_result name="read">\nError: tool call is not valid JSON')


async def test_malformed_native_arguments_get_error_result(fake, ws):
    (ws / "a.txt").write_text("A")
    fake.script(
        raw_tool_calls([("read", '{"path": "a.txt"'), ("read", '{"path": "a.txt"}')]),
        text("recovered"),
    )
    res = await run_agent_loop(make_llm(fake), [USER], build_registry(["read"]), make_ctx(ws))
    assert res.text == "recovered" and res.error is None
    tm = tool_msgs(fake.requests[1])
    assert tm[0]["content"].startswith("Error: arguments are not valid JSON")
    assert tm[1]["content"] == "A"


async def test_unknown_tool_and_crashing_tool(fake, ws, caplog):
    async def boom(ctx, args):
        raise RuntimeError("kaput")

    reg = ToolRegistry([Tool("boom", "explodes", schema({}), boom)])
    fake.script(tool_calls([("nope", {}), ("boom", {})]), text("fine"))
    res = await run_agent_loop(make_llm(fake), [USER], reg, make_ctx(ws))
    assert res.text == "fine"
    tm = tool_msgs(fake.requests[1])
    assert tm[0]["content"].startswith("Error: unknown tool 'nope'")
    assert tm[1]["content"].startswith("Error: tool 'boom' failed: RuntimeError: kaput")
    assert "kaput" in caplog.text


async def test_iteration_limit(fake, ws):
    (ws / "a.txt").write_text("A")
    fake.default = lambda req: tool_calls([("read", {"path": "a.txt"})])
    res = await run_agent_loop(
        make_llm(fake), [USER], build_registry(["read"]), make_ctx(ws), max_iterations=3
    )
    assert len(fake.requests) == 3
    assert res.iterations == 3 and res.tool_calls == 3
    assert "stopped after 3 tool steps" in res.text
    assert res.error is None
    # history stays valid: every assistant tool call is followed by its result, then the note
    assert [m["role"] for m in res.new_messages] == ["assistant", "tool"] * 3 + ["assistant"]


async def test_429_then_success(fake, ws):
    fake.script(error(429, retry_after=0.01), text("made it"))
    res = await run_agent_loop(make_llm(fake), [USER], build_registry([]), make_ctx(ws))
    assert res.text == "made it" and res.error is None
    assert len(fake.requests) == 2
    assert "tools" not in fake.requests[0]  # empty registry: no tools= param


async def test_500_forever_gives_user_message(fake, ws):
    fake.default = lambda req: error(500)
    res = await run_agent_loop(
        make_llm(fake, max_retries=2), [USER], build_registry(["read"]), make_ctx(ws)
    )
    assert res.error is not None
    assert res.text == res.error
    assert "HTTP 500" in res.error
    assert len(fake.requests) == 3


async def test_secrets_scrubbed_before_model_sees_them(fake, ws):
    (ws / "conf.txt").write_text("api_key=sk-abcdefghijkl\nmy password is hunter2hunter2 ok\n")
    fake.script(tool_calls([("read", {"path": "conf.txt"})]), text("done"))
    ctx = make_ctx(ws, secrets=("hunter2hunter2",))
    await run_agent_loop(make_llm(fake), [USER], build_registry(["read"]), ctx)
    body = json.dumps(fake.requests[1])
    assert "sk-abcdefghijkl" not in body and "hunter2hunter2" not in body
    content = tool_msgs(fake.requests[1])[0]["content"]
    assert "api_key=sk-a*[REDACTED]" in content
    assert "hunt*[REDACTED]" in content


async def test_big_tool_output_truncated(fake, ws):
    (ws / "big.txt").write_text("x" * 50_000)
    fake.script(tool_calls([("read", {"path": "big.txt"})]), text("big"))
    await run_agent_loop(make_llm(fake), [USER], build_registry(["read"]), make_ctx(ws))
    content = tool_msgs(fake.requests[1])[0]["content"]
    assert content == "x" * 40_000 + "\n[... 10000 more characters truncated]"


def test_truncate_output_marker():
    assert truncate_output("abc", 5) == "abc"
    assert truncate_output("abcdefgh", 5) == "abcde\n[... 3 more characters truncated]"


async def test_reasoning_tags(fake, ws):
    fake.script(text("<think>the user wants a greeting</think><final>Hi!</final>"))
    res = await run_agent_loop(
        make_llm(fake), [USER], build_registry([]), make_ctx(ws), reasoning_tags=True
    )
    assert res.text == "Hi!"
    assert res.new_messages == [{"role": "assistant", "content": "Hi!"}]


async def test_llm_error_after_tool_keeps_partial_messages(fake, ws):
    (ws / "a.txt").write_text("A")
    fake.script(tool_calls([("read", {"path": "a.txt"})]), error(401))
    res = await run_agent_loop(make_llm(fake), [USER], build_registry(["read"]), make_ctx(ws))
    assert res.error and "API key" in res.error
    assert [m["role"] for m in res.new_messages] == ["assistant", "tool"]


async def test_exec_through_loop(fake, ws):
    (ws / "f.txt").write_text("hello from exec")
    fake.script(
        tool_calls([("exec", {"command": "cat f.txt"}), ("exec", {"command": "rm -rf f.txt"})]),
        text("ok"),
    )
    await run_agent_loop(make_llm(fake), [USER], build_registry(["exec"]), make_ctx(ws))
    tm = tool_msgs(fake.requests[1])
    assert tm[0]["content"].startswith("hello from exec\n[exit code 0")
    assert tm[1]["content"].startswith("Error: command refused: 'rm' is not on the exec allow list")
    assert (ws / "f.txt").exists()


@pytest.mark.parametrize(
    "reply, visible, names",
    [
        ('<tool_call>{"name": "read", "arguments": {}}\nDone', "Done", ["read"]),
        (
            'Checking.\n<tool_call>\n```json\n{"name": "read", "arguments": {"path": "a"}}\n```\nAfter',
            "Checking.\n\nAfter",
            ["read"],
        ),
        (
            '<tool_call>{"name": "read", "arguments": {}}</tool_call>\nDone',
            "Done",
            ["read"],
        ),  # the closed twin
        (
            '<tool_call>{"name": "a", "arguments": {}}<tool_call>{"name": "b", "arguments": {}}</tool_call> tail',
            "tail",
            ["a", "b"],
        ),
    ],
)
def test_text_after_an_unclosed_tool_call_is_kept(reply, visible, names):
    from bot.rules.textproto import parse_tool_calls

    text, calls = parse_tool_calls(reply)
    assert text == visible
    assert [c.name for c in calls] == names and all(c.error is None for c in calls)
