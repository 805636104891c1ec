"""Mail end to end: the daemon watches a folder on the fake IMAP server (tests/fakes/imap.py)
through the real ``imaplib``.  Mail there before the first start is not processed; each new
mail is one turn whose answer reaches Telegram; a restart neither repeats nor skips one; a
sender outside ``from_allow`` is recorded and skipped; nothing on the server changes (no
flag, no move); a dropped connection is reconnected and nothing is lost."""

from __future__ import annotations

import json
from email.message import EmailMessage

import pytest

from tests.e2e import make_config, running, telegram_section
from tests.e2e.harness import eventually
from tests.fakes.imap import FakeImap
from tests.fakes.llm import text

OWNER = 42
PASSWORD = "imap-password-value-93a1"


def mail(subject: str, sender: str = "alice@example.com", body: str = "Hello there") -> bytes:
    m = EmailMessage()
    m["From"] = f"Alice <{sender}>"
    m["To"] = "me@example.com"
    m["Date"] = "Sat, 28 Nov 2026 09:30:00 +0000"
    m["Subject"] = subject
    m.set_content(body)
    return bytes(m)


@pytest.fixture
async def imap():
    fake = await FakeImap(password=PASSWORD).start()
    yield fake
    await fake.stop()


def config(tmp_path, llm, tg, imap, monkeypatch, **mail_kw):
    monkeypatch.setenv("TEST_IMAP_USER", imap.user)
    monkeypatch.setenv("TEST_IMAP_PASSWORD", PASSWORD)
    box = {
        "name": "inbox",
        "host": "127.0.0.1",
        "port": imap.port,
        "tls": "none",
        "username_env": "TEST_IMAP_USER",
        "password_env": "TEST_IMAP_PASSWORD",
        "prompt": "A mail arrived:\n{mail}",
        "deliver": f"telegram:{OWNER}",
        **mail_kw,
    }
    return make_config(tmp_path, llm, channels=telegram_section(tg), mail=[box])


def answer(request: dict) -> object:
    """The model names the subject it was shown."""
    joined = json.dumps(request["messages"][-1])  # this turn's mail (the session has more)
    if "Subject: " not in joined:
        return text("NO_REPLY")
    return text("about: " + joined.split("Subject: ")[-1].split("\\n")[0])


def told(tg) -> list[str]:
    return [s.text for s in tg.sent if s.chat_id == OWNER]


def mail_turns(d) -> list[str]:
    rows = d.store.db.execute("SELECT session_key FROM messages WHERE role='user' AND kind='mail'")
    return [r[0] for r in rows]


async def connected(d, imap) -> None:
    await eventually(lambda: imap.idling == 1, timeout=10)


async def test_new_mail_is_one_turn_and_the_server_is_left_as_it_was(
    tmp_path, llm, tg, imap, monkeypatch
):
    llm.default = answer
    imap.add(mail("old news"))  # before the first start: not processed
    async with running(config(tmp_path, llm, tg, imap, monkeypatch)) as d:
        await connected(d, imap)
        imap.add(mail("lunch on friday?"))
        await tg.wait_for(lambda: told(tg), timeout=10)
        assert told(tg) == ["about: lunch on friday?"]
        assert mail_turns(d) == ["agent:main:mail:inbox"]
        prompt = json.dumps(llm.requests[-1]["messages"])
        assert "Untrusted data" in prompt and "From: Alice <alice@example.com>" in prompt
        assert "Date: Sat, 28 Nov 2026 09:30:00 +0000" in prompt and "Hello there" in prompt
        assert PASSWORD not in prompt
        assert llm.requests[-1].get("tools") in (None, [])  # tools = [] by default
    assert imap.flags() == {1: set(), 2: set()}  # nothing marked read
    assert imap.changes == []  # nothing stored, copied, moved or expunged
    assert "EXAMINE" in imap.commands and "SELECT" not in imap.commands


