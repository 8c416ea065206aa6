"""The asyncio client: the same methods as :class:`~hourglass_client.Client`, as coroutines."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Iterable
from types import TracebackType
from typing import TYPE_CHECKING, TypeVar

import httpx

from . import _calls as calls
from ._calls import AckRef, Call
from ._transport import DEFAULT_TIMEOUT_MS, Transport, follow_async
from .errors import Unreachable
from .models import AckResult, ClaimedTask, Enqueued, EnqueuedBatch, Queue, Queues, Schedule, SchedulePage, State, Task
from .models import Claim, Nodes, Payload, QueueSettings, TaskPage
from .options import NewTask, PushOptions, ScheduleOptions, TaskOptions

if TYPE_CHECKING:
    if sys.version_info >= (3, 11):
        from typing import Self, Unpack
    else:
        from typing_extensions import Self, Unpack

__all__ = ["AsyncClient"]

T = TypeVar("T")


class AsyncClient:
    """A client of one hourglass server for asyncio code: the methods of
    :class:`~hourglass_client.Client`, each a coroutine, on an
    ``httpx.AsyncClient`` (give ``http`` to use your own). Use it as an
    async context manager, or await :meth:`aclose`::

        async with AsyncClient("http://127.0.0.1:7463") as client:
            for task in await client.claim("orders", max_tasks=10, wait_ms=10_000):
                ...
                await client.ack(task.id, task.lease)
    """

    def __init__(
        self,
        base_url: str = "http://127.0.0.1:7463",
        *,
        token: str | None = None,
        timeout_ms: int = DEFAULT_TIMEOUT_MS,
        http: httpx.AsyncClient | None = None,
    ) -> None:
        self._transport = Transport(base_url, token, timeout_ms)
        self._owns_http = http is None
        self._http = http if http is not None else httpx.AsyncClient()
        self._http.base_url = httpx.URL(self._transport.base_url)
        self._http.headers.update(self._transport.headers)

    @property
    def base_url(self) -> str:
        """The server's address, as given (without a trailing ``/``)."""
        return self._transport.base_url

    async def aclose(self) -> None:
        """Closes the connections (unless ``http`` was given)."""
        if self._owns_http:
            await self._http.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None, traceback: TracebackType | None
    ) -> None:
        await self.aclose()

    async def _send(self, call: Call[T]) -> T:
        url = self._transport.url(call)
        try:
            response = await self._http.request(
                call.method, call.path, json=call.body, params=call.params, timeout=self._transport.timeout(call)
            )
        except httpx.TransportError as error:
            raise Unreachable(call.method, url, repr(error)) from error
        return calls.answer(call, url, response.status_code, response.content)

    # The server and its queues.

    async def healthz(self) -> str:
        """``GET /healthz``: ``"ok"`` from a server that is up."""
        return await self._send(calls.healthz())

    async def metrics(self) -> str:
        """``GET /metrics``: the Prometheus text exposition."""
        return await self._send(calls.metrics())

    async def nodes(self) -> Nodes:
        """``GET /v1/nodes``: the nodes that share the store, each with its
        shards and its latest heartbeat; ``nodes`` is ``None`` for a server
        in one process. Needs ``read`` on every queue (``*``)."""
        return await self._send(calls.nodes())

    async def queues(self) -> Queues:
        """``GET /v1/queues``: every queue's counts, and the server's totals."""
        return await self._send(calls.queues())

    async def queue(self, name: str) -> Queue:
        """``GET /v1/queues/{queue}``: one queue's counts. :class:`NotFound`
        for a queue that never held a task."""
        return await self._send(calls.queue(name))

    async def pause_queue(self, name: str) -> Queue:
        """``POST /v1/queues/{queue}/pause``: claims hand out nothing until
        it is resumed (across restarts too); enqueues go on."""
        return await self._send(calls.pause_queue(name))

    async def resume_queue(self, name: str) -> Queue:
        """``POST /v1/queues/{queue}/resume``."""
        return await self._send(calls.resume_queue(name))

    async def settings(self, name: str) -> QueueSettings:
        """``GET /v1/queues/{queue}/settings``: its push target, rate and
        cap on tasks in flight (all ``None`` for a queue never set)."""
        return await self._send(calls.settings(name))

    async def put_settings(
        self,
        name: str,
        *,
        push: PushOptions | None = None,
        rate_per_s: float | None = None,
        burst: int | None = None,
        max_in_flight: int | None = None,
    ) -> QueueSettings:
        """``PUT /v1/queues/{queue}/settings``: replaces them whole (what is
        left out is unset); answers them as they now hold."""
        return await self._send(calls.put_settings(name, push, rate_per_s, burst, max_in_flight))

    async def delete_dead(self, name: str) -> int:
        """``DELETE /v1/queues/{queue}/dead``: deletes the queue's dead
        tasks; how many."""
        return await self._send(calls.delete_dead(name))

    # Tasks.

    async def enqueue(self, queue: str, payload: Payload = None, **options: Unpack[TaskOptions]) -> Enqueued:
        """``POST /v1/queues/{queue}/tasks``: enqueues ``payload`` (any
        JSON, or ``bytes``, ``bytearray`` or ``memoryview``: sent as
        ``payload_base64``), due now or as ``options`` say (``delay_ms``,
        ``run_at_ms``, ``key``, ``max_attempts``...). With a ``key`` that
        names a live task, that task (``created`` false)."""
        return await self._send(calls.enqueue(queue, payload, options))

    async def enqueue_batch(self, queue: str, tasks: Iterable[NewTask]) -> EnqueuedBatch:
        """``POST /v1/queues/{queue}/tasks/batch``: up to 1,000 tasks, all or
        none (``[{"payload": ..., "delay_ms": ...}, ...]``; a payload of
        bytes as in :meth:`enqueue`)."""
        return await self._send(calls.enqueue_batch(queue, tasks))

    async def get_task(self, task_id: int) -> Task:
        """``GET /v1/tasks/{id}``. :class:`NotFound` once it is done."""
        return await self._send(calls.get_task(task_id))

    async def cancel(self, task_id: int) -> None:
        """``DELETE /v1/tasks/{id}``: removes the task, whatever its state
        (a leased one's ack is then refused)."""
        await self._send(calls.cancel(task_id))

    async def reschedule(self, task_id: int, *, delay_ms: int | None = None, run_at_ms: int | None = None) -> Task:
        """``PATCH /v1/tasks/{id}``: a new due time (one of the two) for a
        task that is not leased (:class:`Conflict` if it is)."""
        return await self._send(calls.reschedule(task_id, delay_ms, run_at_ms))

    async def find_by_key(self, queue: str, key: str) -> Task:
        """``GET /v1/queues/{queue}/keys/{key}``: the live task with ``key``."""
        return await self._send(calls.find_by_key(queue, key))

    async def list_tasks(
        self, queue: str, *, state: State | str | None = None, after: str | None = None, limit: int | None = None
    ) -> TaskPage:
        """``GET /v1/queues/{queue}/tasks``: one page of the queue's tasks
        (in ``state``, or all); pass its ``next`` as ``after`` for the next."""
        return await self._send(calls.list_tasks(queue, state, after, limit))

    def iter_tasks(self, queue: str, *, state: State | str | None = None, page: int | None = None) -> AsyncIterator[Task]:
        """Every task of the queue (in ``state``, or all), a page of ``page``
        tasks at a time, following the cursor."""
        return follow_async(lambda after: self.list_tasks(queue, state=state, after=after, limit=page))

    async def list_dead(self, queue: str, *, after: str | None = None, limit: int | None = None) -> TaskPage:
        """``GET /v1/queues/{queue}/dead``: one page of the dead tasks."""
        return await self._send(calls.list_dead(queue, after, limit))

    def iter_dead(self, queue: str, *, page: int | None = None) -> AsyncIterator[Task]:
        """Every dead task of the queue, a page at a time."""
        return follow_async(lambda after: self.list_dead(queue, after=after, limit=page))

    # Deliveries.

    async def claim(
        self, queue: str, *, max_tasks: int = 1, lease_ms: int | None = None, wait_ms: int = 0
    ) -> list[ClaimedTask]:
        """``POST /v1/queues/{queue}/claim``: up to ``max_tasks`` due tasks,
        oldest first, each leased for ``lease_ms`` (the task's own or 30 s if
        ``None``); waits up to ``wait_ms`` (at most 60 s) for one when none
        is due, then answers none."""
        return await self._send(calls.claim(queue, max_tasks, lease_ms, wait_ms))

    async def claim_and_ack(
        self,
        queue: str,
        acks: Iterable[AckRef],
        *,
        max_tasks: int = 1,
        lease_ms: int | None = None,
        wait_ms: int = 0,
    ) -> Claim:
        """``POST /v1/queues/{queue}/claim`` with ``"acks"``: first acks
        ``acks`` (up to 1,000, as :meth:`ack_batch` does, each answered in
        ``acks`` of the answer), then claims as :meth:`claim` does; one
        request for both."""
        return await self._send(calls.claim_and_ack(queue, acks, max_tasks, lease_ms, wait_ms))

    async def ack(self, task_id: int, lease: str) -> None:
        """``POST /v1/tasks/{id}/ack``: the delivery is done; the task is
        removed (or, recurring, scheduled again). :class:`StaleLease` if the
        lease is not current."""
        await self._send(calls.ack(task_id, lease))

    async def ack_batch(self, acks: Iterable[AckRef]) -> list[AckResult]:
        """``POST /v1/acks``: up to 1,000 acks (claimed tasks, or ``(id,
        lease)`` pairs), each acked as if alone and answered in order."""
        return await self._send(calls.ack_batch(acks))

    async def nack(self, task_id: int, lease: str, *, reason: str | None = None, delay_ms: int | None = None) -> Task:
        """``POST /v1/tasks/{id}/nack``: the delivery failed, for ``reason``
        (up to 1 KiB of UTF-8: the task's ``last_error``); due again after
        ``delay_ms`` (the retry backoff if ``None``), or dead if out of
        attempts."""
        return await self._send(calls.nack(task_id, lease, reason, delay_ms))

    async def extend(self, task_id: int, lease: str, lease_ms: int) -> int:
        """``POST /v1/tasks/{id}/extend``: the lease runs ``lease_ms`` from
        now; when it ends, Unix ms."""
        return await self._send(calls.extend(task_id, lease, lease_ms))

    async def retry(self, task_id: int) -> Task:
        """``POST /v1/tasks/{id}/retry``: a dead task due again, its attempts
        anew (:class:`Conflict` if it is not dead)."""
        return await self._send(calls.retry(task_id))

    # Schedules.

    async def put_schedule(
        self, name: str, queue: str, payload: Payload = None, **options: Unpack[ScheduleOptions]
    ) -> tuple[Schedule, bool]:
        """``PUT /v1/schedules/{name}``: makes or replaces the schedule (give
        ``cron`` with ``time_zone``, or ``every_ms``; ``payload`` as
        :meth:`enqueue` takes it); the schedule, and whether it is new."""
        return await self._send(calls.put_schedule(name, queue, payload, options))

    async def get_schedule(self, name: str) -> Schedule:
        """``GET /v1/schedules/{name}``: with its next runs and its last."""
        return await self._send(calls.get_schedule(name))

    async def list_schedules(self, *, after: str | None = None, limit: int | None = None) -> SchedulePage:
        """``GET /v1/schedules``: one page of the schedules, by name."""
        return await self._send(calls.list_schedules(after, limit))

    def iter_schedules(self, *, page: int | None = None) -> AsyncIterator[Schedule]:
        """Every schedule, by name, a page at a time."""
        return follow_async(lambda after: self.list_schedules(after=after, limit=page))

    async def pause_schedule(self, name: str) -> Schedule:
        """``POST /v1/schedules/{name}/pause``: nothing is enqueued until resumed."""
        return await self._send(calls.pause_schedule(name))

    async def resume_schedule(self, name: str) -> Schedule:
        """``POST /v1/schedules/{name}/resume``: the occurrences missed
        meanwhile go to its misfire policy."""
        return await self._send(calls.resume_schedule(name))

    async def delete_schedule(self, name: str) -> None:
        """``DELETE /v1/schedules/{name}``."""
        await self._send(calls.delete_schedule(name))
