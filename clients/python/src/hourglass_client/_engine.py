"""One run of a worker: the claim loops, the deliveries, and the shutdown.

A run holds every piece of a worker's state on one event loop, so that a
worker can be run again afresh. The pieces:

- one claim loop a queue, each taking up to its share of the free slots
  (:class:`~._slots.Slots`) before it asks, so that the server never hands
  out more tasks than the worker runs at once;
- one asyncio task a delivery, which runs the handler (a coroutine function
  on the loop, anything else in the thread pool), then hands a success to
  the :class:`~._acks.Acker` and nacks a failure;
- the :class:`~._leases.LeaseKeeper`, extending the leases of the handlers
  that run.

Requests that fail in a way that may pass (the server unreachable, 5xx,
507, 429) are tried again after a :class:`~._backoff.Backoff`; any other
failure of a claim stops the worker, and :meth:`WorkerRun.__call__` raises it.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ._acks import Acker
from ._backoff import Backoff
from ._delivery import Delivery, Outcome, nack_reason
from ._leases import LeaseKeeper
from ._slots import Slots
from ._threads import HandlerThreads
from .async_client import AsyncClient
from .errors import HourglassError
from .models import ClaimedTask
from .report import Counts

log = logging.getLogger("hourglass_client.worker")

#: A handler: called with each delivery; returns (anything, ignored) for an
#: ack, raises for a nack. A coroutine function runs on the event loop.
Handler = Callable[[ClaimedTask], object]

#: Time the acks of finished handlers get to go out after the shutdown
#: deadline, when the handlers used it all.
ACK_GRACE_S = 2.0


@dataclass(frozen=True, slots=True)
class Config:
    """A worker's settings, checked (see :class:`~hourglass_client.AsyncWorker`)."""

    queues: Sequence[str]
    concurrency: int
    lease_ms: int
    wait_ms: int
    shutdown_timeout_ms: int
    nack_delay_ms: int | None

    @property
    def share(self) -> int:
        """Slots one queue's claim may hold: all of them for one queue, an
        even share for several, so that a claim that waits on an idle queue
        leaves slots to the others."""
        return math.ceil(self.concurrency / len(self.queues))


