"""bot/cli/log_lines.py: a record's line is made once for stderr and the log file, and the
log file rolls over by the bytes it has written (as the standard handler does by asking
the file)."""

from __future__ import annotations

import io
import logging
import os

from bot.cli.log_lines import LineOnce, LogFile

FMT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def _record(msg: str = "turn done ms=%d", *args: object) -> logging.LogRecord:
    return logging.LogRecord("chela.conversation", logging.INFO, __file__, 1, msg, args or (28,), None)


def test_a_record_is_formatted_once_for_every_handler_that_shares_the_formatter():
    calls = []

    class Counted(LineOnce):
        def formatTime(self, record, datefmt=None):
            calls.append(record)
            return "T"

    fmt = Counted(FMT)
    streams = [io.StringIO(), io.StringIO()]
    handlers = [logging.StreamHandler(s) for s in streams]
    for h in handlers:
        h.setFormatter(fmt)
    rec = _record()
    for h in handlers:
        h.handle(rec)
    assert (
        streams[0].getvalue() == streams[1].getvalue() == "T INFO chela.conversation: turn done ms=28\n"
    )
    assert len(calls) == 1


def test_another_formatter_makes_its_own_line():
    rec = _record()
    assert LineOnce(FMT).format(rec).endswith("chela.conversation: turn done ms=28")
    assert LineOnce("%(levelname)s|%(message)s").format(rec) == "INFO|turn done ms=28"
    assert logging.Formatter("%(message)s!").format(rec) == "turn done ms=28!"


def _file(path, max_bytes: int, backups: int = 2) -> LogFile:
    h = LogFile(path, max_bytes, backups)
    h.setFormatter(LineOnce("%(message)s"))
    return h


def test_the_file_rolls_over_at_its_size_counting_what_it_wrote(tmp_path):
    path = tmp_path / "chela.log"
    h = _file(path, max_bytes=100)
    for i in range(12):  # 12 lines of 10 bytes
        h.handle(_record("line %04d", i))
    h.close()
    assert path.stat().st_size <= 100
    rolled = (tmp_path / "chela.log.1").read_text().splitlines()
    assert rolled and all(len(x) == 9 for x in rolled)
    everything = rolled + path.read_text().splitlines()
    assert everything == [f"line {i:04d}" for i in range(12)]


def test_the_count_starts_from_the_size_of_an_existing_file(tmp_path):
    path = tmp_path / "chela.log"
    path.write_text("x" * 95)
    h = _file(path, max_bytes=100)
    h.handle(_record("second %d", 1))  # 9 bytes more would pass 100: rolled first
    h.close()
    assert (tmp_path / "chela.log.1").read_text() == "x" * 95
    assert path.read_text() == "second 1\n"


def test_bytes_not_characters_are_counted(tmp_path):
    path = tmp_path / "chela.log"
    h = _file(path, max_bytes=20)
    h.handle(_record("éééééé %d", 1))  # 8 characters + newline, 15 bytes
    h.handle(_record("ab %d", 2))  # 5 bytes more: 20, rolled over
    h.close()
    assert (tmp_path / "chela.log.1").read_text(encoding="utf-8") == "éééééé 1\n"
    assert path.read_text() == "ab 2\n"


def test_a_path_that_is_not_a_regular_file_is_never_rolled_over(tmp_path):
    h = _file(os.devnull, max_bytes=10)
    for i in range(5):
        h.handle(_record("a long line number %d", i))
    h.close()
    assert os.path.exists(os.devnull) and not os.path.exists(os.devnull + ".1")
