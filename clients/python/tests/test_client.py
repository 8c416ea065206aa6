"""The blocking client against the real server: every method, and the
errors as the server's codes."""

from __future__ import annotations

import base64
import hashlib
import re
import time
from pathlib import Path

import httpx
import pytest

from conftest import ServerFactory
from hourglass_client import (
    ApiError,
    ClaimedTask,
    Client,
    Conflict,
    DeadReason,
    Forbidden,
    InvalidRequest,
    Misfire,
    NotFound,
    Overlap,
    PayloadTooLarge,
    QueueSettings,
    StaleLease,
    State,
    Task,
    Unauthorized,
    Unreachable,
)
from support import Server, silent_port


def test_healthz_and_metrics(client: Client) -> None:
    assert client.healthz() == "ok"
    assert "hourglass" in client.metrics()


def test_enqueue_then_show_every_field(client: Client) -> None:
    payload = {"order": 42, "items": ["a", "é"], "paid": False, "total": 9.5, "note": None}
    enqueued = client.enqueue("orders", payload, delay_ms=60_000, max_attempts=3, priority=7, lease_ms=5_000)
    assert enqueued.created is True
    task = client.get_task(enqueued.id)
    assert (task.id, task.queue, task.state, task.payload) == (enqueued.id, "orders", State.SCHEDULED, payload)
    assert (task.max_attempts, task.priority, task.lease_ms, task.attempt) == (3, 7, 5_000, 0)
    assert task.run_at_ms == enqueued.run_at_ms and task.run_at_ms - task.created_ms >= 59_000
    assert task.key is None and task.last_error is None and task.dead_reason is None


def test_a_payload_may_be_left_out(client: Client) -> None:
    task = client.get_task(client.enqueue("orders", delay_ms=60_000).id)
    assert task.payload is None
    schedule, created = client.put_schedule("bare", "reports", every_ms=3_600_000)
    assert created and schedule.payload is None


#: Every byte value once: not UTF-8, so not JSON; sent and shown as base64.
EVERY_BYTE = bytes(range(256))


def test_payloads_of_bytes_come_back_exactly(client: Client) -> None:
    as_json = {"order": 42, "items": ["a", "é"], "total": 9.5, "note": None}
    # What is sent, what is shown, and its bytes (None: JSON, not bytes).
    cases: list[tuple[object, object, bytes | None]] = [
        (EVERY_BYTE, EVERY_BYTE, EVERY_BYTE),
        (as_json, as_json, None),
        (b'{"a":1}', {"a": 1}, b'{"a":1}'),  # bytes that are JSON text: shown as that JSON
        (b"hello\n", b"hello\n", b"hello\n"),  # UTF-8, but not JSON: bytes
        (b"", b"", b""),
        (bytearray(b"\x00\xff" * 1_000), b"\x00\xff" * 1_000, b"\x00\xff" * 1_000),
        (memoryview(b"\xfe\xed"), b"\xfe\xed", b"\xfe\xed"),
    ]
    ids = [client.enqueue("blobs", sent).id for sent, _, _ in cases]

    def check(how: str, tasks: dict[int, Task] | dict[int, ClaimedTask]) -> None:
        for task_id, (_, shown, exact) in zip(ids, cases):
            task = tasks[task_id]
            assert task.payload == shown and type(task.payload) is type(shown), (how, task)
            if exact is not None:
                assert task.payload_bytes == exact, (how, task)

    check("get", {task_id: client.get_task(task_id) for task_id in ids})
    assert client.get_task(ids[1]).payload_bytes == '{"order":42,"items":["a","é"],"total":9.5,"note":null}'.encode()
    check("listing", {task.id: task for task in client.iter_tasks("blobs", page=3)})
    claimed = {task.id: task for task in client.claim("blobs", max_tasks=len(ids))}
    assert sorted(claimed) == sorted(ids)
    check("claim", claimed)
    nacked = client.nack(ids[0], claimed[ids[0]].lease, delay_ms=60_000)
    assert nacked.payload == EVERY_BYTE, "a nack's answer shows the task's bytes too"

    batch = client.enqueue_batch("blobs-batch", [{"payload": EVERY_BYTE}, {"payload": as_json}, {"payload": b"{}"}])
    shown = [client.get_task(t.id) for t in batch.tasks]
    assert [t.payload for t in shown] == [EVERY_BYTE, as_json, {}]
    assert shown[2].payload_bytes == b"{}"

    schedule, _ = client.put_schedule("blob-report", "reports", EVERY_BYTE, every_ms=3_600_000)
    assert schedule.payload == EVERY_BYTE and client.get_schedule("blob-report").payload_bytes == EVERY_BYTE
    text, _ = client.put_schedule("text-report", "reports", b"[1,2]", every_ms=3_600_000)
    assert text.payload == [1, 2], "bytes that are JSON text: shown as JSON"
    assert {s.name: s.payload for s in client.iter_schedules()} == {"blob-report": EVERY_BYTE, "text-report": [1, 2]}


