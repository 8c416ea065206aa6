"""What the API answers, as frozen dataclasses.

Answers are read, so they are classes: attributes a checker and an editor
know, states as enums, immutable, with a readable ``repr``. (What a client
*sends* is a ``TypedDict`` instead, in :mod:`hourglass_client.options`: it is
the JSON body itself.)

Each class reads itself from the JSON with ``from_json``. Reading is lenient
as the API asks of clients: a field the server adds is ignored, and an
optional field the server leaves out is ``None``. Times are Unix
milliseconds and durations milliseconds (``_ms``), as on the wire.

A payload (:data:`Payload`) is whatever JSON it was (a dict, list, str,
number, bool or None), or ``bytes`` when it is not JSON: the server shows a
payload whose bytes are JSON text as ``payload`` (that JSON), and any other
as ``payload_base64``, which is read back into the bytes. So bytes that
happen to be JSON text come back as JSON; ``payload_bytes`` gives the bytes
whichever way the payload came.
"""

from __future__ import annotations

import base64
import binascii
import enum
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypeAlias

__all__ = [
    "AckResult",
    "ClaimedTask",
    "DeadReason",
    "Enqueued",
    "EnqueuedBatch",
    "ErrorDetail",
    "HttpTarget",
    "Lateness",
    "Misfire",
    "Node",
    "Nodes",
    "Overlap",
    "Payload",
    "PushTarget",
    "Queue",
    "QueueSettings",
    "Queues",
    "Run",
    "Schedule",
    "SchedulePage",
    "State",
    "Task",
    "TaskPage",
    "Totals",
]

JSONObject = Mapping[str, Any]

#: A task's payload: any JSON value (dict, list, str, int, float, bool or
#: None), or bytes. Sent, ``bytes``, ``bytearray`` and ``memoryview`` go as
#: ``payload_base64`` and anything else as JSON; read, it is the JSON value,
#: or ``bytes`` for a payload that is not JSON text. ``Any``, since a JSON
#: value is not a type Python spells usefully.
Payload: TypeAlias = Any


class State(str, enum.Enum):
    """A task's state: scheduled → due → leased → done (removed), or dead."""

    SCHEDULED = "scheduled"
    DUE = "due"
    LEASED = "leased"
    DEAD = "dead"


class Misfire(str, enum.Enum):
    """What a schedule does with the occurrences it missed."""

    SKIP = "skip"
    ONCE = "once"
    ALL = "all"


class Overlap(str, enum.Enum):
    """What a schedule does when an occurrence comes while its last task lives."""

    ALLOW = "allow"
    FORBID = "forbid"


class DeadReason(str, enum.Enum):
    """Why a task is dead."""

    #: Out of attempts, or nacked as dead.
    ATTEMPTS = "attempts"
    #: Not delivered by its expiry.
    EXPIRED = "expired"
    #: Its payload was found damaged when it was handed out.
    CORRUPT = "corrupt"


def _opt_int(data: JSONObject, key: str) -> int | None:
    value = data.get(key)
    return None if value is None else int(value)


def _opt_str(data: JSONObject, key: str) -> str | None:
    value = data.get(key)
    return None if value is None else str(value)


def _read_payload(data: JSONObject) -> Payload:
    """The payload of an answer: its ``payload`` (JSON), or its
    ``payload_base64`` decoded into ``bytes``. A ``ValueError`` (a
    :class:`~hourglass_client.DecodeError` from a client) when
    ``payload_base64`` is not standard base64 with padding, or comes with a
    ``payload`` that is not null."""
    encoded = data.get("payload_base64")
    if encoded is None:
        return data["payload"]
    if data.get("payload") is not None:
        raise ValueError("the answer has both payload and payload_base64")
    if not isinstance(encoded, str):
        raise ValueError(f"payload_base64 is not a string but {type(encoded).__name__}")
    try:
        return base64.b64decode(encoded, validate=True)
    except binascii.Error as error:
        raise ValueError(f"payload_base64 is not standard base64 with padding ({error}): {encoded[:40]!r}") from error


