"""The Control UI edits what it shows, in Chromium against the real daemon: Config (the raw
TOML and the form; an invalid key shown by key with the file unchanged; a stale file
refused), a Workspace file, Schedule jobs added, edited and removed (scheduled by the daemon
that is up, the next run shown before saving).  Every control is found by role and name."""

from __future__ import annotations

from tests.e2e.browser.edit_kit import edit_daemon
from tests.e2e.browser.kit import SESSION_LOOP, expect, login, open_page, wait_for
from tests.e2e.ui_client import mint_code

pytestmark = SESSION_LOOP


async def test_config_raw_and_form_save_with_errors_by_key(tmp_path, llm, page):
    async with edit_daemon(tmp_path, llm) as ui:
        path = tmp_path / "config.toml"
        await login(page, ui.base, mint_code(ui.cfg))
        await open_page(page, "Config")
        raw = page.get_by_role("textbox", name="Config (TOML)")
        await expect(raw).to_have_value(path.read_text())

        # an unknown key: shown by its key, nothing written
        before = path.read_bytes()
        await raw.fill(path.read_text() + '\n[ui]\nsession_idel = "1h"\n')
        await page.get_by_role("button", name="Save", exact=True).click()
        await expect(page.get_by_role("list", name="Problems")).to_contain_text("ui.session_idel")
        assert path.read_bytes() == before

        # the twin: a valid edit is written, the old file kept as config.toml.bak
        await raw.fill(path.read_text().replace('every = "0m"', 'every = "45m"'))
        await page.get_by_role("button", name="Save", exact=True).click()
        await expect(page.get_by_text("Restart needed")).to_contain_text("heartbeat.every")
        await wait_for(lambda: 'every = "45m"' in path.read_text())
        assert (tmp_path / "config.toml.bak").read_bytes() == before
        await expect(raw).to_have_value(path.read_text())

        # the form: a common key, through the same Save path
        await page.get_by_role("textbox", name="agent.model").fill("openai/gpt-4o-mini")
        await page.get_by_role("button", name="Update settings").click()
        await wait_for(lambda: 'model = "openai/gpt-4o-mini"' in path.read_text())
        assert "# my assistant" in path.read_text()
        await expect(raw).to_have_value(path.read_text())  # the page loaded the file again

        # a file changed on disk after the page loaded it: refused, then Reload shows it
        path.write_text(path.read_text() + "# changed by hand\n")
        changed = path.read_bytes()
        await raw.fill(path.read_text() + "\n# from the page\n")
        await page.get_by_role("button", name="Save", exact=True).click()
        await expect(page.get_by_text("changed since this page loaded it")).to_be_visible()
        assert path.read_bytes() == changed
        await page.get_by_role("button", name="Reload").click()
        await expect(raw).to_have_value(changed.decode())


async def test_workspace_file_edited_in_place_with_its_budget(tmp_path, llm, page):
    async with edit_daemon(tmp_path, llm) as ui:
        user = tmp_path / "ws" / "USER.md"
        user.write_text("# User\nName: Ada\n")
        await login(page, ui.base, mint_code(ui.cfg))
        await open_page(page, "Workspace")
        await page.get_by_role("button", name="USER.md").click()
        box = page.get_by_role("textbox", name="USER.md")
        await expect(box).to_have_value("# User\nName: Ada\n")
        region = page.get_by_role("region", name="USER.md")
        await expect(region).to_contain_text("of 20,000 characters")
        await box.fill("# User\nName: Ada Lovelace\nLikes: engines\n")
        await region.get_by_role("button", name="Save").click()
        await wait_for(lambda: "Lovelace" in user.read_text())
        await expect(region.get_by_role("status")).to_contain_text("USER.md saved")
        # the context report is under it
        await expect(page.get_by_role("region", name="Context report")).to_contain_text("USER.md")
        # changed on disk meanwhile: the next Save is refused and the file kept
        user.write_text("edited elsewhere\n")
        await box.fill("from the page\n")
        await region.get_by_role("button", name="Save").click()
        await expect(region.get_by_role("status")).to_contain_text("changed since")
        assert user.read_text() == "edited elsewhere\n"


async def test_schedule_add_edit_remove_a_job_in_the_running_daemon(tmp_path, llm, page):
    async with edit_daemon(tmp_path, llm) as ui:
        cron = ui.daemon.cron
        await login(page, ui.base, mint_code(ui.cfg))
        await open_page(page, "Schedule")
        await page.get_by_role("button", name="New job").click()
        await page.get_by_role("textbox", name="Name").fill("stretch")
        await page.get_by_role("textbox", name="Prompt").fill("Remind me to stretch")
        kind = page.get_by_role("combobox", name="Kind")
        for option in ("at", "in", "every", "schedule"):
            await expect(kind.get_by_role("option", name=option, exact=True)).to_have_count(1)
        await kind.select_option("every")
        await page.get_by_role("textbox", name="When").fill("1s")
        await expect(page.get_by_text("Not valid")).to_contain_text("too short")
        await page.get_by_role("textbox", name="When").fill("2h")
        await expect(page.get_by_text("Next run:")).to_be_visible()  # before saving
        assert cron.registry.get("stretch") is None
        await page.get_by_role("button", name="Save").click()

        row = page.get_by_role("table", name="Jobs").get_by_role("row").filter(has_text="stretch")
        await expect(row).to_contain_text("every 2h")
        job = cron.registry.get("stretch")
        assert job is not None and "stretch" in cron._loops  # scheduled by the daemon that is up
        await expect(row.get_by_role("cell").nth(4)).not_to_have_text("—")  # its next run

        await row.get_by_role("button", name="Edit").click()
        await expect(page.get_by_role("textbox", name="When")).to_have_value("2h")
        await page.get_by_role("textbox", name="When").fill("3h")
        await page.get_by_role("button", name="Save").click()
        await expect(row).to_contain_text("every 3h")
        await wait_for(lambda: (j := cron.registry.get("stretch")) is not None and j.spec == "3h")

        await row.get_by_role("button", name="Remove").click()
        dialog = page.get_by_role("dialog")
        await expect(dialog).to_contain_text("stretch")
        await dialog.get_by_role("button", name="Remove").click()
        await expect(row).to_have_count(0)
        assert cron.registry.get("stretch") is None
        assert page.dialogs == []  # type: ignore[attr-defined]  # no native confirm()


async def test_config_jobs_have_no_edit_or_remove(tmp_path, llm, page):
    extra = '\n[[cron]]\nname = "brief"\nprompt = "Morning brief"\nschedule = "0 7 * * *"\n'
    async with edit_daemon(tmp_path, llm, extra) as ui:
        await login(page, ui.base, mint_code(ui.cfg))
        await open_page(page, "Schedule")
        row = page.get_by_role("table", name="Jobs").get_by_role("row").filter(has_text="brief")
        await expect(row).to_contain_text("edit it there")
        await expect(row.get_by_role("button", name="Run now")).to_be_visible()
        await expect(row.get_by_role("button", name="Edit")).to_have_count(0)
        await expect(row.get_by_role("button", name="Remove")).to_have_count(0)
        await expect(page.get_by_role("table", name="Ended one-shot jobs")).to_contain_text("None.")
