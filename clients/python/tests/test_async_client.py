"""The asyncio client against the real server: the same calls as the
blocking one (spelled once, in ``_calls``), so these check the asyncio
sending, iteration and errors, and a long poll woken by an enqueue."""

from __future__ import annotations

import asyncio
import time

import httpx
import pytest

from hourglass_client import AsyncClient, NotFound, StaleLease, State, Unreachable
from support import Server, silent_port


def test_enqueue_claim_ack(server: Server) -> None:
    async def scenario() -> None:
        async with AsyncClient(server.url) as client:
            assert await client.healthz() == "ok"
            batch = await client.enqueue_batch("q", [{"payload": n} for n in range(5)])
            assert batch.created == 5
            assert sorted([t.payload async for t in client.iter_tasks("q", state=State.DUE, page=2)]) == list(range(5))
            tasks = await client.claim("q", max_tasks=5)
            results = await client.ack_batch(tasks[:4])
            assert all(r.acked for r in results)
            with pytest.raises(StaleLease):
                await client.extend(tasks[4].id, "0" * 16, 1_000)
            await client.ack(tasks[4].id, tasks[4].lease)
            assert (await client.queue("q")).due == 0
            with pytest.raises(NotFound):
                await client.get_task(tasks[0].id)

    asyncio.run(scenario())


def test_bytes_payloads(server: Server) -> None:
    async def scenario() -> None:
        async with AsyncClient(server.url) as client:
            every_byte = bytes(range(256))
            task_id = (await client.enqueue("blobs", every_byte)).id
            await client.enqueue_batch("blobs", [{"payload": bytearray(b"\xff")}, {"payload": b"[1]"}])
            assert (await client.get_task(task_id)).payload == every_byte
            claimed = sorted(await client.claim("blobs", max_tasks=3), key=lambda t: t.id)
            assert [t.payload for t in claimed] == [every_byte, b"\xff", [1]]
            assert [t.payload_bytes for t in claimed] == [every_byte, b"\xff", b"[1]"]
            schedule, _ = await client.put_schedule("blob", "blobs", memoryview(b"\x00"), every_ms=3_600_000)
            assert schedule.payload == b"\x00"

    asyncio.run(scenario())


def test_a_waiting_claim_is_woken_by_an_enqueue(server: Server) -> None:
    async def scenario() -> float:
        sent = asyncio.Event()

        async def on_request(request: httpx.Request) -> None:
            if request.url.path.endswith("/claim"):
                sent.set()

        hooked = httpx.AsyncClient(event_hooks={"request": [on_request]})
        async with hooked, AsyncClient(server.url, http=hooked) as client:
            claim = asyncio.create_task(client.claim("wake", wait_ms=20_000))
            await asyncio.wait_for(sent.wait(), 10)
            enqueued = time.monotonic()
            await client.enqueue("wake", "now")
            [task] = await asyncio.wait_for(claim, 10)
            assert task.payload == "now"
            return time.monotonic() - enqueued

    took = asyncio.run(scenario())
    print(f"a claim waiting on an empty queue answered {took * 1000:.1f} ms after an enqueue")
    assert took < 5


def test_unreachable() -> None:
    async def scenario() -> None:
        with silent_port() as port:
            async with AsyncClient(f"http://127.0.0.1:{port}", timeout_ms=2_000) as client:
                with pytest.raises(Unreachable):
                    await client.healthz()

    asyncio.run(scenario())
