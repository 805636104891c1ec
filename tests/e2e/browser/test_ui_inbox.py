"""The Control UI's Inbox in Chromium (SPEC §16.6, §16.7): an exec approval decided in the
browser reaches the model (and a denied one is refused), a pairing request approved there
reaches the sender on the fake Telegram (a denied one stays silent), a failed delivery is
retried (and another discarded), each list live from the events stream."""

from __future__ import annotations

import os

import pytest

from tests.e2e import telegram_section
from tests.e2e.browser.kit import SESSION_LOOP, expect, login, open_page, wait_for
from tests.e2e.ui_client import mint_code, ui_daemon
from tests.fakes.llm import text, tool_calls

pytestmark = SESSION_LOOP

OWNER, FRIEND, STRANGER = 42, 77, 78


def tool_results(request: dict) -> list[str]:
    return [str(m["content"]) for m in request["messages"] if m.get("role") == "tool"]


def region(page, name: str):
    return page.get_by_role("region", name=name)


@pytest.fixture
def sandbox():
    from bot.agent.tools.sandbox import probe

    status = probe()
    if not status.ok:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI must have a working sandbox: {status.detail}")
        pytest.skip(f"no working sandbox here: {status.detail}")


async def test_an_approval_in_the_inbox_reaches_the_model(tmp_path, llm, page, sandbox):
    llm.script(
        tool_calls([("exec", {"command": "echo approved-run > proof.txt"})]),
        text("finished"),
        tool_calls([("exec", {"command": "echo denied-run > nope.txt"})]),
        text("refused"),
    )
    async with ui_daemon(tmp_path, llm, tools={"exec": {"security": "ask"}}) as ui:
        await login(page, ui.base, mint_code(ui.cfg))
        inbox = await page.context.new_page()  # a second tab watches the Inbox live
        await inbox.goto(f"{ui.base}/ui/#/inbox")
        await expect(inbox.get_by_role("heading", level=1, name="Inbox")).to_be_visible()
        await page.get_by_role("textbox", name="Message").fill("write the proof")
        await page.get_by_role("button", name="Send").click()
        item = region(inbox, "Approvals").get_by_role("listitem").filter(has_text="approved-run")
        await expect(item).to_be_visible()
        await expect(inbox.get_by_role("link", name="Inbox 1")).to_be_visible()
        await item.get_by_role("button", name="Approve").click()
        log = page.get_by_role("log", name="Conversation")
        await expect(log.get_by_role("article", name="Assistant message")).to_contain_text(
            "finished"
        )
        assert (ui.cfg.agent.workspace / "proof.txt").read_text().strip() == "approved-run"
        # the twin: Deny refuses the command, and the model is told so
        await page.get_by_role("textbox", name="Message").fill("now the other one")
        await page.get_by_role("button", name="Send").click()
        item = region(inbox, "Approvals").get_by_role("listitem").filter(has_text="denied-run")
        await item.get_by_role("button", name="Deny").click()
        await expect(log.get_by_text("refused")).to_be_visible()
        await expect(region(inbox, "Approvals").get_by_role("listitem")).to_have_count(0)
    assert not (ui.cfg.agent.workspace / "nope.txt").exists()
    assert "approved-run" not in " ".join(tool_results(llm.requests[1]))  # echo wrote a file
    assert any("den" in r.lower() for r in tool_results(llm.requests[3]))


async def test_a_pairing_approved_in_the_inbox_reaches_the_sender(tmp_path, llm, tg, page):
    llm.script(text("hello friend"))
    async with ui_daemon(tmp_path, llm, channels=telegram_section(tg)) as ui:
        await login(page, ui.base, mint_code(ui.cfg))
        await open_page(page, "Inbox")
        tg.inject_message(FRIEND, "hello? it is me", from_id=FRIEND, first_name="Friend")
        tg.inject_message(STRANGER, "let me in", from_id=STRANGER, first_name="Stranger")
        pending = region(page, "Pending pairing")
        friend = pending.get_by_role("listitem").filter(has_text="hello? it is me")
        stranger = pending.get_by_role("listitem").filter(has_text="let me in")
        await expect(friend).to_contain_text(str(FRIEND))
        await expect(stranger).to_be_visible()
        told = len([m for m in tg.sent if m.chat_id == STRANGER])
        await friend.get_by_role("button", name="Approve").click()
        # the friend is told, and the message that asked is answered by the model
        await tg.wait_for(
            lambda: any(m.chat_id == FRIEND and m.visible_text == "hello friend" for m in tg.sent),
            timeout=15,
        )
        assert any(m.chat_id == FRIEND and "approved" in m.visible_text for m in tg.sent)
        # the twin: Deny drops the request, says nothing to that sender, calls no model
        await stranger.get_by_role("button", name="Deny").click()
        await expect(pending.get_by_role("listitem")).to_have_count(0)
    assert len([m for m in tg.sent if m.chat_id == STRANGER]) == told
    assert len(llm.requests) == 1


async def test_a_failed_delivery_is_retried_or_discarded_from_the_inbox(tmp_path, llm, tg, page):
    llm.script(text("first answer"), text("second answer"))
    async with ui_daemon(tmp_path, llm, channels=telegram_section(tg)) as ui:
        await login(page, ui.base, mint_code(ui.cfg))
        await open_page(page, "Inbox")
        failed = region(page, "Failed deliveries")
        tg.fail_chat(OWNER, 403, times=2)  # "bot was blocked": refused for good at once
        tg.inject_message(OWNER, "one", from_id=OWNER)
        await expect(failed.get_by_role("listitem").filter(has_text="first answer")).to_be_visible()
        tg.inject_message(OWNER, "two", from_id=OWNER)
        second = failed.get_by_role("listitem").filter(has_text="second answer")
        await expect(second).to_contain_text("blocked")
        await (
            failed.get_by_role("listitem")
            .filter(has_text="first answer")
            .get_by_role("button", name="Retry")
            .click()
        )
        await tg.wait_for(
            lambda: any(m.visible_text == "first answer" for m in tg.sent), timeout=15
        )
        await second.get_by_role("button", name="Discard").click()
        await expect(failed.get_by_role("listitem")).to_have_count(0)
        await wait_for(lambda: len(tg.calls_of("sendMessage")) == 3)  # 2 refused, 1 retried
    assert [m.visible_text for m in tg.sent] == ["first answer"]
