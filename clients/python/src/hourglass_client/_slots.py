"""The worker's concurrency limit: slots a claim reserves before it asks,
so that the server never hands the worker more tasks than it can run."""

from __future__ import annotations

import asyncio


#: How long a claim waits for more slots to free up when fewer than half
#: its share are: handlers that end one by one (in threads) would otherwise
#: make claims of one or two tasks, a request each. A slot left idle this
#: long costs a slow handler nothing to speak of.
GATHER_S = 0.002


class Slots:
    """``limit`` slots, taken by claims and given back as handlers end.

    A claim takes up to its share of the free slots before it is sent (and
    waits while none is free, and ``GATHER_S`` more while fewer than half
    its share are), then gives back what the server did not fill.
    Single-threaded: used only on the worker's event loop.
    """

    def __init__(self, limit: int) -> None:
        if limit < 1:
            raise ValueError(f"concurrency must be at least 1, not {limit}")
        self.limit = limit
        self.free = limit
        self._freed = asyncio.Event()

    async def take(self, most: int) -> int:
        """Waits for a free slot, then takes up to ``most`` of those free."""
        while self.free == 0:
            self._freed.clear()
            await self._freed.wait()
        if self.free < most / 2:
            await asyncio.sleep(GATHER_S)
        taken = min(self.free, most)
        self.free -= taken
        return taken

    def give(self, count: int) -> None:
        """``count`` slots are free again."""
        self.free += count
        assert 0 <= self.free <= self.limit, f"free {self.free} of {self.limit} after giving {count}"
        if count:
            self._freed.set()
