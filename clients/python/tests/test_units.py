"""The pure parts, without a server: reasons cut on a UTF-8 boundary, the
backoff's bounds, path segments, the errors' classes, reading answers."""

from __future__ import annotations

import asyncio
import json
import threading

import httpx
import pytest

from hourglass_client import (
    ApiError,
    Client,
    Conflict,
    DecodeError,
    InvalidRequest,
    NotFound,
    OverBudget,
    ServerError,
    StaleLease,
    Task,
    TooMany,
    Unsupported,
)
from hourglass_client._backoff import Backoff
from hourglass_client._calls import segment
from hourglass_client._delivery import nack_reason
from hourglass_client._slots import Slots
from hourglass_client.limits import NACK_REASON_BYTES_MAX


def test_a_reason_is_the_exception_as_a_traceback_ends() -> None:
    assert nack_reason(ValueError("card declined")) == "ValueError: card declined"
    assert nack_reason(TimeoutError()) == "TimeoutError"
    assert nack_reason(KeyError("order")) == "KeyError: 'order'"


@pytest.mark.parametrize("char", ["a", "é", "€", "😀"])
@pytest.mark.parametrize("length", [1_000, 1_013, 1_014, 1_015, 1_016, 5_000])
def test_a_long_reason_is_cut_on_a_character_boundary(char: str, length: int) -> None:
    error = RuntimeError(char * length)
    reason = nack_reason(error)
    encoded = reason.encode("utf-8")
    assert len(encoded) <= NACK_REASON_BYTES_MAX
    full = f"RuntimeError: {char * length}"
    if len(full.encode("utf-8")) <= NACK_REASON_BYTES_MAX:
        assert reason == full
    else:
        assert reason.endswith("…") and full.startswith(reason[:-1])
        # As full as it can be: one more character would not fit.
        assert len(encoded) + len(char.encode("utf-8")) > NACK_REASON_BYTES_MAX


def test_a_reason_that_is_not_utf8_is_replaced() -> None:
    assert nack_reason(ValueError("bad \udcff byte")) == "ValueError: bad ? byte"


def test_backoff_doubles_to_its_bound_with_jitter() -> None:
    low, high = Backoff(100, 5_000, rng=lambda: 0.0), Backoff(100, 5_000, rng=lambda: 1.0)
    lows = [low.next_s() for _ in range(12)]
    highs = [high.next_s() for _ in range(12)]
    assert highs[:7] == [0.1, 0.2, 0.4, 0.8, 1.6, 3.2, 5.0] and set(highs[7:]) == {5.0}
    assert lows == [h / 2 for h in highs]
    assert high.failures == 12
    high.reset()
    assert high.next_s() == 0.1
    many = Backoff()
    assert all(0.05 <= many.next_s() <= 5.0 for _ in range(1_000)), "bounded however long it fails"


def test_segments_keep_only_unreserved_bytes() -> None:
    assert segment("orders.eu-1_x~") == "orders.eu-1_x~"
    assert segment("a/b") == "a%2Fb"
    assert segment("k 1?#%é") == "k%201%3F%23%25%C3%A9"


@pytest.mark.parametrize(
    ("status", "code", "kind"),
    [
        (400, "invalid", InvalidRequest),
        (400, "invalid_json", InvalidRequest),
        (404, "not_found", NotFound),
        (409, "stale_lease", StaleLease),
        (409, "conflict", Conflict),
        (429, "too_many_tasks", TooMany),
        (507, "disk_full", OverBudget),
        (501, "unsupported", Unsupported),
        (500, "storage", ServerError),
        (503, "shutting_down", ServerError),
        (503, "store_unavailable", ServerError),
        (502, "something_new", ServerError),
        (418, "something_new", ApiError),
    ],
)
def test_errors_by_code(status: int, code: str, kind: type[ApiError]) -> None:
    error = ApiError.of(status, code, "message")
    assert type(error) is kind and (error.status, error.code, error.message) == (status, code, "message")
    assert error.retryable == (status >= 500 or status == 429)


