"""Chat commands end to end (SPEC §4.4): fake Telegram → daemon → fake Telegram, no model call."""

from __future__ import annotations

from tests.e2e import make_config, running, telegram_section
from tests.fakes.llm import text

OWNER, GUEST_GROUP = 42, -1001


async def test_help_status_context_and_new(tmp_path, llm, tg):
    cfg = make_config(tmp_path, llm, channels=telegram_section(tg, groups=[str(GUEST_GROUP)]))
    llm.script(text("first answer"), text("second answer"))
    async with running(cfg):
        tg.inject_message(OWNER, "remember the word pelican", from_id=OWNER)
        await tg.wait_for_sent(1, timeout=15)
        for i, cmd in enumerate(("/help", "/status", "/context", "/new"), start=2):
            tg.inject_message(OWNER, cmd, from_id=OWNER)
            await tg.wait_for_sent(i, timeout=15)
        tg.inject_message(GUEST_GROUP, "/help", from_id=555, chat_type="supergroup", title="G")
        await tg.wait_for_sent(6, timeout=15)
        tg.inject_message(OWNER, "what was the word?", from_id=OWNER)
        await tg.wait_for_sent(7, timeout=15)
    replies = [m.visible_text for m in tg.sent]
    assert "/approve CODE" in replies[1] and "/activation" in replies[1]  # the owner's /help
    assert "Session: agent:main:main" in replies[2] and "Messages: 2" in replies[2]
    assert "AGENTS.md" in replies[3] and "System prompt" in replies[3]
    assert replies[4] == "Started a fresh conversation."
    assert "/approve" not in replies[5] and "/new or /reset" in replies[5]  # a guest's /help
    assert len(llm.requests) == 2  # commands never call the model
    assert "pelican" not in str(llm.requests[1]["messages"])  # /new really started afresh
    assert "pelican" in str(llm.requests[0]["messages"])


async def test_commands_in_the_wrong_place_say_so(tmp_path, llm, tg):
    cfg = make_config(tmp_path, llm, channels=telegram_section(tg, groups=[str(GUEST_GROUP)]))
    async with running(cfg):
        tg.inject_message(OWNER, "/activation always", from_id=OWNER)
        await tg.wait_for_sent(1, timeout=15)
        tg.inject_message(
            GUEST_GROUP, "/approve ABC123", from_id=OWNER, chat_type="supergroup", title="G"
        )
        await tg.wait_for_sent(2, timeout=15)
    assert "only applies in group chats" in tg.sent[0].visible_text
    assert "only works in a direct chat" in tg.sent[1].visible_text
    assert llm.requests == []


async def test_activation_always_does_not_claim_every_message_mentions_the_bot(tmp_path, llm, tg):
    cfg = make_config(tmp_path, llm, channels=telegram_section(tg, groups=[str(GUEST_GROUP)]))
    llm.script(text("NO_REPLY"), text("hello"))
    async with running(cfg):
        tg.inject_message(
            GUEST_GROUP, "/activation always", from_id=OWNER, chat_type="supergroup", title="G"
        )
        await tg.wait_for_sent(1, timeout=15)
        tg.inject_message(
            GUEST_GROUP, "nice weather today", from_id=555, chat_type="supergroup", title="G"
        )
        await llm.wait_for_requests(1, timeout=15)
        tg.inject_message(
            GUEST_GROUP,
            "@chela_bot hi",
            from_id=555,
            chat_type="supergroup",
            title="G",
            entities=[{"type": "mention", "offset": 0, "length": 10}],
        )
        await tg.wait_for_sent(2, timeout=15)
    first, second = (r["messages"][-2]["content"] for r in llm.requests)
    assert "mentioned_you: no" in first  # answered (always-on), but not addressed
    assert "mentioned_you: yes" in second  # the twin: a real mention
