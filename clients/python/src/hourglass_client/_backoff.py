"""How long to wait before trying again: doubling, bounded, jittered."""

from __future__ import annotations

import random
from collections.abc import Callable

#: The first wait after a failure.
FIRST_MS = 100
#: The longest wait, however long the failures go on.
MAX_MS = 5_000

assert 0 < FIRST_MS <= MAX_MS


class Backoff:
    """Waits that double from ``first_ms`` up to ``max_ms`` while failures go
    on, each drawn from the upper half of its range ("equal jitter"), so that
    many workers that lost the same server do not come back in step, and
    none waits less than half its step. :meth:`reset` after a success."""

    def __init__(
        self, first_ms: int = FIRST_MS, max_ms: int = MAX_MS, rng: Callable[[], float] = random.random
    ) -> None:
        if not 0 < first_ms <= max_ms:
            raise ValueError(f"need 0 < first_ms <= max_ms, not {first_ms} and {max_ms}")
        self._first_ms = first_ms
        self._max_ms = max_ms
        self._random = rng
        self._failures = 0

    @property
    def failures(self) -> int:
        """Failures since the last :meth:`reset`."""
        return self._failures

    def next_s(self) -> float:
        """The wait after one more failure, in seconds."""
        # Doubling stops at the cap; the exponent is bounded so that a long
        # outage never makes a huge integer.
        step_ms = min(self._max_ms, self._first_ms << min(self._failures, 32))
        self._failures += 1
        wait_ms = step_ms / 2 + self._random() * step_ms / 2
        assert step_ms / 2 <= wait_ms <= self._max_ms, (step_ms, wait_ms)
        return wait_ms / 1000

    def reset(self) -> None:
        """A success: the next failure waits ``first_ms`` again."""
        self._failures = 0
