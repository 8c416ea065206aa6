"""The worker against the real server: it handles everything and acks in
batches; an exception nacks with its text; a handler slower than the lease
keeps its task; shutdown waits for running handlers; a paused queue hands
it nothing; and the server killed (``kill -9``) and restarted under it loses
nothing."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from conftest import ServerFactory
from hourglass_client import (
    AsyncClient,
    AsyncWorker,
    ClaimedTask,
    Client,
    NotFound,
    State,
    Unauthorized,
    Worker,
    WorkerReport,
)
from support import Server, wait_for


class Running:
    """A :class:`Worker` run in a thread of the test's."""

    def __init__(self, worker: Worker) -> None:
        self.worker = worker
        self.result: WorkerReport | BaseException | None = None
        self.thread = threading.Thread(target=self._run, name="test-worker")
        self.thread.start()

    def _run(self) -> None:
        try:
            self.result = self.worker.run(handle_signals=False)
        except BaseException as error:  # handed to the test
            self.result = error

    def stop(self, within_s: float = 30) -> WorkerReport:
        """Stops the worker and waits for its report."""
        self.worker.stop()
        return self.join(within_s)

    def join(self, within_s: float = 30) -> WorkerReport:
        self.thread.join(within_s)
        assert not self.thread.is_alive(), f"the worker did not return within {within_s} s"
        if isinstance(self.result, BaseException):
            raise self.result
        assert self.result is not None
        return self.result


@contextmanager
def running(worker: Worker) -> Iterator[Running]:
    """Runs ``worker`` for the ``with`` block; stops it if the block fails."""
    run = Running(worker)
    try:
        yield run
    finally:
        if run.thread.is_alive():
            run.stop()


def settled(report: WorkerReport) -> bool:
    """Every delivery ended in exactly one way."""
    return report.claimed == report.acked + report.nacked + report.lost_leases + report.abandoned


def test_handles_everything_within_its_concurrency(server: Server, client: Client) -> None:
    client.enqueue_batch("orders", [{"payload": {"order": n}} for n in range(300)])
    seen: Counter[int] = Counter()
    running_now, most_at_once = 0, 0
    lock = threading.Lock()
    worker = Worker(server.url, "orders", concurrency=16, wait_ms=1_000)

    @worker.handler
    def handle(task: ClaimedTask) -> None:
        nonlocal running_now, most_at_once
        with lock:
            running_now += 1
            most_at_once = max(most_at_once, running_now)
            seen[task.payload["order"]] += 1
        time.sleep(0.002)  # a little work, so that handlers overlap
        with lock:
            running_now -= 1

    with running(worker) as run:
        wait_for(lambda: worker.report.acked == 300, 60, "300 tasks acked")
        report = run.stop()
    print(f"300 tasks: {report}; at most {most_at_once} handlers at once")
    assert sorted(seen) == list(range(300)) and set(seen.values()) == {1}
    assert (report.claimed, report.succeeded, report.acked, report.failed, report.lost_leases) == (300, 300, 300, 0, 0)
    assert 1 < most_at_once <= 16
    assert settled(report)
    stats = client.queue("orders")
    assert (stats.due, stats.leased, stats.scheduled, stats.acked) == (0, 0, 0, 300)


def test_a_handler_gets_bytes_as_bytes(server: Server, client: Client) -> None:
    every_byte, as_json, json_text = bytes(range(256)), {"order": 1, "note": "é"}, b'{"a":1}'
    ids = [client.enqueue("blobs", payload).id for payload in (every_byte, as_json, json_text)]
    seen: dict[int, tuple[object, bytes]] = {}
    worker = Worker(server.url, "blobs", wait_ms=1_000)

    @worker.handler
    def handle(task: ClaimedTask) -> None:
        seen[task.id] = (task.payload, task.payload_bytes)

    with running(worker) as run:
        wait_for(lambda: worker.report.acked == 3, 30, "the 3 tasks acked")
        report = run.stop()
    assert (report.succeeded, report.failed) == (3, 0) and settled(report)
    assert seen[ids[0]] == (every_byte, every_byte)
    assert seen[ids[1]][0] == as_json
    assert seen[ids[2]] == ({"a": 1}, json_text), "bytes that are JSON text come as that JSON"