def _as_bytes(payload: Payload) -> bytes:
    """``payload`` as bytes: the bytes themselves, or a JSON value's compact
    UTF-8 JSON text."""
    if isinstance(payload, bytes):
        return payload
    return json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


@dataclass(frozen=True, slots=True)
class HttpTarget:
    """Where a task is delivered by push: an HTTP request, its payload the body."""

    url: str
    method: str
    headers: Mapping[str, str]

    @classmethod
    def from_json(cls, data: JSONObject) -> HttpTarget:
        headers = data.get("headers") or {}
        return cls(url=str(data["url"]), method=str(data.get("method", "POST")), headers=dict(headers))


@dataclass(frozen=True, slots=True)
class PushTarget:
    """A queue's push target: where each of its tasks without one of its own goes."""

    url: str
    method: str
    headers: Mapping[str, str]
    #: How long a delivery may take.
    timeout_ms: int

    @classmethod
    def from_json(cls, data: JSONObject) -> PushTarget:
        http = HttpTarget.from_json(data)
        return cls(url=http.url, method=http.method, headers=http.headers, timeout_ms=int(data["timeout_ms"]))


@dataclass(frozen=True, slots=True)
class QueueSettings:
    """A queue's settings (``GET /v1/queues/{queue}/settings``): its push
    target and its flow control. ``None`` is unset."""

    push: PushTarget | None = None
    #: Tasks handed out a second, on average (a token bucket's rate).
    rate_per_s: float | None = None
    #: The bucket's size: the most handed out at once.
    burst: int | None = None
    #: Tasks leased at once, at most, pulled and pushed together.
    max_in_flight: int | None = None

    @classmethod
    def from_json(cls, data: JSONObject) -> QueueSettings:
        push = data.get("push")
        rate = data.get("rate_per_s")
        return cls(
            push=None if push is None else PushTarget.from_json(push),
            rate_per_s=None if rate is None else float(rate),
            burst=_opt_int(data, "burst"),
            max_in_flight=_opt_int(data, "max_in_flight"),
        )


@dataclass(frozen=True, slots=True)
class Task:
    """A task as ``GET /v1/tasks/{id}``, listings, nack, retry and
    reschedule show it. Fields that do not apply are ``None``."""

    id: int
    queue: str
    state: State
    #: The payload as it was enqueued: its JSON, or ``bytes`` if it is not
    #: JSON text (see :attr:`payload_bytes`).
    payload: Payload
    #: When it is (or was) due.
    run_at_ms: int
    #: Deliveries so far.
    attempt: int
    #: Deliveries before it dies; 0 for no limit.
    max_attempts: int
    #: Lower first among tasks due together.
    priority: int
    created_ms: int
    #: The task's own lease, if it has one.
    lease_ms: int | None = None
    #: Its idempotency key.
    key: str | None = None
    #: Its period, for a recurring task.
    every_ms: int | None = None
    #: When its lease ends, while leased.
    lease_until_ms: int | None = None
    #: When it dies if not delivered by then.
    expires_at_ms: int | None = None
    dead_reason: DeadReason | None = None
    #: Why its latest delivery failed: a nack's reason, ``lease expired``, or
    #: what a push's receiver answered.
    last_error: str | None = None
    #: Its own push target, if it has one.
    http: HttpTarget | None = None

    @property
    def payload_bytes(self) -> bytes:
        """The payload as bytes, whichever way it came: ``payload`` when it
        is ``bytes``, else its JSON as compact UTF-8 text. Exact only for a
        payload sent as bytes: for one sent as JSON it is that JSON written
        again, compact, which need not be the very text that was sent
        (spacing, escapes, the digits of a number).
        """
        return _as_bytes(self.payload)

    @classmethod
    def from_json(cls, data: JSONObject) -> Task:
        dead_reason = data.get("dead_reason")
        http = data.get("http")
        return cls(
            id=int(data["id"]),
            queue=str(data["queue"]),
            state=State(data["state"]),
            payload=_read_payload(data),
            run_at_ms=int(data["run_at_ms"]),
            attempt=int(data["attempt"]),
            max_attempts=int(data["max_attempts"]),
            priority=int(data["priority"]),
            created_ms=int(data["created_ms"]),
            lease_ms=_opt_int(data, "lease_ms"),
            key=_opt_str(data, "key"),
            every_ms=_opt_int(data, "every_ms"),
            lease_until_ms=_opt_int(data, "lease_until_ms"),
            expires_at_ms=_opt_int(data, "expires_at_ms"),
            dead_reason=None if dead_reason is None else DeadReason(dead_reason),
            last_error=_opt_str(data, "last_error"),
            http=None if http is None else HttpTarget.from_json(http),
        )


