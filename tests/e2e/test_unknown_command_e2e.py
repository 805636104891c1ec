"""An unknown slash command gets the same answer on every channel, from the core's command
table, with no model call: ``/stauts`` on Telegram answers "Unknown command /stauts. Did you
mean /status?" and the list.  In a group only when it is addressed to this bot
(``/stauts@chela_bot``); the twins: ordinary text and an unaddressed group line reach the
model as before."""

from __future__ import annotations

from tests.e2e import make_config, running, telegram_section
from tests.fakes.llm import text

OWNER, GROUP = 42, -1001


async def test_stauts_on_telegram_is_answered_without_the_model(tmp_path, llm, tg):
    cfg = make_config(tmp_path, llm, channels=telegram_section(tg, groups=[str(GROUP)]))
    llm.script(text("a real answer"))
    async with running(cfg):
        tg.inject_message(OWNER, "/stauts", from_id=OWNER)
        await tg.wait_for_sent(1, timeout=15)
        assert llm.requests == []  # no model call for it
        tg.inject_message(OWNER, "how are you?", from_id=OWNER)  # twin: text is a turn
        await tg.wait_for_sent(2, timeout=15)
    first = tg.sent[0].visible_text.splitlines()
    assert first[0] == "Unknown command /stauts. Did you mean /status?"
    assert "/help" in first[1] and "/cron" in first[1]  # the owner's commands
    assert tg.sent[1].visible_text == "a real answer"
    assert len(llm.requests) == 1


async def test_in_a_group_only_when_addressed_to_this_bot(tmp_path, llm, tg):
    cfg = make_config(tmp_path, llm, channels=telegram_section(tg, groups=[str(GROUP)]))
    llm.script(text("NO_REPLY"))
    async with running(cfg):
        cmd = "/stauts@chela_bot"
        entity = [{"type": "bot_command", "offset": 0, "length": len(cmd)}]
        tg.inject_message(
            GROUP, cmd, from_id=555, chat_type="supergroup", title="G", entities=entity
        )
        await tg.wait_for_sent(1, timeout=15)
        assert tg.sent[0].visible_text.startswith("Unknown command /stauts. Did you mean")
        assert "/cron" not in tg.sent[0].visible_text  # a guest is shown only theirs
        # not addressed to this bot: no answer from the command table; with mention-only
        # activation it is group history, never a turn
        tg.inject_message(GROUP, "/stauts", from_id=555, chat_type="supergroup", title="G")
        tg.inject_message(
            GROUP, "hey @chela_bot hi", from_id=555, chat_type="supergroup", title="G"
        )  # twin: an addressed line is a turn
        await llm.wait_for_requests(1, timeout=15)
    assert len(tg.sent) == 1
    assert "/stauts" in str(llm.requests[0]["messages"])  # kept as the group's history