def test_a_payload_given_both_ways_or_not_as_base64_is_refused(server: Server) -> None:
    path = f"{server.url}/v1/queues/blobs/tasks"
    for body in ({"payload": 1, "payload_base64": "AA=="}, {"payload_base64": "not base64!"},
                 {"payload_base64": "AAE"}):
        answer = httpx.post(path, json=body)
        detail = answer.json()["error"]
        error = ApiError.of(answer.status_code, detail["code"], detail["message"])
        assert isinstance(error, InvalidRequest) and error.status == 400, (body, answer.text)
    null_and_bytes = {"payload": None, "payload_base64": base64.b64encode(b"\xff").decode()}
    assert httpx.post(path, json=null_and_bytes).status_code == 201, "a null payload is as if left out"


def test_a_key_names_the_live_task(client: Client) -> None:
    first = client.enqueue("orders", 1, key="order-42", delay_ms=60_000)
    again = client.enqueue("orders", 2, key="order-42")
    assert (first.created, again.created, again.id) == (True, False, first.id)
    assert client.find_by_key("orders", "order-42").id == first.id
    with pytest.raises(NotFound) as missing:
        client.find_by_key("orders", "no such key")
    assert (missing.value.status, missing.value.code) == (404, "not_found")


def test_names_are_percent_encoded_into_paths(client: Client) -> None:
    queue, key = "eu/orders:1+(x);$", "k/1 ?&=#%é"
    enqueued = client.enqueue(queue, "x", key=key)
    assert client.get_task(enqueued.id).queue == queue
    assert client.queue(queue).name == queue
    assert client.find_by_key(queue, key).id == enqueued.id
    assert [t.id for t in client.iter_tasks(queue)] == [enqueued.id]
    assert client.pause_queue(queue).paused and not client.resume_queue(queue).paused


def test_batch_and_cursor_paging(client: Client) -> None:
    batch = client.enqueue_batch(
        "mail", [{"payload": n, "delay_ms": 0 if n % 2 else 60_000} for n in range(7)]
    )
    assert batch.created == 7 and len(batch.tasks) == 7 and batch.tasks[0].created is None
    first = client.list_tasks("mail", limit=3)
    assert len(first.tasks) == 3 and first.next is not None
    assert sorted(t.payload for t in client.iter_tasks("mail", page=2)) == list(range(7))
    assert sorted(t.payload for t in client.iter_tasks("mail", state=State.DUE, page=2)) == [1, 3, 5]
    assert sorted(t.payload for t in client.iter_tasks("mail", state="scheduled")) == [0, 2, 4, 6]
    with pytest.raises(InvalidRequest) as wrong:
        client.list_tasks("mail", state="done")
    assert wrong.value.code == "invalid" and "scheduled, due, leased or dead" in wrong.value.message


def test_claim_extend_ack_and_a_stale_lease(client: Client) -> None:
    enqueued = client.enqueue("work", {"n": 1})
    [task] = client.claim("work", max_tasks=10, lease_ms=30_000)
    assert (task.id, task.queue, task.payload, task.attempt) == (enqueued.id, "work", {"n": 1}, 1)
    assert re.fullmatch("[0-9a-f]{16}", task.lease), task.lease
    assert client.get_task(task.id).state == State.LEASED
    until = client.extend(task.id, task.lease, 120_000)
    assert until >= task.lease_until_ms + 80_000
    with pytest.raises(StaleLease) as stale:
        client.ack(task.id, "0" * 16)
    assert isinstance(stale.value, Conflict) and (stale.value.status, stale.value.code) == (409, "stale_lease")
    client.ack(task.id, task.lease)
    with pytest.raises(NotFound):
        client.get_task(task.id)
    with pytest.raises(InvalidRequest) as bad_lease:
        client.ack(task.id, "ff")
    assert "16-hex-digit" in bad_lease.value.message


def test_ack_batch_answers_each_on_its_own(client: Client) -> None:
    client.enqueue_batch("work", [{"payload": n} for n in range(3)])
    tasks = client.claim("work", max_tasks=3)
    results = client.ack_batch([tasks[0], (tasks[1].id, tasks[1].lease), (tasks[2].id, "0" * 16)])
    assert [(r.id, r.acked) for r in results] == [(t.id, i < 2) for i, t in enumerate(tasks)]
    assert results[2].error is not None and results[2].error.code == "stale_lease"


