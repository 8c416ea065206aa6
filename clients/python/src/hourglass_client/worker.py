"""Workers: the consumer's loop, written once.

A worker claims tasks from one or more queues and runs a handler on each,
at most ``concurrency`` at a time:

- it claims in batches of up to its free slots, long-polling (``wait_ms``),
  and acks the handlers that returned in batches (``POST /v1/acks``);
- it extends each running handler's lease to ``lease_ms`` from now once half
  of it is left, so a handler may run longer than the lease and keep its
  task;
- a handler that raises has its task nacked, with ``Type: message`` of the
  exception (cut to 1 KiB) as the task's ``last_error``;
- while the server is unreachable or answers 5xx, 507 or 429, it backs off
  (doubling from 0.1 s to 5 s, jittered) and tries again; any other refusal
  of a claim (a wrong token, say) stops it with that error;
- on :meth:`~Worker.stop` (or SIGINT/SIGTERM under :meth:`Worker.run`) it
  stops claiming, waits up to ``shutdown_timeout_ms`` for the running
  handlers (a second signal stops the wait), sends the last acks, and
  returns its :class:`~hourglass_client.WorkerReport`.

Handlers that are coroutine functions run on the worker's event loop; any
other callable runs in a thread pool of ``concurrency`` threads. A handler
still running at the shutdown deadline is abandoned: an async one is
cancelled; a thread cannot be, so it runs on, unwaited (the threads are
daemons: the program may exit), while its task's lease runs out.

:class:`Worker` is for programs without an event loop: :meth:`Worker.run`
blocks. :class:`AsyncWorker` is the same worker for asyncio programs.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import sys
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, TypedDict, TypeVar

from ._engine import Config, Handler, WorkerRun
from ._transport import DEFAULT_TIMEOUT_MS
from .async_client import AsyncClient
from .limits import CLAIM_MAX, LEASE_MS_DEFAULT, LEASE_MS_MAX, LEASE_MS_MIN, WAIT_MS_MAX
from .report import Counts, WorkerReport

if TYPE_CHECKING:
    if sys.version_info >= (3, 11):
        from typing import Unpack
    else:
        from typing_extensions import Unpack

__all__ = ["AsyncWorker", "Handler", "Worker", "WorkerOptions"]

log = logging.getLogger("hourglass_client.worker")

#: Handlers run at once when not told.
DEFAULT_CONCURRENCY = 8
#: How long a claim waits for a task when none is due.
DEFAULT_WAIT_MS = 30_000
#: How long a stopping worker waits for its running handlers.
DEFAULT_SHUTDOWN_TIMEOUT_MS = 30_000

H = TypeVar("H", bound=Handler)


class WorkerOptions(TypedDict, total=False):
    """The keyword arguments of :class:`AsyncWorker` and :class:`Worker`."""

    token: str | None
    concurrency: int
    lease_ms: int
    wait_ms: int
    shutdown_timeout_ms: int
    nack_delay_ms: int | None
    timeout_ms: int


class AsyncWorker:
    """A worker for asyncio programs: ``await worker.run()``.

    ``client`` is an :class:`~hourglass_client.AsyncClient` (left open when
    the worker stops) or the server's URL (the worker makes its own client,
    with ``token`` and ``timeout_ms``). ``queues`` is one name or several.
    ``handler`` may be given here or with the :meth:`handler` decorator.

    - ``concurrency``: handlers run at once (1 to 1,000).
    - ``lease_ms``: each delivery's lease, extended while its handler runs.
    - ``wait_ms``: how long a claim waits for a task (at most 60 s).
    - ``shutdown_timeout_ms``: how long a stop waits for running handlers.
    - ``nack_delay_ms``: a failed task's delay before it is due again (the
      server's doubling retry backoff if ``None``).
    """

    def __init__(
        self,
        client: AsyncClient | str,
        queues: str | Sequence[str],
        handler: Handler | None = None,
        *,
        token: str | None = None,
        concurrency: int = DEFAULT_CONCURRENCY,
        lease_ms: int = LEASE_MS_DEFAULT,
        wait_ms: int = DEFAULT_WAIT_MS,
        shutdown_timeout_ms: int = DEFAULT_SHUTDOWN_TIMEOUT_MS,
        nack_delay_ms: int | None = None,
        timeout_ms: int = DEFAULT_TIMEOUT_MS,
    ) -> None:
        names = [queues] if isinstance(queues, str) else list(queues)
        _check(bool(names) and all(names), "queues must name at least one queue, none of them empty", names)
        _check(1 <= concurrency <= CLAIM_MAX, f"concurrency must be from 1 to {CLAIM_MAX}", concurrency)
        _check(LEASE_MS_MIN <= lease_ms <= LEASE_MS_MAX, f"lease_ms must be from {LEASE_MS_MIN} to {LEASE_MS_MAX}",
               lease_ms)
        _check(0 <= wait_ms <= WAIT_MS_MAX, f"wait_ms must be from 0 to {WAIT_MS_MAX}", wait_ms)
        _check(shutdown_timeout_ms >= 0, "shutdown_timeout_ms must not be negative", shutdown_timeout_ms)
        _check(nack_delay_ms is None or nack_delay_ms >= 0, "nack_delay_ms must not be negative", nack_delay_ms)
        self._client = client
        self._token = token
        self._timeout_ms = timeout_ms
        self._handler = handler
        self._config = Config(names, concurrency, lease_ms, wait_ms, shutdown_timeout_ms, nack_delay_ms)
        self._counts = Counts()
        self._run: WorkerRun | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop_asked = False

    @property
    def queues(self) -> list[str]:
        """The queues it claims from."""
        return list(self._config.queues)

    @property
    def report(self) -> WorkerReport:
        """The counts so far (of the current or the last run)."""
        return self._counts.report()

    def handler(self, handler: H) -> H:
        """Decorator: makes ``handler`` the worker's handler, and returns it."""
        self._handler = handler
        return handler

    def stop(self) -> None:
        """Stops the worker: no more claims; running handlers finish (up to
        ``shutdown_timeout_ms``). Safe from any thread, and before ``run``
        (which then returns at once)."""
        self._stop_asked = True
        loop, run = self._loop, self._run
        if loop is not None and run is not None and not loop.is_closed():
            loop.call_soon_threadsafe(run.stopping.set)

    async def run(self, *, handle_signals: bool = False) -> WorkerReport:
        """Runs until :meth:`stop` (or, with ``handle_signals``, SIGINT or
        SIGTERM: the first stops it, a second stops the wait for running
        handlers); returns what it did. Raises the error of a claim the
        server refused for good (:class:`~hourglass_client.Unauthorized`,
        say), after stopping as on :meth:`stop`."""
        handler = self._handler
        if handler is None:
            raise TypeError("the worker has no handler: pass handler=, or decorate one with @worker.handler")
        if self._run is not None:
            raise RuntimeError("the worker is running already")
        owned = not isinstance(self._client, AsyncClient)
        client = (
            self._client if isinstance(self._client, AsyncClient) else
            AsyncClient(self._client, token=self._token, timeout_ms=self._timeout_ms)
        )
        self._counts = Counts()
        self._loop = asyncio.get_running_loop()
        self._run = run = WorkerRun(client, handler, self._config, self._counts)
        if self._stop_asked:
            run.stopping.set()
        signals = self._handle_signals(run) if handle_signals else []
        config = self._config
        log.info("worker started on %s: queues %s, concurrency %d, lease %d ms", client.base_url,
                 ", ".join(config.queues), config.concurrency, config.lease_ms)
        try:
            await run()
        finally:
            for sig in signals:
                self._loop.remove_signal_handler(sig)
            if owned:
                await client.aclose()
            self._run = None
            self._stop_asked = False
        report = self._counts.report()
        log.info("worker stopped: %s", report)
        return report

    def _handle_signals(self, run: WorkerRun) -> list[signal.Signals]:
        """SIGINT and SIGTERM stop ``run``; a second stops its wait for the
        running handlers. Only the main thread can be given signals."""
        if threading.current_thread() is not threading.main_thread():
            log.debug("not in the main thread: SIGINT and SIGTERM are left alone")
            return []
        loop = asyncio.get_running_loop()

        def on_signal(sig: signal.Signals) -> None:
            if not run.stopping.is_set():
                log.info("%s: stopping; running handlers finish (%s again to abandon them)", sig.name, sig.name)
                run.stopping.set()
            else:
                log.warning("%s again: abandoning the running handlers", sig.name)
                run.abandoning.set()

        installed = []
        for sig in (signal.SIGINT, signal.SIGTERM):
            try:
                loop.add_signal_handler(sig, on_signal, sig)
            except (NotImplementedError, RuntimeError):  # not on this platform or loop
                continue
            installed.append(sig)
        return installed


