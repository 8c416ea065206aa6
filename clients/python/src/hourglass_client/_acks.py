"""The one path a worker's acks take to the server.

Handlers that succeed hand their delivery to the :class:`Acker`; it sends
what has gathered in one ``POST /v1/acks`` (up to ``ACK_BATCH_MAX``), with at
most one such request on its way: while one is out, the next batch gathers,
so batches grow with the load and an ack never waits for a timer.

Piggybacking. A claim that also acks the previous batch (``"acks"`` in the
claim's body, answered beside its ``"tasks"``) saves the round trip. A claim
loop about to send (waiting for slots, which a handler that ends frees at
once) says so with :meth:`Acker.ride`; it takes the batch with
:meth:`Acker.take`, sends it in its claim, and hands the claim's ``"acks"``
to :meth:`Acker.settle`, or the batch back with :meth:`Acker.give_back` if
the claim failed. The acker's own loop sends only while no claim is about
to go: when every claim waits on the server (a queue with nothing due), or
the worker is stopping.
"""

from __future__ import annotations

import asyncio
import logging

from ._backoff import Backoff
from ._delivery import Delivery, Outcome
from .async_client import AsyncClient
from .errors import HourglassError
from .limits import ACK_BATCH_MAX
from .models import AckResult
from .report import Counts

log = logging.getLogger("hourglass_client.worker")


class Acker:
    """Gathers the deliveries to ack and sends them in batches."""

    def __init__(self, client: AsyncClient, counts: Counts) -> None:
        self._client = client
        self._counts = counts
        self._pending: list[Delivery] = []
        self._wake = asyncio.Event()
        self._idle = asyncio.Event()
        self._idle.set()
        self._backoff = Backoff()
        self._runner: asyncio.Task[None] | None = None
        #: Claim loops about to send a claim, which carries the acks.
        self._riders = 0

    def add(self, delivery: Delivery) -> None:
        """``delivery``'s handler succeeded: ack it."""
        self._pending.append(delivery)
        self._idle.clear()
        self._wake.set()

    def take(self, most: int = ACK_BATCH_MAX) -> list[Delivery]:
        """Up to ``most`` deliveries to ack, oldest first, now on their way."""
        batch, self._pending = self._pending[:most], self._pending[most:]
        return batch

    def ride(self, riding: bool) -> None:
        """A claim loop is about to send a claim, which takes the acks
        (``True``), or no longer (``False``): the acker's own loop sends only
        while none is."""
        self._riders += 1 if riding else -1
        assert self._riders >= 0, f"{self._riders} claims riding"
        if not self._riders:
            self._wake.set()

    def give_back(self, batch: list[Delivery]) -> None:
        """A claim that took ``batch`` failed: it goes first in the next."""
        if batch:
            self._pending[:0] = batch
            self._idle.clear()
            self._wake.set()

    def settle(self, batch: list[Delivery], results: list[AckResult]) -> None:
        """The server's answer to acking ``batch``: one result a delivery, in order."""
        if len(results) != len(batch) or any(r.id != d.task.id for d, r in zip(batch, results)):
            self._lose(batch, f"{len(batch)} acks were answered with other results: {results!r:.200}")
            return
        for delivery, result in zip(batch, results):
            if result.error is None:
                delivery.end(Outcome.ACKED, self._counts)
            else:
                self._lose([delivery], f"{result.error.code}: {result.error.message}")

    def _lose(self, batch: list[Delivery], why: str) -> None:
        for delivery in batch:
            delivery.end(Outcome.LOST, self._counts)
        if batch:
            ids = ", ".join(str(d.task.id) for d in batch[:10])
            log.warning("%d tasks not acked (%s): %s%s; the server delivers them again", len(batch), why, ids,
                        "..." if len(batch) > 10 else "")

    async def _run(self) -> None:
        """Sends the acks as they come, until cancelled."""
        while True:
            await self._wake.wait()
            self._wake.clear()
            while self._pending and not self._riders:
                batch = self.take()
                try:
                    results = await self._client.ack_batch(d.task for d in batch)
                except HourglassError as error:
                    await self._failed(batch, error)
                    continue
                except asyncio.CancelledError:
                    self._pending[:0] = batch
                    raise
                self._backoff.reset()
                self.settle(batch, results)
            if not self._pending:
                self._idle.set()

    async def _failed(self, batch: list[Delivery], error: HourglassError) -> None:
        """Keeps ``batch`` for the next try if the failure may pass. (The
        acks may have been applied before the answer was lost: acked again,
        they are answered ``not_found`` or ``stale_lease`` and counted lost,
        though the tasks are done.)"""
        if not error.retryable:
            self._lose(batch, str(error))
            return
        self._counts.retries += 1
        self._pending[:0] = batch
        wait_s = self._backoff.next_s()
        log.debug("%d acks failed (%s); trying again in %.2f s", len(batch), error, wait_s)
        await asyncio.sleep(wait_s)

    def start(self) -> None:
        """Starts sending, on the running event loop."""
        self._runner = asyncio.create_task(self._run(), name="hourglass-acks")

    async def stop(self, timeout_s: float) -> None:
        """Waits up to ``timeout_s`` for every ack to be sent, then stops;
        those left are lost (the server delivers their tasks again)."""
        try:
            await asyncio.wait_for(self._idle.wait(), timeout_s)
        except asyncio.TimeoutError:
            pass
        if self._runner is not None:
            self._runner.cancel()
            await asyncio.gather(self._runner, return_exceptions=True)
        self._lose(self.take(len(self._pending)), "not sent before the shutdown deadline")
