import asyncio, json
import openai
from tests.e2e.test_openai_api import api
from tests.fakes.llm import delay, text


async def test_probe(tmp_path, llm, monkeypatch):
    llm.script(delay(4, then=text("too late")), text("next"))
    async with api(tmp_path, llm, monkeypatch) as (d, client):
        with d.router.events.subscribe() as sub:
            call = asyncio.ensure_future(
                client.chat.completions.create(
                    model="x", messages=[{"role": "user", "content": "long"}], user="bob"
                )
            )
            ev = await asyncio.wait_for(sub.get(), 15)
            key = ev.session_key
            await llm.wait_for_requests(1, timeout=15)
            await d.router.stop(key)
            r = await asyncio.wait_for(call, 8)
            r = await client.chat.completions.create(
                model="x",
                messages=[
                    {"role": "user", "content": "long"},
                    {"role": "assistant", "content": ""},
                    {"role": "user", "content": "again"},
                ],
                user="bob",
            )
            print("GOT", r.choices[0].message.content)
            print(json.dumps(llm.requests[1]["messages"][1:], indent=1))
