"""The HTTP API turn plan (SPEC §13) as pure data: which of a client's messages are new,
what they become for the model, what the answer tells the client."""

from __future__ import annotations

from bot.agent.turn import TurnResult
from bot.conversation import api

U1 = {"role": "user", "content": "hi"}
A1 = {"role": "assistant", "content": "hello"}
U2 = {"role": "user", "content": "and now?"}
CALL = {
    "role": "assistant",
    "content": "",
    "tool_calls": [{"id": "c1", "function": {"name": "lookup", "arguments": "{}"}}],
}
RESULT = {"role": "tool", "tool_call_id": "c1", "content": "42"}


def plan(messages, state=None, **kw):
    opts = {"epoch": 0, "own_tools": {"exec"}, "native_tools": True} | kw
    return api.plan({"messages": messages}, state, **opts)


def test_a_first_request_is_all_new():
    p = plan([U1])
    assert not p.error and p.user_turn and p.prior == [] and p.stateful
    assert p.seen == [api.digest(U1)]


def test_a_second_request_only_adds_what_the_server_has_not_seen():
    first = plan([U1])
    state = api.remember(first, A1, 0)
    p = plan([U1, A1, U2], state)
    assert p.prior == [] and p.user_turn and not p.fork
    assert api.seen_count([api.digest(m) for m in (U1, A1, U2)], state["seen"]) == 2


def test_an_edited_history_forks_the_session():
    state = api.remember(plan([U1]), A1, 0)
    p = plan([U1, {"role": "assistant", "content": "edited"}, U2], state)
    assert p.fork and p.prior[0] == {"role": "user", "content": "hi"}
    assert not plan([U1, A1, U2], state, epoch=1).fork  # another epoch: nothing seen


def test_tool_results_continue_a_turn_and_unanswered_calls_are_closed():
    p = plan([U1, CALL, RESULT])
    assert p.user_turn is False and p.prior[-1]["role"] == "tool"
    closed = plan([U1, CALL, U2])
    assert closed.prior[-1] == {"role": "tool", "tool_call_id": "c1", "content": api.NO_RESULT}


def test_refusals():
    assert (
        "own tools"
        in api.plan(
            {"messages": [U1], "tools": [{"function": {"name": "exec"}}]},
            None,
            epoch=0,
            own_tools={"exec"},
            native_tools=True,
        ).error
    )
    assert (
        "native tool calling"
        in api.plan(
            {"messages": [U1], "tools": [{"function": {"name": "x"}}]},
            None,
            epoch=0,
            own_tools=set(),
            native_tools=False,
        ).error
    )
    assert "must end" in plan([U1, A1]).error
    assert "no assistant message asked" in plan([U1, RESULT]).error


def test_model_messages_and_the_answer():
    assert api.model_message({"role": "user", "content": "", "images": ["a", "b"]}) == {
        "role": "user",
        "content": "[2 images]",
    }
    assert api.model_message(CALL)["tool_calls"][0]["type"] == "function"
    usage = {"prompt_tokens": 3, "completion_tokens": 2, "cached_tokens": 1}
    result = TurnResult(text="x", to_store=[], usage=usage, client_calls=CALL["tool_calls"])
    part, reply = api.answer(result, "x")
    assert part["usage"]["total_tokens"] == 5
    assert part["usage"]["prompt_tokens_details"] == {"cached_tokens": 1}
    assert reply["tool_calls"] == CALL["tool_calls"]
    assert api.answer(TurnResult(text="", to_store=[], error="e"), "")[1] is None
    record = api.remember(api.ApiTurn(seen=["a"]), reply, 3)
    assert record["epoch"] == 3 and record["pending"] == ["c1"]
    assert api.state_key("k") == "api:k"