def test_an_exception_nacks_with_its_text(server: Server, client: Client) -> None:
    declined = client.enqueue("payments", {"card": "declined"}, max_attempts=1).id
    verbose = client.enqueue("payments", {"card": "verbose"}, max_attempts=1).id
    worker = Worker(server.url, "payments", wait_ms=1_000)

    @worker.handler
    def charge(task: ClaimedTask) -> None:
        if task.payload["card"] == "declined":
            raise ValueError("card declined: «insufficient funds»")
        raise RuntimeError("€" * 2_000)

    with running(worker) as run:
        wait_for(lambda: worker.report.nacked == 2, 30, "both nacked")
        report = run.stop()
    assert (report.failed, report.nacked, report.acked) == (2, 2, 0) and settled(report)
    dead = client.get_task(declined)
    assert (dead.state, dead.last_error) == (State.DEAD, "ValueError: card declined: «insufficient funds»")
    cut = client.get_task(verbose).last_error
    assert cut is not None and cut.startswith("RuntimeError: €€€") and cut.endswith("…")
    assert 1_020 <= len(cut.encode("utf-8")) <= 1_024


def test_a_handler_slower_than_the_lease_keeps_its_task(server: Server, client: Client) -> None:
    # Leases long enough that an extension late by a second or two on a loaded
    # machine is still in time (at 2 s, one a second late lost the lease).
    lease_ms, work_s = 6_000, 15.0
    task_id = client.enqueue("slow", "work").id
    calls: list[float] = []
    worker = Worker(server.url, "slow", lease_ms=lease_ms, wait_ms=1_000)

    @worker.handler
    def slow(task: ClaimedTask) -> None:
        calls.append(time.monotonic())
        time.sleep(work_s)  # the work: two and a half leases

    with running(worker) as run:
        wait_for(lambda: calls, 10, "the handler started")
        lease_ends = [client.get_task(task_id).lease_until_ms]
        # Meanwhile another consumer claims from the queue: nothing comes.
        while time.monotonic() - calls[0] < work_s - 0.3:
            assert client.claim("slow", wait_ms=200) == [], "the task was delivered again while its handler ran"
            shown = client.get_task(task_id)
            assert shown.state == State.LEASED and shown.attempt == 1
            lease_ends.append(shown.lease_until_ms)
        wait_for(lambda: worker.report.acked == 1, 10, "the task acked")
        report = run.stop()
    extended = sorted(set(e for e in lease_ends if e is not None))
    print(f"a {work_s} s handler under a {lease_ms} ms lease: {len(extended)} lease ends seen, "
          f"{(extended[-1] - extended[0]) / 1000:.2f} s apart; {report}")
    assert len(calls) == 1 and len(extended) >= 3
    assert (report.acked, report.lost_leases, report.claimed) == (1, 0, 1)
    with pytest.raises(NotFound):
        client.get_task(task_id)


def test_shutdown_waits_for_running_handlers(server: Server, client: Client) -> None:
    client.enqueue_batch("jobs", [{"payload": n} for n in range(10)])
    started: list[int] = []
    finished: list[int] = []
    release = threading.Event()
    worker = Worker(server.url, "jobs", concurrency=4, wait_ms=1_000)

    @worker.handler
    def job(task: ClaimedTask) -> None:
        started.append(task.id)
        assert release.wait(30), "the test never released the handlers"
        finished.append(task.id)

    with running(worker) as run:
        wait_for(lambda: len(started) == 4, 10, "four handlers running")
        worker.stop()
        # The worker is stopping and the handlers are running: it waits.
        run.thread.join(0.5)
        assert run.thread.is_alive(), "the worker returned while its handlers ran"
        release.set()
        report = run.join()
    assert sorted(finished) == sorted(started) and len(started) == 4
    assert (report.claimed, report.succeeded, report.acked, report.abandoned) == (4, 4, 4, 0) and settled(report)
    assert client.queue("jobs").due == 6, "no claims once stopping"


