"""Keeping the leases of running handlers alive."""

from __future__ import annotations

import asyncio
import logging
import time

from ._delivery import Delivery
from .async_client import AsyncClient
from .errors import HourglassError, NotFound, StaleLease
from .report import Counts

log = logging.getLogger("hourglass_client.worker")

#: Looks at the leases this many times a lease.
TICKS_PER_LEASE = 6
#: A lease is extended once less than this share of it is left: well before
#: it ends, with ticks to spare to try a failed extend again.
EXTEND_BELOW = 1 / 2
#: Never looks more often than this, however short the lease.
TICK_S_MIN = 0.01

assert 1 / TICKS_PER_LEASE < EXTEND_BELOW < 1, "at least one tick between extending and the end"


class LeaseKeeper:
    """Extends each held delivery's lease to ``lease_ms`` from now once less
    than half of it is left, for as long as its handler runs.

    One loop looks at every lease ``TICKS_PER_LEASE`` times a lease, rather
    than a timer per delivery: a worker holds at most its concurrency, and
    the look costs nothing next to a handler. An extend that fails for a
    reason that may pass (the server unreachable, 5xx) is tried again at the
    next tick, past the lease's end too (the server may not have expired it:
    it says so if it did). One answered ``stale_lease`` or ``not_found``
    makes the delivery stale: logged, no more extends, and no ack or nack
    once its handler ends (the server has delivered the task again).
    """

    def __init__(self, client: AsyncClient, lease_ms: int, counts: Counts) -> None:
        self._client = client
        self._lease_ms = lease_ms
        self._counts = counts
        self._held: dict[int, Delivery] = {}
        self._extends: set[asyncio.Task[None]] = set()
        self._runner: asyncio.Task[None] | None = None
        self.tick_s = max(TICK_S_MIN, lease_ms / 1000 / TICKS_PER_LEASE)

    def hold(self, delivery: Delivery) -> None:
        """Keeps ``delivery``'s lease alive until :meth:`release`."""
        self._held[id(delivery)] = delivery

    def release(self, delivery: Delivery) -> None:
        """Its handler ended: no more extends."""
        self._held.pop(id(delivery), None)

    def start(self) -> None:
        """Starts looking, on the running event loop."""
        self._runner = asyncio.create_task(self._run(), name="hourglass-leases")

    async def stop(self) -> None:
        """Stops looking, and any extend on its way."""
        tasks = [*self._extends, *([self._runner] if self._runner is not None else [])]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.tick_s)
            self.look(time.monotonic())

    def look(self, now: float) -> None:
        """Extends the leases that need it."""
        for delivery in list(self._held.values()):
            left_s = delivery.left_s(now)
            if left_s <= 0 and not delivery.overdue:
                delivery.overdue = True
                log.warning("task %d of %s: its lease may have run out (no extend got through); still trying",
                            delivery.task.id, delivery.task.queue)
            if left_s < self._lease_ms / 1000 * EXTEND_BELOW and not delivery.extending:
                delivery.extending = True
                extend = asyncio.create_task(self._extend(delivery))
                self._extends.add(extend)
                extend.add_done_callback(self._extends.discard)

    async def _extend(self, delivery: Delivery) -> None:
        sent = time.monotonic()
        try:
            await self._client.extend(delivery.task.id, delivery.task.lease, self._lease_ms)
        except (StaleLease, NotFound) as error:
            self._stale(delivery, error.code)
        except HourglassError as error:
            if not error.retryable:
                self._stale(delivery, str(error))
                return
            self._counts.retries += 1
            log.debug("task %d: extend failed, trying again at the next look: %s", delivery.task.id, error)
        else:
            delivery.deadline = sent + self._lease_ms / 1000
            delivery.overdue = False
        finally:
            delivery.extending = False

    def _stale(self, delivery: Delivery, why: str) -> None:
        delivery.stale = True
        self.release(delivery)
        log.warning("task %d of %s: lease lost (%s) while its handler runs; the server delivers it again",
                    delivery.task.id, delivery.task.queue, why)