@dataclass(frozen=True, slots=True)
class ClaimedTask:
    """A delivery: a task handed out by a claim. Ack, nack or extend it with
    ``lease`` before ``lease_until_ms``, or it is delivered again."""

    id: int
    queue: str
    #: Its JSON, or ``bytes`` if it is not JSON text (see :attr:`payload_bytes`).
    payload: Payload
    #: Which delivery this is, from 1.
    attempt: int
    #: This delivery's token: 16 hex digits.
    lease: str
    #: When the lease ends, on the server's clock.
    lease_until_ms: int
    #: When the task was due.
    run_at_ms: int

    @property
    def payload_bytes(self) -> bytes:
        """The payload as bytes, as :attr:`Task.payload_bytes` says."""
        return _as_bytes(self.payload)

    @classmethod
    def from_json(cls, data: JSONObject) -> ClaimedTask:
        return cls(
            id=int(data["id"]),
            queue=str(data["queue"]),
            payload=_read_payload(data),
            attempt=int(data["attempt"]),
            lease=str(data["lease"]),
            lease_until_ms=int(data["lease_until_ms"]),
            run_at_ms=int(data["run_at_ms"]),
        )


@dataclass(frozen=True, slots=True)
class Enqueued:
    """The answer to an enqueue."""

    id: int
    run_at_ms: int
    #: New (201), or ``False`` when its key named a live task (200: then
    #: that task's id). ``None`` in a batch's answer, which counts them.
    created: bool | None = None

    @classmethod
    def from_json(cls, data: JSONObject, created: bool | None = None) -> Enqueued:
        return cls(id=int(data["id"]), run_at_ms=int(data["run_at_ms"]), created=created)


@dataclass(frozen=True, slots=True)
class EnqueuedBatch:
    """The answer to a batch enqueue: each task's answer, in the order sent."""

    #: How many are new (the others' keys named live tasks).
    created: int
    tasks: list[Enqueued]

    @classmethod
    def from_json(cls, data: JSONObject) -> EnqueuedBatch:
        return cls(created=int(data["created"]), tasks=[Enqueued.from_json(t) for t in data["tasks"]])


@dataclass(frozen=True, slots=True)
class TaskPage:
    """A page of a listing. Pass ``next`` as ``after`` for the next page;
    ``None`` on the last."""

    tasks: list[Task]
    next: str | None

    @property
    def items(self) -> list[Task]:
        return self.tasks

    @classmethod
    def from_json(cls, data: JSONObject) -> TaskPage:
        return cls(tasks=[Task.from_json(t) for t in data["tasks"]], next=_opt_str(data, "next"))


@dataclass(frozen=True, slots=True)
class ErrorDetail:
    """An error as the API writes it: a stable code and a message."""

    code: str
    message: str

    @classmethod
    def from_json(cls, data: JSONObject) -> ErrorDetail:
        return cls(code=str(data["code"]), message=str(data["message"]))


@dataclass(frozen=True, slots=True)
class AckResult:
    """One ack of a batch: acked, or its own ``error`` (``stale_lease``...)."""

    id: int
    error: ErrorDetail | None = None

    @property
    def acked(self) -> bool:
        return self.error is None

    @classmethod
    def from_json(cls, data: JSONObject) -> AckResult:
        error = data.get("error")
        return cls(id=int(data["id"]), error=None if error is None else ErrorDetail.from_json(error))


