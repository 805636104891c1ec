"""The one disk-full alarm: what counts as a full disk, and one line and one notice per
episode (not per failed write), cleared only once writes work again."""

import errno
import logging
import sqlite3

import pytest

from bot.store.disk import DiskAlarm, disk_full


def full_sqlite() -> sqlite3.OperationalError:
    return sqlite3.OperationalError("database or disk is full")


@pytest.mark.parametrize(
    "e",
    [
        OSError(errno.ENOSPC, "No space left on device"),
        OSError(errno.EDQUOT, "Disk quota exceeded"),
        full_sqlite(),
    ],
)
def test_a_write_refused_for_lack_of_space_is_a_full_disk(e):
    assert disk_full(e)


def test_a_full_disk_under_another_error_is_found():
    try:
        try:
            raise OSError(errno.ENOSPC, "No space left on device")
        except OSError as inner:
            raise RuntimeError("saving the attachment failed") from inner
    except RuntimeError as outer:
        assert disk_full(outer)


@pytest.mark.parametrize(
    "e",
    [
        None,
        OSError(errno.EACCES, "Permission denied"),
        FileNotFoundError(errno.ENOENT, "gone"),
        sqlite3.OperationalError("database is locked"),
        ValueError("database or disk is full"),  # the words alone are not enough
    ],
)
def test_other_failures_are_not_a_full_disk(e):
    assert not disk_full(e)


class Clock:
    now = 100.0

    def __call__(self) -> float:
        return self.now


def test_one_line_and_one_notice_per_episode_and_one_when_room_is_back(caplog):
    sent: list[tuple[str, dict]] = []
    clock = Clock()
    alarm = DiskAlarm("/var/lib/chela", lambda n, d: sent.append((n, d)), clock=clock)
    caplog.set_level(logging.DEBUG, logger="chela.store")
    alarm.ok()  # nothing to say while there is room
    for _ in range(5):
        alarm.failed(full_sqlite())
    alarm.ok()  # one small write fitting is not "room again" yet
    assert alarm.full
    clock.now += 10  # no failure for a while: room again
    alarm.ok()
    assert not alarm.full
    said = [r.getMessage() for r in caplog.records]
    assert len(said) == 2
    assert said[0].startswith("disk full: the state dir /var/lib/chela has no space left")
    assert said[1] == "disk space is back: the state dir /var/lib/chela has room again"
    assert [n for n, _ in sent] == ["storage.full", "storage.ok"]
    assert sent[0][1]["where"] == "/var/lib/chela"


def test_enough_good_writes_in_a_row_clear_it_too():
    alarm = DiskAlarm("/s", clock=Clock(), streak=3)
    alarm.failed(OSError(errno.ENOSPC, "No space left on device"))
    alarm.ok()
    alarm.ok()
    assert alarm.full
    alarm.ok()
    assert not alarm.full


def test_a_new_episode_is_said_again(caplog):
    clock = Clock()
    alarm = DiskAlarm("/s", clock=clock)
    caplog.set_level(logging.ERROR, logger="chela.store")
    alarm.failed(full_sqlite())
    clock.now += 10
    alarm.ok()
    alarm.failed(full_sqlite())
    assert len(caplog.records) == 2