class Worker:
    """A worker for programs without an event loop: :meth:`run` blocks.

    Takes the server's URL, the queues, the handler (or use the
    :meth:`handler` decorator) and the options of :class:`AsyncWorker`::

        worker = Worker("http://127.0.0.1:7463", "orders", concurrency=16)

        @worker.handler
        def close_if_unpaid(task: ClaimedTask) -> None:
            ...

        worker.run()  # until SIGINT or SIGTERM

    It is an :class:`AsyncWorker` on an event loop of its own, made by
    :meth:`run`: plain functions run in its thread pool, coroutine functions
    on its loop.
    """

    def __init__(
        self, base_url: str, queues: str | Sequence[str], handler: Handler | None = None,
        **options: Unpack[WorkerOptions]
    ) -> None:
        self._worker = AsyncWorker(base_url, queues, handler, **options)

    @property
    def queues(self) -> list[str]:
        """The queues it claims from."""
        return self._worker.queues

    @property
    def report(self) -> WorkerReport:
        """The counts so far (of the current or the last run): safe to read
        from another thread."""
        return self._worker.report

    def handler(self, handler: H) -> H:
        """Decorator: makes ``handler`` the worker's handler, and returns it."""
        return self._worker.handler(handler)

    def run(self, *, handle_signals: bool = True) -> WorkerReport:
        """Runs until :meth:`stop`, SIGINT or SIGTERM (when called from the
        main thread; a second signal stops the wait for running handlers);
        returns what it did."""
        return asyncio.run(self._worker.run(handle_signals=handle_signals))

    def stop(self) -> None:
        """Stops the worker (from another thread or a handler): no more
        claims; running handlers finish, up to ``shutdown_timeout_ms``."""
        self._worker.stop()


def _check(ok: bool, message: str, value: object) -> None:
    if not ok:
        raise ValueError(f"{message}, not {value!r}")
