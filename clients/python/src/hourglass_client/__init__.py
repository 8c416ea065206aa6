"""A client of hourglass, the durable delayed-task scheduler, and a worker.

Produce with a :class:`Client` (or, in asyncio code, an
:class:`AsyncClient`)::

    from hourglass_client import Client

    with Client("http://127.0.0.1:7463") as client:
        client.enqueue("orders", {"order": 42}, delay_ms=30 * 60_000)

Consume with a :class:`Worker` (or an :class:`AsyncWorker`): it claims,
runs the handler, keeps the lease, acks or nacks, backs off while the server
is away, and stops cleanly on SIGINT or SIGTERM::

    from hourglass_client import ClaimedTask, Worker

    worker = Worker("http://127.0.0.1:7463", "orders", concurrency=16)

    @worker.handler
    def close_if_unpaid(task: ClaimedTask) -> None:
        ...  # raise to nack: the exception becomes the task's last_error

    report = worker.run()

A payload is any JSON value, or ``bytes`` (sent as base64, read back as
``bytes``; every task also has ``payload_bytes``).

Errors are :class:`HourglassError`\\ s: :class:`ApiError` with the server's
``status`` and ``code`` (a subclass per kind: :class:`NotFound`,
:class:`StaleLease`...), :class:`Unreachable`, :class:`DecodeError`.
Logs go to the ``hourglass_client`` logger.
"""

from __future__ import annotations

import logging

from ._version import __version__
from .async_client import AsyncClient
from .client import Client
from .errors import (
    ApiError,
    Conflict,
    DecodeError,
    Forbidden,
    HourglassError,
    InvalidRequest,
    NotFound,
    OverBudget,
    PayloadTooLarge,
    ServerError,
    StaleLease,
    TooMany,
    Unauthorized,
    Unreachable,
    Unsupported,
)
from .models import (
    AckResult,
    Claim,
    ClaimedTask,
    DeadReason,
    Enqueued,
    EnqueuedBatch,
    ErrorDetail,
    Lateness,
    Misfire,
    Node,
    Nodes,
    Overlap,
    Payload,
    HttpTarget,
    PushTarget,
    Queue,
    QueueSettings,
    Queues,
    Run,
    Schedule,
    SchedulePage,
    State,
    Task,
    TaskPage,
    Totals,
)
from .options import HttpOptions, NewTask, PushOptions, ScheduleOptions, TaskOptions
from .report import WorkerReport
from .worker import AsyncWorker, Handler, Worker, WorkerOptions

# A library logs, and leaves where the logs go to the program.
logging.getLogger(__name__).addHandler(logging.NullHandler())

__all__ = [
    "AckResult",
    "ApiError",
    "AsyncClient",
    "AsyncWorker",
    "Claim",
    "ClaimedTask",
    "Client",
    "Conflict",
    "DeadReason",
    "DecodeError",
    "Enqueued",
    "EnqueuedBatch",
    "ErrorDetail",
    "Forbidden",
    "Handler",
    "HourglassError",
    "HttpOptions",
    "HttpTarget",
    "InvalidRequest",
    "Lateness",
    "Misfire",
    "NewTask",
    "Node",
    "Nodes",
    "NotFound",
    "OverBudget",
    "Overlap",
    "Payload",
    "PayloadTooLarge",
    "PushOptions",
    "PushTarget",
    "Queue",
    "QueueSettings",
    "Queues",
    "Run",
    "Schedule",
    "ScheduleOptions",
    "SchedulePage",
    "ServerError",
    "StaleLease",
    "State",
    "Task",
    "TaskOptions",
    "TaskPage",
    "TooMany",
    "Totals",
    "Unauthorized",
    "Unreachable",
    "Unsupported",
    "Worker",
    "WorkerOptions",
    "WorkerReport",
    "__version__",
]
