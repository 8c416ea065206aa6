"""The threads that run a worker's synchronous handlers.

Not a ``concurrent.futures.ThreadPoolExecutor``: the interpreter joins that
pool's threads before it exits, so a handler the worker abandoned at its
shutdown deadline (or on a second signal) would keep the process alive
until it returned. These threads are daemons: once the worker has stopped,
the program may exit, and an abandoned handler goes with it (its task's
lease runs out and the server delivers it again, as the worker reported).
"""

from __future__ import annotations

import asyncio
import queue
import threading
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")
R = TypeVar("R")

#: A handler call: the function, its argument, and where its result goes.
_Job = tuple[Callable[[Any], Any], Any, "asyncio.Future[Any]", asyncio.AbstractEventLoop]


class HandlerThreads:
    """Up to ``size`` daemon threads, started as calls need them."""

    def __init__(self, size: int, name: str = "hourglass-handler") -> None:
        if size < 1:
            raise ValueError(f"size must be at least 1, not {size}")
        self._size = size
        self._name = name
        self._jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._threads = 0
        #: Calls submitted and not yet returned.
        self._busy = 0

    def call(self, function: Callable[[T], R], argument: T) -> asyncio.Future[R]:
        """``function(argument)`` in a thread; its result (or exception) on
        the running loop."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[R] = loop.create_future()
        with self._lock:
            self._busy += 1
            start = self._busy > self._threads and self._threads < self._size
            if start:
                self._threads += 1
        if start:
            threading.Thread(target=self._work, name=f"{self._name}-{self._threads}", daemon=True).start()
        self._jobs.put((function, argument, future, loop))
        return future

    def shutdown(self) -> None:
        """Each thread ends once its current call returns; nothing waits."""
        for _ in range(self._threads):
            self._jobs.put(None)

    def _work(self) -> None:
        while (job := self._jobs.get()) is not None:
            function, argument, future, loop = job
            try:
                result, error = function(argument), None
            except Exception as raised:
                result, error = None, raised
            except BaseException as raised:  # SystemExit, KeyboardInterrupt: a failure of this task
                result, error = None, RuntimeError(f"the handler raised {raised!r}")
            with self._lock:
                self._busy -= 1
            try:
                loop.call_soon_threadsafe(_settle, future, result, error)
            except RuntimeError:  # the loop closed: the worker stopped without this handler
                pass


def _settle(future: asyncio.Future[Any], result: Any, error: BaseException | None) -> None:
    if future.cancelled():  # abandoned
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(result)
