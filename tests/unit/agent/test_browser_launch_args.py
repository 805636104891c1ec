"""Chromium's flags: its own sandbox stays on unless the daemon runs as root (where Chromium
cannot start with it); every start goes through the proxy with no loopback bypass."""

from __future__ import annotations

from bot.agent.tools.browser.launch import chromium_args, sandbox_note


def test_as_root_the_sandbox_is_turned_off_and_the_note_says_why():
    args = chromium_args(8123, 512, as_root=True)
    assert "--no-sandbox" in args
    assert "root" in sandbox_note(True) and "off" in sandbox_note(True)


def test_not_root_chromium_keeps_its_sandbox():
    args = chromium_args(8123, 512, as_root=False)
    assert not any("sandbox" in a for a in args)
    assert "sandbox" in sandbox_note(False) and "off" not in sandbox_note(False)


def test_either_way_every_request_goes_through_the_proxy():
    for as_root in (True, False):
        args = chromium_args(8123, 512, as_root=as_root)
        assert "--proxy-server=http://127.0.0.1:8123" in args
        assert "--proxy-bypass-list=<-loopback>" in args