def test_shutdown_abandons_handlers_past_its_deadline(server: Server, client: Client) -> None:
    client.enqueue("stuck", "forever", lease_ms=60_000)
    release = threading.Event()
    worker = Worker(server.url, "stuck", shutdown_timeout_ms=300, wait_ms=1_000)

    @worker.handler
    def stuck(task: ClaimedTask) -> None:
        release.wait(30)

    with running(worker) as run:
        wait_for(lambda: worker.report.claimed == 1, 10, "the task claimed")
        stopped = time.monotonic()
        report = run.stop()
        took = time.monotonic() - stopped
        release.set()
    print(f"stopped with a stuck handler and a 300 ms shutdown deadline in {took:.3f} s: {report}")
    assert (report.abandoned, report.acked, report.succeeded) == (1, 0, 0) and settled(report)
    assert took < 5
    assert client.queue("stuck").leased == 1, "its lease runs out on the server"


def test_a_paused_queue_hands_it_nothing(server: Server, client: Client) -> None:
    client.pause_queue("held")
    client.enqueue_batch("held", [{"payload": n} for n in range(5)])
    worker = Worker(server.url, "held", wait_ms=500)
    handled: list[int] = []
    worker.handler(lambda task: handled.append(task.id))
    with running(worker) as run:
        # Observe for a while (two of its claims' waits): nothing comes.
        observed_until = time.monotonic() + 1.5
        while time.monotonic() < observed_until:
            assert worker.report.claimed == 0 and not handled
            time.sleep(0.05)
        assert client.queue("held").due == 5
        client.resume_queue("held")
        wait_for(lambda: worker.report.acked == 5, 10, "the five tasks acked once resumed")
        report = run.stop()
    assert len(handled) == 5 and settled(report)