async def test_restart_neither_repeats_nor_skips(tmp_path, llm, tg, imap, monkeypatch):
    llm.default = answer
    cfg = config(tmp_path, llm, tg, imap, monkeypatch)
    async with running(cfg) as d:
        await connected(d, imap)
        imap.add(mail("first"))
        await tg.wait_for(lambda: len(told(tg)) == 1, timeout=10)
    imap.add(mail("while down"))  # arrives while the daemon is stopped
    async with running(cfg) as d:
        await tg.wait_for(lambda: len(told(tg)) == 2, timeout=10)
        await connected(d, imap)
        imap.add(mail("after"))
        await tg.wait_for(lambda: len(told(tg)) == 3, timeout=10)
    assert told(tg) == ["about: first", "about: while down", "about: after"]


async def test_a_sender_outside_from_allow_is_recorded_and_skipped(
    tmp_path, llm, tg, imap, monkeypatch
):
    llm.default = answer
    cfg = config(tmp_path, llm, tg, imap, monkeypatch, from_allow=["@example.com"])
    async with running(cfg) as d:
        await connected(d, imap)
        imap.add(mail("spoofy", sender="mallory@evil.test"))
        named = mail("named like a colleague", sender="mallory@evil.test")
        named = named.replace(b"From: Alice <", b'From: "bob@example.com" <', 1)
        imap.add(named)  # the display name is not the address
        imap.add(mail("from a colleague", sender="bob@example.com"))  # twin: allowed
        await tg.wait_for(lambda: told(tg), timeout=10)
        await eventually(lambda: len(d.store.trigger_log("mail:inbox")) == 3)
        verdicts = sorted(r["verdict"] for r in d.store.trigger_log("mail:inbox"))
    assert told(tg) == ["about: from a colleague"]
    assert verdicts == ["accepted", "skipped (from_allow)", "skipped (from_allow)"]


async def test_a_connection_dropped_mid_idle_is_reconnected_and_nothing_is_lost(
    tmp_path, llm, tg, imap, monkeypatch
):
    llm.default = answer
    async with running(config(tmp_path, llm, tg, imap, monkeypatch)) as d:
        await connected(d, imap)
        imap.drop()  # mid-IDLE
        imap.add(mail("sent during the outage"))
        await tg.wait_for(lambda: told(tg), timeout=15)
        await connected(d, imap)
        imap.add(mail("after the reconnect"))
        await tg.wait_for(lambda: len(told(tg)) == 2, timeout=10)
    assert told(tg) == ["about: sent during the outage", "about: after the reconnect"]
    assert [u for u, ok in imap.logins if ok] == [imap.user, imap.user]


async def test_a_huge_attachment_and_malformed_mime_are_one_turn_each(
    tmp_path, llm, tg, imap, monkeypatch
):
    llm.default = answer
    big = EmailMessage()
    big["From"], big["To"], big["Subject"] = "alice@example.com", "me@example.com", "the video"
    big.set_content("see attached")
    big.add_attachment(b"\0" * (20 * 1024 * 1024), "video", "mp4", filename="party.mp4")
    broken = (
        b"From: alice@example.com\r\nSubject: broken\r\nContent-Type: multipart/mixed; "
        b'boundary="zz"\r\n\r\n--zz\r\nContent-Type: text/plain\r\n\r\nstill readable'
        b"\r\n--zz\r\nContent-Transfer-Encoding: base64\r\n\r\n!!!not base64"
    )
    async with running(config(tmp_path, llm, tg, imap, monkeypatch)) as d:
        await connected(d, imap)
        imap.add(bytes(big))
        imap.add(broken)
        await tg.wait_for(lambda: len(told(tg)) == 2, timeout=20)
        prompts = [json.dumps(r["messages"]) for r in llm.requests]
    assert told(tg) == ["about: the video", "about: broken"]
    assert "party.mp4 (over" in prompts[0] and "see attached" in prompts[0]
    assert max(len(p) for p in prompts) < 200_000  # the attachment was not read into the turn
    assert "still readable" in prompts[1]


