"""Everything the command line prints goes through the log's redaction (SPEC §9.5 "Secrets"):
`chela doctor` against a Bot API that redirects in a loop (the error names the URL, and the
URL holds the token) never shows the token, and still says what went wrong."""

from __future__ import annotations

import sys
from types import SimpleNamespace

from aiohttp import web

from bot.cli import main
from tests.e2e import TG_TOKEN, config_file, telegram_section
from tests.e2e.test_first_hour import chela
from tests.fakes.web import serve


async def redirect_loop() -> tuple[web.AppRunner, str]:
    """A fake Bot API whose every answer is a redirect to the same URL."""

    async def again(request: web.Request) -> web.Response:
        raise web.HTTPFound(str(request.url))

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", again)
    runner, port = await serve(app)
    return runner, f"http://127.0.0.1:{port}"


def doctor_config(tmp_path, llm, api_base: str):
    channels = telegram_section(SimpleNamespace(api_base=api_base))
    return config_file(
        tmp_path / "config.toml",
        llm,
        workspace=tmp_path / "ws",
        state_dir=tmp_path / "state",
        channels=channels,
    )


async def test_doctor_never_prints_the_bot_token_of_a_redirect_loop(tmp_path, llm):
    runner, base = await redirect_loop()
    try:
        r = await chela("doctor", "--config", str(doctor_config(tmp_path, llm, base)))
    finally:
        await runner.cleanup()
    out = r.stdout + r.stderr
    assert TG_TOKEN not in out, out
    assert TG_TOKEN.split(":")[1] not in out, out
    # twin: the failure is still reported, with what happened and where
    line = next(x for x in r.stdout.splitlines() if "channel telegram" in x)
    assert line.startswith("FAIL") and "TooManyRedirects" in line and "127.0.0.1" in line, line
    assert r.returncode == 1


async def test_in_process_output_is_redacted_and_streams_are_restored(tmp_path, llm, capsys):
    runner, base = await redirect_loop()
    path = doctor_config(tmp_path, llm, base)
    stdout = sys.stdout
    try:
        # the doctor's own loop runs in a thread, as `chela doctor` does in its process
        import asyncio

        rc = await asyncio.to_thread(main, ["doctor", "--config", str(path)])
    finally:
        await runner.cleanup()
    out = capsys.readouterr()
    assert rc == 1 and TG_TOKEN not in out.out + out.err
    assert "channel telegram" in out.out and "*[REDACTED]" in out.out
    assert sys.stdout is stdout  # main() put the streams back


async def test_twin_doctor_reports_a_working_bot_token(tmp_path, llm, tg):
    r = await chela("doctor", "--config", str(doctor_config(tmp_path, llm, tg.api_base)))
    assert "OK    channel telegram: token accepted" in r.stdout, r.stdout + r.stderr


def test_a_log_line_after_the_commands_stream_closed_is_dropped_not_raised():
    """A logging handler made during a command keeps the wrapper; once the stream under it is
    closed (a test's capture), a late log line (an aiohttp finaliser's) must not raise: the
    'Logging error' traceback it caused, printed from inside a finaliser that ran during
    ast.parse, crashed the whole pytest run on Python 3.11."""
    import io

    from channels.redact import RedactingStream

    under = io.StringIO()
    stream = RedactingStream(under, lambda: ["s3cret-value"])
    assert stream.write("a s3cret-value here\n") == len("a s3cret-value here\n")
    assert "s3cret-value" not in under.getvalue() and "here" in under.getvalue()
    under.close()
    assert stream.write("late line\n") == len("late line\n")  # dropped, no ValueError