def test_the_server_killed_and_restarted_under_it_loses_nothing(start_server: ServerFactory) -> None:
    server = start_server()
    total = 600
    with Client(server.url) as client:
        for first in range(0, total, 200):
            client.enqueue_batch("ledger", [{"payload": n} for n in range(first, first + 200)])
    seen: Counter[int] = Counter()
    lock = threading.Lock()
    worker = Worker(server.url, "ledger", concurrency=8, lease_ms=2_000, wait_ms=1_000)

    @worker.handler
    def record(task: ClaimedTask) -> None:
        time.sleep(0.003)
        with lock:
            seen[task.payload] += 1

    with running(worker) as run:
        wait_for(lambda: len(seen) >= total // 4, 30, "a quarter handled before the kill")
        server.kill()
        killed_at, handled_at_kill = time.monotonic(), len(seen)
        wait_for(lambda: worker.report.retries >= 3, 30, "the worker retrying while the server is down")
        server.start()
        restarted_at = time.monotonic()
        wait_for(lambda: len(seen) == total, 90, f"all {total} handled after the restart")
        with Client(server.url) as client:
            wait_for(lambda: _empty(client, "ledger"), 60, "every task acked, none left in the queue")
        report = run.stop()
    again = sum(count - 1 for count in seen.values())
    print(f"{total} tasks, server killed after {handled_at_kill} handled and down "
          f"{restarted_at - killed_at:.2f} s: all handled, {again} twice or more (at least once is the "
          f"promise); {report}")
    assert sorted(seen) == list(range(total))
    assert settled(report)


def _empty(client: Client, queue: str) -> bool:
    stats = client.queue(queue)
    return stats.due + stats.leased + stats.scheduled == 0


def test_several_queues_and_an_async_handler(server: Server, client: Client) -> None:
    for queue in ("a", "b", "c"):
        client.enqueue_batch(queue, [{"payload": f"{queue}{n}"} for n in range(20)])
    handled: list[str] = []

    async def handle(task: ClaimedTask) -> None:
        await asyncio.sleep(0.001)
        handled.append(task.payload)

    async def scenario() -> WorkerReport:
        async with AsyncClient(server.url) as shared:
            worker = AsyncWorker(shared, ["a", "b", "c"], handle, concurrency=6, wait_ms=500)
            run = asyncio.create_task(worker.run())
            deadline = time.monotonic() + 30
            while worker.report.acked < 60:
                assert not run.done(), run
                assert time.monotonic() < deadline, f"not all 60 acked within 30 s: {worker.report}"
                await asyncio.sleep(0.01)
            worker.stop()
            report = await asyncio.wait_for(run, 30)
            assert await shared.healthz() == "ok", "a client the worker was given stays open"
            return report

    report = asyncio.run(scenario())
    assert sorted(handled) == sorted(f"{q}{n}" for q in "abc" for n in range(20))
    assert (report.acked, report.claimed) == (60, 60) and settled(report)


def test_a_refused_claim_stops_the_worker_with_its_error(start_server: ServerFactory) -> None:
    server = start_server("--token", "s3cret")
    worker = Worker(server.url, "q", lambda task: None)
    with pytest.raises(Unauthorized):
        Running(worker).join(10)


def test_stop_before_run_returns_at_once(server: Server) -> None:
    worker = Worker(server.url, "q", lambda task: None)
    worker.stop()
    started = time.monotonic()
    report = worker.run(handle_signals=False)
    assert report.claimed == 0 and time.monotonic() - started < 5


def test_settings_are_checked() -> None:
    for bad in ({"concurrency": 0}, {"lease_ms": 50}, {"wait_ms": 61_000}, {"shutdown_timeout_ms": -1}):
        with pytest.raises(ValueError):
            Worker("http://127.0.0.1:1", "q", **bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        Worker("http://127.0.0.1:1", [])
    with pytest.raises(TypeError):
        Worker("http://127.0.0.1:1", "q").run()


STUCK_WORKER = """
import logging, sys, threading
from hourglass_client import Worker

logging.basicConfig(level=logging.INFO, format="%(message)s")
worker = Worker(sys.argv[1], "stuck", shutdown_timeout_ms=60_000, wait_ms=1_000)

@worker.handler
def stuck(task):
    logging.info("handler started")
    threading.Event().wait(120)

logging.info("report: %s", worker.run())
"""


def test_sigint_stops_it_and_a_second_sigint_abandons_the_wait(server: Server, client: Client,
                                                               tmp_path: Path) -> None:
    client.enqueue("stuck", "forever")
    script, log = tmp_path / "stuck.py", tmp_path / "stuck.log"
    script.write_text(STUCK_WORKER)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1] / "src")}
    with open(log, "wb") as output:
        process = subprocess.Popen([sys.executable, str(script), server.url], stdout=output,
                                   stderr=subprocess.STDOUT, env=env)
    try:
        wait_for(lambda: "handler started" in log.read_text(), 30, "the handler started")
        process.send_signal(signal.SIGINT)
        wait_for(lambda: "SIGINT: stopping" in log.read_text(), 10, "the first SIGINT heard")
        assert process.poll() is None, "it returned while its handler ran (shutdown deadline 60 s)"
        second = time.monotonic()
        process.send_signal(signal.SIGINT)
        code = process.wait(timeout=30)
        took = time.monotonic() - second
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=30)
    text = log.read_text()
    print(f"exited {took:.2f} s after the second SIGINT, its handler still running:\n{text[-400:]}")
    assert code == 0 and took < 10, text
    assert "abandoning the running handlers" in text and "abandoned 1" in text, text