def _answering(status: int, body: bytes) -> Client:
    transport = httpx.MockTransport(lambda request: httpx.Response(status, content=body))
    return Client("http://hourglass.test", http=httpx.Client(transport=transport))


def test_an_answer_that_is_not_the_apis_json() -> None:
    with pytest.raises(DecodeError) as proxy:
        _answering(502, b"<html>Bad Gateway</html>").healthz()
    assert proxy.value.status == 502 and proxy.value.retryable and "Bad Gateway" in str(proxy.value)
    with pytest.raises(DecodeError) as wrong:
        _answering(200, b'{"unexpected": true}').get_task(1)
    assert wrong.value.status == 200 and not wrong.value.retryable


def test_answers_are_read_leniently() -> None:
    data = {
        "id": 7, "queue": "q", "state": "due", "payload": {"a": [1]}, "run_at_ms": 5, "attempt": 0,
        "max_attempts": 5, "priority": 1024, "created_ms": 1, "a_field_of_the_future": 1,
    }
    task = Task.from_json(data)
    assert (task.id, task.payload, task.key, task.last_error) == (7, {"a": [1]}, None, None)
    assert _answering(200, json.dumps(data).encode()).get_task(7) == task


def test_slots_bound_what_is_claimed() -> None:
    async def scenario() -> None:
        slots = Slots(4)
        assert await slots.take(3) == 3 and await slots.take(3) == 1
        waiting = asyncio.create_task(slots.take(4))
        await asyncio.sleep(0)
        assert not waiting.done()
        slots.give(2)
        assert await waiting == 2
        with pytest.raises(AssertionError):
            slots.give(5)

    asyncio.run(scenario())


def test_handler_threads_are_bounded_daemons() -> None:
    from hourglass_client._threads import HandlerThreads

    seen: set[str] = set()

    def work(n: int) -> int:
        thread = threading.current_thread()
        assert thread.daemon
        seen.add(thread.name)
        if n == 7:
            raise ValueError("seven")
        return n * n

    async def scenario() -> None:
        threads = HandlerThreads(3)
        results = await asyncio.gather(*(threads.call(work, n) for n in range(10)), return_exceptions=True)
        threads.shutdown()
        assert [r for i, r in enumerate(results) if i != 7] == [n * n for n in range(10) if n != 7]
        assert isinstance(results[7], ValueError)

    asyncio.run(scenario())
    assert 1 <= len(seen) <= 3


def test_acks_ride_on_a_claim_about_to_go_and_go_alone_otherwise() -> None:
    from hourglass_client import AckResult, AsyncClient, ClaimedTask
    from hourglass_client._acks import Acker
    from hourglass_client._delivery import Delivery
    from hourglass_client.report import Counts

    sent: list[list[int]] = []

    class Recording(AsyncClient):
        async def ack_batch(self, acks: object) -> list[AckResult]:
            ids = [task.id for task in acks]  # type: ignore[attr-defined]
            sent.append(ids)
            return [AckResult(id=i) for i in ids]

    def delivery(task_id: int) -> Delivery:
        return Delivery(ClaimedTask(task_id, "q", None, 1, "0" * 16, 0, 0), deadline=0.0)

    async def scenario() -> None:
        counts = Counts()
        acker = Acker(Recording("http://127.0.0.1:9"), counts)
        acker.start()
        acker.ride(True)
        first, second = delivery(1), delivery(2)
        acker.add(first)
        for _ in range(5):
            await asyncio.sleep(0)
        assert sent == [], "a claim about to go takes the acks"
        batch = acker.take()
        assert batch == [first]
        acker.ride(False)
        acker.settle(batch, [AckResult(id=1)])
        acker.add(second)
        await acker.stop(5.0)
        assert sent == [[2]], "with no claim about to go, the acker sends them"
        assert counts.acked == 2

    asyncio.run(scenario())