def test_a_claim_acks_the_previous_batch_first(client: Client) -> None:
    client.enqueue_batch("work", [{"payload": n} for n in range(4)])
    first = client.claim("work", max_tasks=2)
    claim = client.claim_and_ack("work", [first[0], (first[1].id, "0" * 16)], max_tasks=2)
    assert [t.payload for t in claim.tasks] == [2, 3]
    assert [(r.id, r.acked) for r in claim.acks] == [(first[0].id, True), (first[1].id, False)]
    assert claim.acks[1].error is not None and claim.acks[1].error.code == "stale_lease"
    assert client.claim_and_ack("work", []).acks == []
    assert client.queue("work").acked == 1


def test_nack_to_dead_then_retry_and_delete(client: Client) -> None:
    ids = [client.enqueue("risky", n, max_attempts=1).id for n in range(2)]
    for task in client.claim("risky", max_tasks=2):
        dead = client.nack(task.id, task.lease, reason="card declined: é")
        assert (dead.state, dead.dead_reason, dead.last_error) == (State.DEAD, DeadReason.ATTEMPTS, "card declined: é")
    assert sorted(t.id for t in client.iter_dead("risky", page=1)) == ids
    assert client.list_dead("risky").next is None
    revived = client.retry(ids[0])
    assert (revived.state, revived.attempt) == (State.DUE, 0)
    assert client.queue("risky").dead == 1
    assert client.delete_dead("risky") == 1
    assert client.queue("risky").dead == 0


def test_nack_with_a_delay(client: Client) -> None:
    client.enqueue("later", "x")
    [task] = client.claim("later")
    again = client.nack(task.id, task.lease, delay_ms=60_000)
    assert again.state == State.SCHEDULED and again.run_at_ms >= task.run_at_ms + 59_000


def test_cancel_and_reschedule(client: Client) -> None:
    task_id = client.enqueue("q", 1, delay_ms=60_000).id
    moved = client.reschedule(task_id, delay_ms=0)
    assert moved.state == State.DUE
    [claimed] = client.claim("q")
    with pytest.raises(Conflict) as leased:
        client.reschedule(claimed.id, delay_ms=1_000)
    assert leased.value.code == "conflict" and "leased" in leased.value.message
    with pytest.raises(Conflict):
        client.retry(claimed.id)
    client.cancel(claimed.id)
    with pytest.raises(NotFound):
        client.cancel(claimed.id)


def test_queues_and_pause(client: Client) -> None:
    client.enqueue("a", 1)
    client.enqueue("b", 1, delay_ms=60_000)
    listing = client.queues()
    assert [q.name for q in listing.queues] == ["a", "b"]
    assert listing.totals.enqueued == 2 and listing.totals.tasks == 2
    a = client.queue("a")
    assert (a.due, a.scheduled, a.leased, a.dead, a.paused) == (1, 0, 0, 0, False)
    assert client.pause_queue("a").paused
    assert client.claim("a", wait_ms=0) == []
    assert not client.resume_queue("a").paused
    assert len(client.claim("a")) == 1
    with pytest.raises(NotFound):
        client.queue("never")


def test_one_process_has_no_nodes_and_exact_counters(client: Client) -> None:
    before = int(time.time() * 1000)
    nodes = client.nodes()
    assert nodes.nodes is None
    assert nodes.now_ms >= before
    assert client.queues().totals.counters_as_of_ms is None


def test_queue_settings_and_a_task_s_own_target(client: Client) -> None:
    assert client.settings("hooks") == QueueSettings()
    stored = client.put_settings(
        "hooks", push={"url": "https://example.com/h", "headers": {"X-A": "1"}}, rate_per_s=2.5, max_in_flight=3
    )
    assert stored.push is not None and (stored.push.method, stored.push.timeout_ms) == ("POST", 30_000)
    assert (stored.push.headers, stored.rate_per_s, stored.burst, stored.max_in_flight) == ({"X-A": "1"}, 2.5, None, 3)
    assert client.settings("hooks") == stored
    queue = client.queue("hooks")
    assert queue.settings == stored
    assert client.claim("hooks", wait_ms=0) == [], "a queue that pushes answers pull claims with nothing"
    with pytest.raises(InvalidRequest):
        client.put_settings("hooks", burst=3)
    assert client.put_settings("hooks") == QueueSettings()
    done = client.enqueue("hooks", {"n": 1}, http={"url": "https://example.com/own", "method": "PUT"})
    task = client.get_task(done.id)
    assert task.http is not None
    assert (task.http.url, task.http.method, task.http.headers) == ("https://example.com/own", "PUT", {})
    assert client.claim("hooks", wait_ms=0) == [], "a task with its own target is not pulled"


def test_a_claim_waits_past_the_client_timeout(server: Server) -> None:
    # The client's timeout is shorter than the wait, and the slack for the
    # answer (a second) is wide enough for a loaded machine.
    with Client(server.url, timeout_ms=1_000) as client:
        started = time.monotonic()
        assert client.claim("idle", wait_ms=3_000) == []
        waited = time.monotonic() - started
    print(f"an empty claim with wait_ms=3000 on a client with timeout_ms=1000 answered after {waited:.3f} s")
    assert 2.9 <= waited < 15


