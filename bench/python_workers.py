"""Claim-to-ack throughput of two Python workers with a handler that does
nothing: hourglass's (clients/python) and BullMQ's (``bullmq`` from PyPI).
``bench/python-workers.sh`` runs both side by side on servers of its own.

    python3 bench/python_workers.py hourglass         http://127.0.0.1:PORT TASKS CONCURRENCY
    python3 bench/python_workers.py hourglass-threads http://127.0.0.1:PORT TASKS CONCURRENCY
    python3 bench/python_workers.py bullmq            REDIS_PORT            TASKS CONCURRENCY

The handler is a coroutine function that returns at once (BullMQ's
processor is one); ``hourglass-threads`` runs a plain function instead, in
the worker's thread pool, as a synchronous program would.

Each enqueues TASKS tasks (payload ``{"f": "x" * 64}``, as the other
benchmarks) in batches of 1,000, then times one worker of CONCURRENCY from
its start until the last task is acked (hourglass: the ack confirmed;
BullMQ: its ``completed`` event, after the job is moved to completed). The
last line is ``RESULT <name> <tasks/s>``, for the script's medians.
"""

from __future__ import annotations

import asyncio
import sys
import threading
import time
from typing import Any

PAYLOAD = {"f": "x" * 64}
BATCH = 1_000


def hourglass(url: str, tasks: int, concurrency: int, threads: bool = False) -> float:
    from hourglass_client import ClaimedTask, Client, Worker

    with Client(url) as client:
        for first in range(0, tasks, BATCH):
            client.enqueue_batch("bench", [{"payload": PAYLOAD} for _ in range(min(BATCH, tasks - first))])
    worker = Worker(url, "bench", concurrency=concurrency)

    def nothing(task: ClaimedTask) -> None:
        pass

    async def nothing_async(task: ClaimedTask) -> None:
        pass

    worker.handler(nothing if threads else nothing_async)

    # The worker stops itself once everything is acked: a watcher on its loop
    # would cost it time, so a thread looks at its counts every millisecond.
    def watch() -> None:
        while worker.report.acked < tasks:
            time.sleep(0.001)
        worker.stop()

    started = time.perf_counter()
    threading.Thread(target=watch, daemon=True).start()
    report = worker.run(handle_signals=False)
    took = time.perf_counter() - started
    assert report.acked == tasks, report
    print(f"hourglass worker{' (handler in threads)' if threads else ''}: {tasks} tasks, concurrency {concurrency}: {took:.2f} s, {tasks / took:.0f} tasks/s; "
          f"{report}")
    return tasks / took


def bullmq(port: str, tasks: int, concurrency: int) -> float:
    from bullmq import Queue, Worker

    async def run() -> float:
        connection = {"connection": f"redis://127.0.0.1:{port}"}
        queue = Queue("bench", connection)
        for first in range(0, tasks, BATCH):
            await queue.addBulk([{"name": "t", "data": PAYLOAD} for _ in range(min(BATCH, tasks - first))])
        done = asyncio.Event()
        completed = 0

        def on_completed(*_: Any) -> None:
            nonlocal completed
            completed += 1
            if completed == tasks:
                done.set()

        async def nothing(job: Any, token: Any) -> None:
            return None

        started = time.perf_counter()
        worker = Worker("bench", nothing, {**connection, "concurrency": concurrency})
        worker.on("completed", on_completed)
        await done.wait()
        took = time.perf_counter() - started
        await worker.close()
        await queue.close()
        print(f"BullMQ worker: {tasks} tasks, concurrency {concurrency}: {took:.2f} s, {tasks / took:.0f} tasks/s")
        return tasks / took

    return asyncio.run(run())


def main() -> None:
    name, where, tasks, concurrency = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    if name == "hourglass-threads":
        rate = hourglass(where, tasks, concurrency, threads=True)
    else:
        rate = {"hourglass": hourglass, "bullmq": bullmq}[name](where, tasks, concurrency)
    print(f"RESULT {name} {rate:.0f}")


if __name__ == "__main__":
    main()
