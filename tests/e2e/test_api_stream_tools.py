"""``stream: true`` with client ``tools`` through the real ``openai`` SDK: a tool call the
model makes reaches the client as ``delta.tool_calls`` chunks and the stream ends with
``finish_reason: "tool_calls"``, so the SDK's stream helpers assemble it (the daemon, its
HTTP channel on 127.0.0.1, the fake LLM)."""

from __future__ import annotations

import json

from openai.lib.streaming.chat import ChatCompletionStreamState

from tests.e2e.test_openai_api import WEATHER, api
from tests.fakes.llm import text, tool_calls

STRICT_WEATHER = {
    "type": "function",
    "function": {
        **WEATHER["function"],
        "strict": True,
        "parameters": {**WEATHER["function"]["parameters"], "additionalProperties": False},
    },
}


async def test_stream_helper_assembles_a_client_tool_call(tmp_path, llm, monkeypatch):
    async with api(tmp_path, llm, monkeypatch) as (_d, client):
        llm.script(tool_calls([("get_weather", {"city": "Paris, France"}, "call_w1")]))
        messages: list = [{"role": "user", "content": "Weather in Paris?"}]
        async with client.chat.completions.stream(
            model="chela", messages=messages, tools=[STRICT_WEATHER]
        ) as stream:
            kinds = [event.type async for event in stream]
            final = await stream.get_final_completion()
        assert "tool_calls.function.arguments.delta" in kinds
        assert "tool_calls.function.arguments.done" in kinds
        choice = final.choices[0]
        assert choice.finish_reason == "tool_calls"
        (call,) = choice.message.tool_calls
        assert (call.id, call.type, call.function.name) == ("call_w1", "function", "get_weather")
        assert json.loads(call.function.arguments) == {"city": "Paris, France"}
        assert call.function.parsed_arguments == {"city": "Paris, France"}
        # the client runs the tool and the follow-up, streamed too, finishes the turn
        llm.script(text("Sunny, 24 °C"))
        messages += [
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": call.id,
                        "type": "function",
                        "function": {
                            "name": call.function.name,
                            "arguments": call.function.arguments,
                        },
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "call_w1", "content": "sunny, 24C"},
        ]
        async with client.chat.completions.stream(
            model="chela", messages=messages, tools=[STRICT_WEATHER]
        ) as stream:
            async for _ in stream:
                pass
            final = await stream.get_final_completion()
        assert final.choices[0].finish_reason == "stop"
        assert final.choices[0].message.content == "Sunny, 24 °C"
        assert not final.choices[0].message.tool_calls
    follow = llm.requests[1]["messages"][1:]
    assert [m["role"] for m in follow] == ["user", "assistant", "tool"]
    assert follow[1]["tool_calls"][0]["id"] == "call_w1"


async def test_raw_chunks_carry_the_calls_in_pieces(tmp_path, llm, monkeypatch):
    async with api(tmp_path, llm, monkeypatch) as (_d, client):
        (tmp_path / "ws").mkdir(exist_ok=True)
        (tmp_path / "ws" / "city.txt").write_text("Lyon")
        long_city = "Saint-Rémy-de-Provence " * 3
        llm.script(
            tool_calls(
                [
                    ("read", {"path": "city.txt"}, "own_1"),  # Chela's own: never shown
                    ("get_weather", {"city": long_city}, "cli_1"),
                    ("get_weather", {"city": "Oslo"}, "cli_2"),
                ],
                content="Let me look.",
            )
        )
        chunks = [
            c
            async for c in await client.chat.completions.create(
                model="chela",
                messages=[{"role": "user", "content": "Weather?"}],
                tools=[WEATHER],
                stream=True,
            )
        ]
    deltas = [c.choices[0].delta for c in chunks if c.choices]
    pieces = [tc for d in deltas for tc in d.tool_calls or []]
    heads = [p for p in pieces if p.id]
    assert [(p.index, p.id, p.type, p.function.name) for p in heads] == [
        (0, "cli_1", "function", "get_weather"),
        (1, "cli_2", "function", "get_weather"),
    ]
    # the arguments come in more than one piece, and join to the model's
    first = [p.function.arguments or "" for p in pieces if p.index == 0]
    assert len([a for a in first if a]) > 1
    assert json.loads("".join(first)) == {"city": long_city}
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices]
    assert finishes[-1] == "tool_calls" and set(finishes[:-1]) == {None}
    # the SDK's own accumulator (what its stream helper runs) agrees
    state = ChatCompletionStreamState()
    for c in chunks:
        state.handle_chunk(c)
    done = state.get_final_completion()
    assert [t.id for t in done.choices[0].message.tool_calls] == ["cli_1", "cli_2"]
    assert done.choices[0].message.content == "Let me look."


async def test_stream_without_a_client_tool_call_still_stops(tmp_path, llm, monkeypatch):
    """The twin: tools offered but the model answers in text: no ``tool_calls`` chunk and
    ``finish_reason: "stop"``, as before."""
    async with api(tmp_path, llm, monkeypatch) as (_d, client):
        llm.script(text("No need, it is sunny."))
        chunks = [
            c
            async for c in await client.chat.completions.create(
                model="chela",
                messages=[{"role": "user", "content": "Weather?"}],
                tools=[WEATHER],
                stream=True,
            )
        ]
    deltas = [c.choices[0].delta for c in chunks if c.choices]
    assert not any(d.tool_calls for d in deltas)
    assert "".join(d.content or "" for d in deltas) == "No need, it is sunny."
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