class WorkerRun:
    """One run of a worker, from its first claim to its report."""

    def __init__(self, client: AsyncClient, handler: Handler, config: Config, counts: Counts) -> None:
        self.client = client
        self.handler = handler
        self.config = config
        self.counts = counts
        self.stopping = asyncio.Event()
        self.abandoning = asyncio.Event()
        self.slots = Slots(config.concurrency)
        self.leases = LeaseKeeper(client, config.lease_ms, counts)
        self.acker = Acker(client, counts)
        self.deliveries: set[asyncio.Task[None]] = set()
        self.on_loop = inspect.iscoroutinefunction(handler)
        self.threads = HandlerThreads(config.concurrency)

    async def __call__(self) -> None:
        """Claims and handles until :attr:`stopping` is set, then stops
        claiming and waits for the running handlers (up to the shutdown
        deadline, or until :attr:`abandoning` is set)."""
        self.leases.start()
        self.acker.start()
        claimers = [asyncio.create_task(self._claim(queue), name=f"hourglass-claim-{queue}") for queue in
                    self.config.queues]
        stopped = asyncio.create_task(self.stopping.wait())
        try:
            await asyncio.wait([stopped, *claimers], return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in [stopped, *claimers]:
                task.cancel()
            ended = await asyncio.gather(*claimers, return_exceptions=True)
            await self._finish()
        for end in ended:
            if isinstance(end, Exception):
                raise end

    async def _finish(self) -> None:
        deadline = time.monotonic() + self.config.shutdown_timeout_ms / 1000
        if self.deliveries:
            log.info("waiting up to %.1f s for %d running handlers", deadline - time.monotonic(),
                     len(self.deliveries))
        abandoning = asyncio.create_task(self.abandoning.wait())
        while self.deliveries and not self.abandoning.is_set() and (left_s := deadline - time.monotonic()) > 0:
            await asyncio.wait([*self.deliveries, abandoning], timeout=left_s, return_when=asyncio.FIRST_COMPLETED)
        abandoning.cancel()
        if self.deliveries:
            log.warning("abandoning %d handlers still running; their tasks are delivered again when their "
                        "leases run out", len(self.deliveries))
            for delivery in self.deliveries:
                delivery.cancel()
            await asyncio.gather(*self.deliveries, return_exceptions=True)
        await self.acker.stop(max(deadline - time.monotonic(), ACK_GRACE_S))
        await self.leases.stop()
        # Threads still running an abandoned handler finish it; nothing waits.
        self.threads.shutdown()

    async def _claim(self, queue: str) -> None:
        """Claims from ``queue`` as slots free up, until cancelled."""
        config = self.config
        failures, quick = Backoff(), Backoff()
        while True:
            self.acker.ride(True)
            try:
                taken = await self.slots.take(config.share)
            finally:
                self.acker.ride(False)
            acks = self.acker.take()
            # A claim that carries acks does not wait: their results (and
            # the worker's counts) would wait with it. If nothing is due,
            # the next claim waits, carrying what has gathered meanwhile.
            wait_ms = 0 if acks else config.wait_ms
            sent = time.monotonic()
            try:
                claim = await self.client.claim_and_ack(
                    queue, (d.task for d in acks), max_tasks=taken, lease_ms=config.lease_ms, wait_ms=wait_ms
                )
            except HourglassError as error:
                self.slots.give(taken)
                self.acker.give_back(acks)
                if not error.retryable:
                    log.error("claims from %s refused (%s): the worker stops", queue, error)
                    raise
                self.counts.retries += 1
                wait_s = failures.next_s()
                level = logging.WARNING if failures.failures == 1 else logging.DEBUG
                log.log(level, "claims from %s failed (%s); trying again in %.2f s", queue, error, wait_s)
                await asyncio.sleep(wait_s)
                continue
            except BaseException:
                self.slots.give(taken)
                self.acker.give_back(acks)
                raise
            self.acker.settle(acks, claim.acks)
            tasks = claim.tasks
            if failures.failures:
                log.info("claims from %s go through again, after %d failures", queue, failures.failures)
                failures.reset()
            self.slots.give(taken - len(tasks))
            self.counts.claimed += len(tasks)
            for task in tasks:
                self._start(Delivery(task, sent + config.lease_ms / 1000))
            # An empty answer before its wait was up (a server that is
            # stopping answers so) is not a reason to ask again at once.
            if tasks or acks or time.monotonic() - sent >= wait_ms / 2000 > 0:
                quick.reset()
            else:
                await asyncio.sleep(quick.next_s())

    def _start(self, delivery: Delivery) -> None:
        task = asyncio.create_task(self._deliver(delivery))
        self.deliveries.add(task)
        task.add_done_callback(self.deliveries.discard)

    async def _deliver(self, delivery: Delivery) -> None:
        """Runs the handler on ``delivery``, then acks or nacks it."""
        task = delivery.task
        self.leases.hold(delivery)
        handled = False
        try:
            try:
                await self._call(task)
            except Exception as error:
                handled = True
                self.leases.release(delivery)
                self.counts.failed += 1
                reason = nack_reason(error)
                log.warning("task %d of %s failed (attempt %d): %s", task.id, task.queue, task.attempt, reason,
                            exc_info=error)
                if delivery.stale:
                    delivery.end(Outcome.LOST, self.counts)
                else:
                    await self._nack(delivery, reason)
            else:
                handled = True
                self.leases.release(delivery)
                self.counts.succeeded += 1
                if delivery.stale:
                    delivery.end(Outcome.LOST, self.counts)
                else:
                    self.acker.add(delivery)
        except asyncio.CancelledError:
            self.leases.release(delivery)
            if delivery.outcome is None:
                delivery.end(Outcome.LOST if handled else Outcome.ABANDONED, self.counts)
            raise
        finally:
            self.slots.give(1)

    async def _call(self, task: ClaimedTask) -> None:
        if self.on_loop:
            result = self.handler(task)
        else:
            result = await self.threads.call(self.handler, task)
        if inspect.isawaitable(result):
            await result

    async def _nack(self, delivery: Delivery, reason: str) -> None:
        """Nacks ``delivery``, trying again while the failure may pass."""
        backoff = Backoff()
        while True:
            try:
                await self.client.nack(delivery.task.id, delivery.task.lease, reason=reason,
                                       delay_ms=self.config.nack_delay_ms)
            except HourglassError as error:
                if error.retryable:
                    self.counts.retries += 1
                    await asyncio.sleep(backoff.next_s())
                    continue
                log.warning("task %d of %s: nack refused (%s); the server delivers it again", delivery.task.id,
                            delivery.task.queue, error)
                delivery.end(Outcome.LOST, self.counts)
                return
            delivery.end(Outcome.NACKED, self.counts)
            return