@dataclass(frozen=True, slots=True)
class Claim:
    """The answer to a claim that also acked: the deliveries, and one result
    an ack sent with it, in order."""

    tasks: list[ClaimedTask]
    acks: list[AckResult]

    @classmethod
    def from_json(cls, data: JSONObject) -> Claim:
        return cls(
            tasks=[ClaimedTask.from_json(t) for t in data["tasks"]],
            acks=[AckResult.from_json(r) for r in data.get("acks", [])],
        )


@dataclass(frozen=True, slots=True)
class Lateness:
    """From due time to delivery, in fractional milliseconds."""

    samples: int
    p50: float
    p99: float
    max: float

    @classmethod
    def from_json(cls, data: JSONObject) -> Lateness:
        return cls(
            samples=int(data["samples"]), p50=float(data["p50"]), p99=float(data["p99"]), max=float(data["max"])
        )


@dataclass(frozen=True, slots=True)
class Queue:
    """A queue's counts, as ``GET /v1/queues/{queue}``, pause and resume show them."""

    name: str
    scheduled: int
    due: int
    leased: int
    dead: int
    #: The due time of the task due longest; ``None`` if none is due.
    oldest_due_ms: int | None
    lateness: Lateness
    #: Claims hand out nothing until it is resumed.
    paused: bool
    #: Since the server started.
    enqueued: int
    delivered: int
    acked: int
    #: Its push target and flow control, when it has any.
    settings: QueueSettings | None = None

    @classmethod
    def from_json(cls, data: JSONObject) -> Queue:
        settings = data.get("settings")
        return cls(
            name=str(data["name"]),
            scheduled=int(data["scheduled"]),
            due=int(data["due"]),
            leased=int(data["leased"]),
            dead=int(data["dead"]),
            oldest_due_ms=_opt_int(data, "oldest_due_ms"),
            lateness=Lateness.from_json(data["lateness"]),
            paused=bool(data["paused"]),
            enqueued=int(data["enqueued"]),
            delivered=int(data["delivered"]),
            acked=int(data["acked"]),
            settings=None if settings is None else QueueSettings.from_json(settings),
        )


@dataclass(frozen=True, slots=True)
class Totals:
    """The server's counters since it started, and what it holds."""

    enqueued: int
    delivered: int
    acked: int
    nacked: int
    lease_expired: int
    died: int
    expired: int
    cancelled: int
    occurrences_enqueued: int
    occurrences_skipped: int
    tasks: int
    schedules: int
    memory_bytes: int
    memory_bytes_max: int | None
    disk_bytes: int
    disk_bytes_max: int | None
    #: How fresh the counters are where several nodes count them (the Redis
    #: backend): every node's counts up to this time (Unix ms, the store's
    #: clock) are in them, and in each queue's. ``None`` where one process
    #: counts everything: then they are exact.
    counters_as_of_ms: int | None = None

    @classmethod
    def from_json(cls, data: JSONObject) -> Totals:
        return cls(
            enqueued=int(data["enqueued"]),
            delivered=int(data["delivered"]),
            acked=int(data["acked"]),
            nacked=int(data["nacked"]),
            lease_expired=int(data["lease_expired"]),
            died=int(data["died"]),
            expired=int(data["expired"]),
            cancelled=int(data["cancelled"]),
            occurrences_enqueued=int(data["occurrences_enqueued"]),
            occurrences_skipped=int(data["occurrences_skipped"]),
            tasks=int(data["tasks"]),
            schedules=int(data["schedules"]),
            memory_bytes=int(data["memory_bytes"]),
            memory_bytes_max=_opt_int(data, "memory_bytes_max"),
            disk_bytes=int(data["disk_bytes"]),
            disk_bytes_max=_opt_int(data, "disk_bytes_max"),
            counters_as_of_ms=_opt_int(data, "counters_as_of_ms"),
        )


@dataclass(frozen=True, slots=True)
class Queues:
    """The answer to ``GET /v1/queues``: every queue, by name, and the totals."""

    queues: list[Queue]
    totals: Totals

    @classmethod
    def from_json(cls, data: JSONObject) -> Queues:
        return cls(queues=[Queue.from_json(q) for q in data["queues"]], totals=Totals.from_json(data["totals"]))


