"""The pure parts, without a server: reasons cut on a UTF-8 boundary, the
backoff's bounds, path segments, the errors' classes, reading answers,
payloads of bytes sent as base64 and read back."""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import json
import threading
from typing import Any

import httpx
import pytest

from hourglass_client import (
    ApiError,
    ClaimedTask,
    Client,
    Conflict,
    DecodeError,
    InvalidRequest,
    Nodes,
    NotFound,
    OverBudget,
    Schedule,
    ServerError,
    StaleLease,
    Task,
    TooMany,
    Totals,
    Unsupported,
)
from hourglass_client._backoff import Backoff
from hourglass_client import _calls as calls
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


def test_several_nodes_and_the_counters_freshness_are_read() -> None:
    node = {"name": "a", "this": True, "heartbeat_ms": 9_600, "heartbeat_age_ms": 400, "shards": [0, 3]}
    answer = {"now_ms": 10_000, "nodes": [node, {**node, "name": "b", "this": False, "shards": []}]}
    nodes = _answering(200, json.dumps(answer).encode()).nodes()
    assert nodes.now_ms == 10_000 and nodes.nodes is not None
    assert [(n.name, n.this, n.heartbeat_age_ms, n.shards) for n in nodes.nodes] == [
        ("a", True, 400, [0, 3]),
        ("b", False, 400, []),
    ]
    assert Nodes.from_json({"now_ms": 1, "nodes": None}).nodes is None
    totals = {field.name: 0 for field in dataclasses.fields(Totals) if field.name != "counters_as_of_ms"}
    assert Totals.from_json(totals).counters_as_of_ms is None
    assert Totals.from_json({**totals, "counters_as_of_ms": 9_750}).counters_as_of_ms == 9_750


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


#: Every byte value once: not UTF-8, so not JSON.
EVERY_BYTE = bytes(range(256))


def test_bytes_are_sent_as_base64_and_anything_else_as_json() -> None:
    encoded = base64.b64encode(EVERY_BYTE).decode("ascii")
    for payload in (EVERY_BYTE, bytearray(EVERY_BYTE), memoryview(EVERY_BYTE)):
        assert calls.enqueue("q", payload, {"delay_ms": 5}).body == {"payload_base64": encoded, "delay_ms": 5}
    assert calls.enqueue("q", b"", {}).body == {"payload_base64": ""}
    # A memoryview of another shape is sent as its bytes, in order.
    assert calls.payload_field(memoryview(EVERY_BYTE).cast("H")[::2]) == {
        "payload_base64": base64.b64encode(b"".join(EVERY_BYTE[i:i + 2] for i in range(0, 256, 4))).decode()
    }
    assert calls.enqueue("q", {"a": [1]}, {}).body == {"payload": {"a": [1]}}
    assert calls.enqueue("q", None, {}).body == {"payload": None}
    assert calls.enqueue("q", "text", {}).body == {"payload": "text"}, "a str is JSON, not bytes"
    batch = calls.enqueue_batch("q", [{"payload": b"\x00\xff", "delay_ms": 1}, {"payload": 7}, {"payload": None}])
    assert batch.body == {"tasks": [{"delay_ms": 1, "payload_base64": "AP8="}, {"payload": 7}, {}]}
    schedule = calls.put_schedule("s", "q", bytearray(b"\xfe"), {"every_ms": 60_000})
    assert schedule.body == {"queue": "q", "payload_base64": "/g==", "every_ms": 60_000}
    assert calls.put_schedule("s", "q", [1], {}).body == {"queue": "q", "payload": [1]}


def test_the_wire_carries_bytes_as_base64() -> None:
    sent: list[Any] = []

    def handle(request: httpx.Request) -> httpx.Response:
        sent.append(json.loads(request.content))
        return httpx.Response(201, json={"id": 1, "run_at_ms": 5})

    with Client("http://hourglass.test", http=httpx.Client(transport=httpx.MockTransport(handle))) as client:
        assert client.enqueue("q", b"\x89PNG\r\n", key="k").created
        client.enqueue("q", {"b": "é"})
    assert sent == [{"payload_base64": "iVBORw0K", "key": "k"}, {"payload": {"b": "é"}}]


TASK = {"id": 7, "queue": "q", "state": "due", "run_at_ms": 5, "attempt": 0, "max_attempts": 5, "priority": 1,
        "created_ms": 1}
CLAIMED = {"id": 7, "queue": "q", "attempt": 1, "lease": "0" * 16, "lease_until_ms": 9, "run_at_ms": 5}
SCHEDULE = {"name": "s", "queue": "q", "time_zone": "UTC", "misfire": "skip", "overlap": "allow", "max_attempts": 5,
            "since_ms": 1, "paused": False, "next_runs": [], "every_ms": 60_000}


@pytest.mark.parametrize("kind", [Task, ClaimedTask, Schedule])
def test_base64_is_read_back_into_bytes(kind: type[Task] | type[ClaimedTask] | type[Schedule]) -> None:
    fields = {Task: TASK, ClaimedTask: CLAIMED, Schedule: SCHEDULE}[kind]
    encoded = base64.b64encode(EVERY_BYTE).decode("ascii")
    raw = kind.from_json({**fields, "payload_base64": encoded})
    assert raw.payload == EVERY_BYTE and raw.payload_bytes == EVERY_BYTE
    assert kind.from_json({**fields, "payload": None, "payload_base64": ""}).payload == b""
    as_json = kind.from_json({**fields, "payload": {"a": 1, "b": ["é", 2.5, None]}})
    assert as_json.payload == {"a": 1, "b": ["é", 2.5, None]}
    assert as_json.payload_bytes == '{"a":1,"b":["é",2.5,null]}'.encode(), "compact UTF-8 JSON"
    assert kind.from_json({**fields, "payload": None}).payload_bytes == b"null"
    assert kind.from_json({**fields, "payload": "x"}).payload_bytes == b'"x"'


@pytest.mark.parametrize("field", ["AAE", "AP8=\n", "AP8=AP8=", "-_8=", "A===", "not base64!"])
def test_a_payload_that_is_not_base64_is_a_clear_error(field: str) -> None:
    """Unpadded, a newline, data after the padding, the URL-safe alphabet,
    a length that cannot be, not base64 at all."""
    body = json.dumps({**TASK, "payload_base64": field}).encode()
    with pytest.raises(DecodeError) as error:
        _answering(200, body).get_task(7)
    assert "payload_base64 is not standard base64 with padding" in str(error.value), error.value
    with pytest.raises(ValueError) as direct:
        Task.from_json({**TASK, "payload_base64": field})
    assert repr(field) in str(direct.value)


def test_a_payload_given_both_ways_or_not_a_string_is_an_error() -> None:
    with pytest.raises(ValueError, match="both payload and payload_base64"):
        Task.from_json({**TASK, "payload": 1, "payload_base64": "AA=="})
    with pytest.raises(DecodeError, match="payload_base64 is not a string"):
        _answering(200, json.dumps({**TASK, "payload_base64": 5}).encode()).get_task(7)
