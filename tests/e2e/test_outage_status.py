"""``chela status`` and the Control UI's system view show a model outage (since when, how many
messages are kept), and show it over once the kept messages are answered."""

from __future__ import annotations

from bot.cli.main import main as cli_main
from bot.config.load import load_config
from bot.store import pending
from tests.e2e import config_file, eventually, telegram_section
from tests.e2e.ui_api_helpers import turn
from tests.e2e.ui_client import ui_daemon


async def test_status_and_the_ui_show_the_outage_then_its_end(tmp_path, llm, tg, capsys):
    path = config_file(
        tmp_path / "config.toml",
        llm,
        workspace=tmp_path / "ws",
        state_dir=tmp_path / "state",
        channels={"http": {"enabled": True, "listen": "127.0.0.1:0"}, **telegram_section(tg)},
    )
    path.write_text(
        path.read_text().replace("llm_max_retries = 1", "llm_max_retries = 0")
        + '[outage]\nprobe_initial = "50ms"\nprobe_max = "100ms"\n'
    )
    cfg = load_config(str(path))
    async with ui_daemon(tmp_path, llm, cfg=cfg) as ui, await ui.login() as c:
        llm.go_down()
        tg.inject_message(42, "are you there?", from_id=42)
        await eventually(lambda: len(pending.waiting(ui.daemon.store)) == 1, timeout=15)
        system = await (await c.get("/ui/api/system")).json()
        assert system["outage"]["pending"] == 1 and system["outage"]["since"] > 0
        # the Control UI's chat page waits for its answer: it gets the error, nothing kept
        status, events = await turn(c, "agent:main:ui", "hello from the page", "w1")
        assert status == 200 and "not reachable" in str(events)
        assert len(pending.waiting(ui.daemon.store)) == 1
        capsys.readouterr()
        assert cli_main(["status", "--config", str(path)]) == 0
        out = capsys.readouterr().out
        assert "model: DOWN since" in out and "1 message(s) waiting" in out
        llm.come_up()
        await eventually(lambda: pending.view(ui.daemon.store) is None, timeout=15)
        await eventually(lambda: any(s.text == "ok" for s in tg.sent), timeout=15)
        system = await (await c.get("/ui/api/system")).json()
        assert system["outage"] is None
        assert cli_main(["status", "--config", str(path)]) == 0
        assert "model: answering (no outage)" in capsys.readouterr().out