def test_schedules(client: Client) -> None:
    schedule, created = client.put_schedule(
        "sales-report", "reports", {"report": "sales"}, cron="0 9 * * MON-FRI", time_zone="Europe/Berlin",
        misfire=Misfire.ONCE, overlap="forbid",
    )
    assert created and schedule.name == "sales-report" and schedule.cron == "0 9 * * MON-FRI"
    assert (schedule.misfire, schedule.overlap, schedule.time_zone) == (Misfire.ONCE, Overlap.FORBID, "Europe/Berlin")
    assert len(schedule.next_runs) == 5 and schedule.next_runs[0].local.endswith(("+01:00", "+02:00"))
    _, created = client.put_schedule("sales-report", "reports", {"report": "sales"}, every_ms=60_000)
    assert not created and client.get_schedule("sales-report").every_ms == 60_000
    client.put_schedule("another", "reports", 1, every_ms=3_600_000)
    assert client.list_schedules(limit=1).next == "another"
    assert [s.name for s in client.iter_schedules(page=1)] == ["another", "sales-report"]
    assert client.pause_schedule("another").paused and not client.resume_schedule("another").paused
    client.delete_schedule("another")
    with pytest.raises(NotFound):
        client.get_schedule("another")
    with pytest.raises(InvalidRequest) as wrong:
        client.put_schedule("bad", "reports", 1, cron="0 9 * * *", time_zone="Mars/Olympus")
    assert "Mars/Olympus" in wrong.value.message


def test_errors_carry_status_and_code(client: Client) -> None:
    with pytest.raises(InvalidRequest) as short:
        client.claim("q", lease_ms=10)
    assert (short.value.status, short.value.code) == (400, "invalid")
    with pytest.raises(InvalidRequest) as negative:
        client.enqueue("q", 1, delay_ms=-1)
    assert negative.value.code == "invalid_json"
    with pytest.raises(NotFound) as missing:
        client.get_task(999_999)
    assert str(missing.value) == "404 not_found: no task 999999"
    assert isinstance(missing.value, ApiError) and not missing.value.retryable


def test_payload_limit(start_server: ServerFactory) -> None:
    with Client(start_server("--max-payload-bytes", "100").url) as client:
        with pytest.raises(PayloadTooLarge) as large:
            client.enqueue("q", "x" * 200)
    assert (large.value.status, large.value.code) == (413, "payload_too_large")


def test_bearer_token(start_server: ServerFactory) -> None:
    server = start_server("--token", "s3cret")
    with Client(server.url) as anonymous, pytest.raises(Unauthorized) as refused:
        anonymous.queues()
    assert (refused.value.status, refused.value.code) == (401, "unauthorized")
    with Client(server.url, token="s3cret") as client:
        assert client.enqueue("q", 1).created


def test_scoped_token(start_server: ServerFactory, tmp_path: Path) -> None:
    digest = hashlib.sha256(b"producer-secret").hexdigest()
    tokens = tmp_path / "tokens.toml"
    tokens.write_text(
        f'[[token]]\nname = "producer"\nsha256 = "{digest}"\nqueues = ["billing-*"]\ncan = ["enqueue"]\n'
    )
    server = start_server("--tokens", str(tokens))
    with Client(server.url, token="producer-secret") as producer:
        assert producer.enqueue("billing-eu", 1).created
        with pytest.raises(Forbidden) as refused:
            producer.enqueue("mail", 1)
        assert (refused.value.status, refused.value.code) == (403, "forbidden")
        assert "enqueue" in refused.value.message and "producer" not in refused.value.message
        with pytest.raises(Forbidden):
            producer.claim("billing-eu")
    # The nodes hold every queue: a token that reads only some is refused them.
    reader_digest = hashlib.sha256(b"reader-secret").hexdigest()
    tokens.write_text(
        tokens.read_text()
        + f'[[token]]\nname = "reader"\nsha256 = "{reader_digest}"\nqueues = ["billing-*"]\ncan = ["read"]\n'
    )
    server = start_server("--tokens", str(tokens))
    with Client(server.url, token="reader-secret") as reader, pytest.raises(Forbidden) as refused:
        reader.nodes()
    assert "read" in refused.value.message and "every queue" in refused.value.message


def test_unreachable() -> None:
    with silent_port() as port, Client(f"http://127.0.0.1:{port}", timeout_ms=2_000) as client:
        with pytest.raises(Unreachable) as error:
            client.healthz()
    assert error.value.retryable and f"127.0.0.1:{port}/healthz" in str(error.value)