GARBAGE = {
    "EXAMINE": b"* many EXISTS\r\n* OK [UIDVALIDITY x] ?\r\n{tag} OK [READ-ONLY] done\r\n",
    "UID SEARCH": b"* SEARCH 1 two \xff\r\n{tag} OK done\r\n",
    "UID FETCH": b"* 2 FETCH (UID 2 FLAGS ())\r\n{tag} OK no body\r\n",
    "NOOP": b"\x00\xff garbage without a tag\r\n{tag} MAYBE\r\n",
    "CAPABILITY": b"* CAPABILITY IMAP4rev1 IDLE \xff\xfe\r\n{tag} OK done\r\n",
}


def watcher(imap, taken: list[int], **kw):
    """A watcher of the fake's folder that takes each message into ``taken``, as the daemon's."""
    from bot.config.triggers import MailConfig
    from bot.triggers.mail import MailWatcher

    spec = MailConfig(
        name="inbox",
        host="127.0.0.1",
        port=imap.port,
        tls="none",
        username_env="U",
        password_env="P",
    )
    cursor: dict[str, tuple[int, int]] = {}

    def take(validity, uid, payload, verdict):
        cursor["c"] = (validity, uid)
        taken.append(uid)

    return MailWatcher(
        spec,
        lambda: (imap.user, PASSWORD),
        lambda: cursor.get("c"),
        lambda v, u: cursor.__setitem__("c", (v, u)),
        take,
        lambda event_id: None,
        **kw,
    )


@pytest.mark.parametrize("command", list(GARBAGE))
async def test_a_server_answering_garbage_is_reconnected_and_nothing_lost_or_repeated(
    imap, caplog, command
):
    import asyncio

    from channels.retry import Backoff

    imap.idle = command != "NOOP"  # NOOP is the poll of a server without IDLE
    taken: list[int] = []
    w = watcher(imap, taken, wait_seconds=0.3, backoff=Backoff(0.05, 0.2, jitter=0.0))
    task = asyncio.create_task(w.run())
    try:
        await asyncio.wait_for(w.connected.wait(), 10)
        first = imap.add(mail("first"))
        await eventually(lambda: taken == [first], timeout=10)
        imap.garbage[command] = GARBAGE[command]
        second, third = imap.add(mail("second")), imap.add(mail("third"))
        imap.drop()  # the next session meets the garbage
        await eventually(lambda: command not in imap.garbage, timeout=10)
        fourth = imap.add(mail("fourth"))
        await eventually(lambda: taken == [first, second, third, fourth], timeout=15)
        assert not task.done()
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    assert "mail inbox: " in caplog.text and imap.changes == []


async def test_doctor_logs_in_counts_the_folder_and_names_a_wrong_password(
    tmp_path, llm, tg, imap, monkeypatch
):
    from bot.cli.doctor import doctor

    imap.add(mail("one"))
    imap.add(mail("two"))
    cfg = config(tmp_path, llm, tg, imap, monkeypatch)
    by = {f.subject: f for f in await doctor(cfg)}
    assert by["mail inbox"].level == "OK"  # twin: the right password
    assert "INBOX holds 2 message(s)" in by["mail inbox"].detail
    monkeypatch.setenv("TEST_IMAP_PASSWORD", "wrong")
    by = {f.subject: f for f in await doctor(cfg)}
    assert by["mail inbox"].level == "FAIL"
    assert "wrong username or password" in by["mail inbox"].detail
    assert imap.flags() == {1: set(), 2: set()} and imap.changes == []


async def test_idle_is_renewed_on_one_connection_and_a_stop_ends_it(imap):
    """A quiet folder: IDLE ends with DONE and starts again, on the same login; new mail
    after several renewals is still taken; cancelling ends the watcher at once."""
    import asyncio

    taken: list[int] = []
    w = watcher(imap, taken, wait_seconds=0.2)
    task = asyncio.create_task(w.run())
    await asyncio.wait_for(w.connected.wait(), 10)
    await eventually(lambda: imap.commands.count("IDLE") >= 4, timeout=10)  # renewals
    uid = imap.add(mail("late"))
    await eventually(lambda: taken == [uid], timeout=5)
    assert len(imap.logins) == 1  # never reconnected
    task.cancel()
    await asyncio.wait_for(asyncio.gather(task, return_exceptions=True), 3)
