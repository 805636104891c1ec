"""`chela onboard` offers WhatsApp first, through its official Agent Platform, and says the
linked device's risk when that transport is chosen; `chela doctor` says it for a linked
account with whether a device is linked."""

from __future__ import annotations

import argparse
import os

from bot.cli import onboard
from bot.cli.answers import CHANNELS
from bot.cli.doctor import doctor
from tests.e2e import make_config

RISK = "WhatsApp as a linked device is unofficial: WhatsApp may restrict or ban the number"


def _args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    onboard.add_parser(parser.add_subparsers())
    return parser.parse_args(["onboard", "--non-interactive", *argv])


def test_whatsapp_is_offered_first_with_the_agent_platform(tmp_path):
    assert CHANNELS[0] == "whatsapp" and CHANNELS[-1] == "http"
    a = onboard.from_args(_args("--channel", "whatsapp"))
    text = onboard.render(a)
    assert 'transport = "agent_platform"' in text
    onboard.validate(text, tmp_path / "config.toml")
    assert not any(RISK in line for line in onboard.next_steps(a, tmp_path / "c.toml"))


def test_choosing_the_linked_device_says_its_risk_and_how_to_link(tmp_path):
    a = onboard.from_args(_args("--channel", "whatsapp", "--whatsapp-transport", "linked_device"))
    said = "\n".join(onboard.next_steps(a, tmp_path / "c.toml"))
    assert RISK in said and "pip install 'chela[whatsapp]'" in said
    assert "chela whatsapp login" in said
    assert 'transport = "linked_device"' in onboard.render(a)


async def test_doctor_says_a_linked_account_is_not_linked_yet_and_the_risk(tmp_path, llm):
    os.environ.pop("WHATSAPP_AGENT_API_KEY", None)  # a linked device needs no key
    cfg = make_config(
        tmp_path, llm, channels={"whatsapp": {"enabled": True, "transport": "linked_device"}}
    )
    by = {f.subject: f for f in await doctor(cfg)}
    got = by["channel whatsapp"]
    assert got.level == "FAIL" and "no device linked" in got.detail and RISK in got.detail
    assert "chela whatsapp login" in got.fix