@dataclass(frozen=True, slots=True)
class Node:
    """One node of those that share the store."""

    name: str
    #: Whether it is the node that answered.
    this: bool
    #: Its latest heartbeat, Unix ms, by the store's clock.
    heartbeat_ms: int
    #: How long ago that was, by the answering server's clock (0 if the
    #: store's clock is ahead of it).
    heartbeat_age_ms: int
    #: The shards it holds, ascending.
    shards: list[int]

    @classmethod
    def from_json(cls, data: JSONObject) -> Node:
        return cls(
            name=str(data["name"]),
            this=bool(data["this"]),
            heartbeat_ms=int(data["heartbeat_ms"]),
            heartbeat_age_ms=int(data["heartbeat_age_ms"]),
            shards=[int(shard) for shard in data["shards"]],
        )


@dataclass(frozen=True, slots=True)
class Nodes:
    """The answer to ``GET /v1/nodes``: the nodes that share the store, with
    their shards and heartbeats. ``nodes`` is ``None`` for a server that runs
    in one process (the embedded backend)."""

    #: The server's clock, Unix ms: the heartbeats' ages are against it.
    now_ms: int
    nodes: list[Node] | None

    @classmethod
    def from_json(cls, data: JSONObject) -> Nodes:
        nodes = data.get("nodes")
        return cls(now_ms=int(data["now_ms"]), nodes=None if nodes is None else [Node.from_json(n) for n in nodes])


@dataclass(frozen=True, slots=True)
class Run:
    """One run of a schedule."""

    at_ms: int
    #: The same time, local in the schedule's zone (RFC 3339 with its offset).
    local: str
    #: The task it enqueued, for a run that happened.
    task_id: int | None = None

    @classmethod
    def from_json(cls, data: JSONObject) -> Run:
        return cls(at_ms=int(data["at_ms"]), local=str(data["local"]), task_id=_opt_int(data, "task_id"))


@dataclass(frozen=True, slots=True)
class Schedule:
    """A schedule: a cron expression in a time zone, or a period, that
    enqueues an ordinary task at each occurrence."""

    name: str
    queue: str
    #: The zone its cron is read in and its runs shown in (UTC for a period).
    time_zone: str
    #: Each task's payload: its JSON, or ``bytes`` if it is not JSON text.
    payload: Payload
    misfire: Misfire
    overlap: Overlap
    max_attempts: int
    #: When it was put.
    since_ms: int
    paused: bool
    #: The next runs, at most five; empty when the rule has no more.
    next_runs: list[Run]
    cron: str | None = None
    every_ms: int | None = None
    expires_after_ms: int | None = None
    #: The latest occurrence enqueued, and its task.
    last_run: Run | None = None

    @property
    def payload_bytes(self) -> bytes:
        """The payload as bytes, as :attr:`Task.payload_bytes` says."""
        return _as_bytes(self.payload)

    @classmethod
    def from_json(cls, data: JSONObject) -> Schedule:
        last_run = data.get("last_run")
        return cls(
            name=str(data["name"]),
            queue=str(data["queue"]),
            time_zone=str(data["time_zone"]),
            payload=_read_payload(data),
            misfire=Misfire(data["misfire"]),
            overlap=Overlap(data["overlap"]),
            max_attempts=int(data["max_attempts"]),
            since_ms=int(data["since_ms"]),
            paused=bool(data["paused"]),
            next_runs=[Run.from_json(r) for r in data["next_runs"]],
            cron=_opt_str(data, "cron"),
            every_ms=_opt_int(data, "every_ms"),
            expires_after_ms=_opt_int(data, "expires_after_ms"),
            last_run=None if last_run is None else Run.from_json(last_run),
        )


@dataclass(frozen=True, slots=True)
class SchedulePage:
    """A page of the schedules, by name; ``next`` is the next page's ``after``."""

    schedules: list[Schedule]
    next: str | None

    @property
    def items(self) -> list[Schedule]:
        return self.schedules

    @classmethod
    def from_json(cls, data: JSONObject) -> SchedulePage:
        return cls(schedules=[Schedule.from_json(s) for s in data["schedules"]], next=_opt_str(data, "next"))
