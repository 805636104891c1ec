"""Store, lanes and pairing: ordering, recovery, bounded history."""

import asyncio
import random

import pytest

from bot.conversation import pairing_requests as pairing
from bot.conversation.lanes import SessionLanes
from bot.rules.keys import session_key_for
from bot.store import Store
from channels.base import InboundMessage


def test_inbound_dedup_and_recovery(tmp_path):
    db = tmp_path / "s.db"
    s = Store(db)
    a = s.add_inbound("telegram", "default", "1", "10", "k", {"text": "a"})
    assert a is not None
    assert s.add_inbound("telegram", "default", "1", "10", "k", {"text": "a"}) is None
    b = s.add_inbound("telegram", "default", "1", "11", "k", {"text": "b"})
    s.commit_turn(
        "k",
        "t1",
        [{"role": "user", "content": "a"}],
        inbound_id=a,
        outbound=[{"chat_id": "1", "text": "hi"}],
    )
    s.close()
    s2 = Store(db)  # "restart"
    rows = s2.unfinished_inbound()
    # the answered message is done; its reply waits in the outbox (sent after the restart)
    assert [(r.id, r.status) for r in rows] == [(b, "pending")]
    [out] = s2.outbox_pending()
    assert (out.channel, out.state, out.payload) == (
        "telegram",
        "queued",
        {"chat_id": "1", "text": "hi"},
    )
    s2.set_inbound_status(b, "done")
    assert s2.unfinished_inbound() == []


def test_history_bounds_and_never_starts_with_tool_result(tmp_path):
    s = Store(tmp_path / "s.db")
    for i in range(30):
        s.commit_turn(
            "k",
            f"t{i}",
            [
                {"role": "user", "content": f"u{i}"},
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": "c",
                            "type": "function",
                            "function": {"name": "read", "arguments": "{}"},
                        }
                    ],
                },
                {"role": "tool", "tool_call_id": "c", "content": "x" * 100},
                {"role": "assistant", "content": f"a{i}"},
            ],
        )
    for limit in range(1, 12):
        h = s.history("k", limit=limit, max_chars=10**6)
        assert len(h) <= limit
        assert not h or h[0]["role"] == "user"
    h = s.history("k", limit=1000, max_chars=2000)
    assert sum(len(str(m)) for m in h) < 2600 and h[0]["role"] == "user"
    assert h[-1]["content"] == "a29"
    s.reset_session("k")
    assert s.history("k", limit=50, max_chars=10**6) == []


def test_session_keys():
    m = InboundMessage(channel="telegram", chat_id="5", sender_id="42", text="x")
    assert session_key_for("main", "main", m) == "agent:main:main"
    assert session_key_for("main", "per-peer", m) == "agent:main:direct:42"
    assert session_key_for("main", "per-channel-peer", m) == "agent:main:telegram:direct:42"
    g = InboundMessage(
        channel="telegram",
        chat_id="-100",
        sender_id="42",
        text="x",
        chat_type="group",
        thread_id="7",
    )
    assert session_key_for("main", "main", g) == "agent:main:telegram:group:-100:thread:7"
    # a platform that names conversations by sender (OpenAI ``user``) gets one session per sender
    h = InboundMessage(
        channel="http", chat_id="req-1", sender_id="alice", text="x", peer_session=True
    )
    assert session_key_for("main", "main", h) == "agent:main:http:direct:alice"
    d = InboundMessage(
        channel="discord",
        chat_id="c1",
        sender_id="42",
        text="x",
        chat_type="group",
        group_kind="channel",
    )
    assert session_key_for("a", "main", d) == "agent:a:discord:channel:c1"


async def test_lanes_order_per_session_and_concurrency_across():
    lanes = SessionLanes(max_concurrent=4)
    seen: dict[str, list[int]] = {"a": [], "b": []}
    running = 0
    peak = 0

    async def job(key, i):
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        await asyncio.sleep(random.random() / 200)
        seen[key].append(i)
        running -= 1

    futs = [lanes.submit(k, lambda k=k, i=i: job(k, i)) for i in range(20) for k in ("a", "b")]
    await asyncio.gather(*futs)
    assert seen["a"] == list(range(20)) and seen["b"] == list(range(20))
    assert peak == 2  # one per session, both sessions at once


async def test_lane_busy_and_drain():
    lanes = SessionLanes()
    gate = asyncio.Event()

    async def slow():
        await gate.wait()

    f = lanes.submit("k", slow)
    await asyncio.sleep(0)
    assert lanes.busy("k") and not lanes.busy("other")
    gate.set()
    await f
    assert not lanes.busy("k")
    assert await lanes.drain(1)


def test_pairing_flow(tmp_path):
    s = Store(tmp_path / "s.db")
    t0 = 1_000_000.0
    msg = pairing.request_pairing(s, "telegram", "42", "Eve", now=t0)
    code = s.pairing_requests("telegram")[0]["code"]
    assert len(code) == 8 and set(code) <= set(pairing.ALPHABET)
    assert code in msg and "42" in msg and f"chela pairing approve telegram {code}" in msg
    assert pairing.request_pairing(s, "telegram", "42", "Eve", now=t0 + 60) is None  # once an hour
    for i in range(2):
        assert pairing.request_pairing(s, "telegram", f"x{i}", "", now=t0 + 1 + i)
    # a fourth sender makes room by evicting the oldest request instead of being refused
    assert pairing.request_pairing(s, "telegram", "x9", "", now=t0 + 5)
    assert [r["sender_id"] for r in s.pairing_requests("telegram")] == ["x0", "x1", "x9"]
    with pytest.raises(pairing.PairingError):
        pairing.approve(s, "telegram", code, now=t0 + 10)  # 42's code was evicted
    with pytest.raises(pairing.PairingError):
        pairing.approve(s, "telegram", "WRONG123", now=t0)
    x9 = next(r["code"] for r in s.pairing_requests("telegram") if r["sender_id"] == "x9")
    assert pairing.approve(s, "telegram", x9.lower(), now=t0 + 10) == "x9"
    assert s.is_approved("telegram", "x9") and not s.is_approved("telegram", "42")
    assert s.take_new_approvals() == [("telegram", "x9")]  # the daemon tells x9 once
    assert s.take_new_approvals() == []
    assert pairing.request_pairing(
        s, "telegram", "late", "", now=t0 + 4000
    )  # expired ones are cleared
    assert [r["sender_id"] for r in s.pairing_requests("telegram")] == ["late"]
    expired = s.pairing_requests("telegram")[0]["code"]
    with pytest.raises(pairing.PairingError, match="expired"):
        pairing.approve(s, "telegram", expired, now=t0 + 4000 + pairing.CODE_TTL)


def test_history_never_starts_with_a_text_protocol_tool_result(tmp_path):
    s = Store(tmp_path / "s.db")
    s.commit_turn(
        "k",
        "t",
        [
            {"role": "user", "content": "question"},
            {
                "role": "assistant",
                "content": '<tool_call>{"name": "read", "arguments": {}}</tool_call>',
            },
            {"role": "user", "content": '<tool_result name="read">data</tool_result>'},
            {"role": "assistant", "content": "answer"},
            {"role": "user", "content": "next"},
            {"role": "assistant", "content": "ok"},
        ],
    )
    h = s.history("k", limit=4, max_chars=10**6)
    assert [m["content"] for m in h] == ["next", "ok"]
