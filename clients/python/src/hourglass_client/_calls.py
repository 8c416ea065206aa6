"""Every route as a :class:`Call`, without any I/O.

A call says what to send (method, path, JSON body, query) and how to read
the answer. :class:`~hourglass_client.Client` and
:class:`~hourglass_client.AsyncClient` both send these, one with a blocking
``httpx.Client``, the other with an ``httpx.AsyncClient``: the API is
spelled once, here, and the two clients hold only their signatures and
documentation. Names in paths (queues, which may hold ``/``, keys,
schedules) are percent-encoded as one segment each.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar
from urllib.parse import quote

from .errors import ApiError, DecodeError
from .models import (
    AckResult,
    Claim,
    ClaimedTask,
    Enqueued,
    EnqueuedBatch,
    Nodes,
    Payload,
    Queue,
    QueueSettings,
    Queues,
    Schedule,
    SchedulePage,
    State,
    Task,
    TaskPage,
)
from .options import NewTask, PushOptions, ScheduleOptions, TaskOptions

T = TypeVar("T")

#: A delivery to ack: a claimed task, or its ``(id, lease)``.
AckRef = ClaimedTask | tuple[int, str]


@dataclass(frozen=True, slots=True)
class Answer:
    """The status and body of an answer that is a success."""

    status: int
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass(frozen=True, slots=True)
class Call(Generic[T]):
    """One request of the API, and how to read its answer."""

    method: str
    path: str
    read: Callable[[Answer], T]
    body: Any = None
    params: Mapping[str, str | int] | None = None
    #: How long the server may hold the answer back (a claim's long poll):
    #: added to the request's timeout.
    wait_ms: int = 0


def segment(name: str) -> str:
    """``name`` as one path segment: every byte but ``A-Z a-z 0-9 - . _ ~``
    percent-encoded, ``/`` included."""
    return quote(name, safe="")


def answer(call: Call[T], url: str, status: int, body: bytes) -> T:
    """The result of ``call`` from its answer, or the error it is."""
    if 200 <= status < 300:
        try:
            return call.read(Answer(status, body))
        except (KeyError, TypeError, ValueError) as error:
            raise DecodeError(url, status, body, repr(error)) from error
    try:
        detail = json.loads(body)["error"]
        code, message = str(detail["code"]), str(detail["message"])
    except (KeyError, TypeError, ValueError) as error:
        raise DecodeError(url, status, body, "not an error of the API") from error
    raise ApiError.of(status, code, message)


def _nothing(_: Answer) -> None:
    return None


def _task(answer: Answer) -> Task:
    return Task.from_json(answer.json())


def _schedule(answer: Answer) -> Schedule:
    return Schedule.from_json(answer.json())


def _queue(answer: Answer) -> Queue:
    return Queue.from_json(answer.json())


def _without_none(options: Mapping[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in options.items() if value is not None}


def payload_field(payload: Payload) -> dict[str, Any]:
    """How a request carries ``payload``: bytes (``bytes``, ``bytearray``,
    ``memoryview``) as ``payload_base64``, standard base64 with padding;
    anything else as ``payload``, its JSON."""
    if isinstance(payload, (bytes, bytearray, memoryview)):
        return {"payload_base64": base64.b64encode(bytes(payload)).decode("ascii")}
    return {"payload": payload}


def _new_task(task: NewTask) -> dict[str, Any]:
    body = _without_none({key: value for key, value in task.items() if key != "payload"})
    if task.get("payload") is not None:
        body.update(payload_field(task["payload"]))
    return body


# The server and its queues.


def healthz() -> Call[str]:
    return Call("GET", "/healthz", lambda a: str(a.json()["status"]))


def metrics() -> Call[str]:
    return Call("GET", "/metrics", lambda a: a.body.decode("utf-8"))


def nodes() -> Call[Nodes]:
    return Call("GET", "/v1/nodes", lambda a: Nodes.from_json(a.json()))


def queues() -> Call[Queues]:
    return Call("GET", "/v1/queues", lambda a: Queues.from_json(a.json()))


def queue(name: str) -> Call[Queue]:
    return Call("GET", f"/v1/queues/{segment(name)}", _queue)


def pause_queue(name: str) -> Call[Queue]:
    return Call("POST", f"/v1/queues/{segment(name)}/pause", _queue)


def resume_queue(name: str) -> Call[Queue]:
    return Call("POST", f"/v1/queues/{segment(name)}/resume", _queue)


def _settings(answer: Answer) -> QueueSettings:
    return QueueSettings.from_json(answer.json())


def settings(name: str) -> Call[QueueSettings]:
    return Call("GET", f"/v1/queues/{segment(name)}/settings", _settings)


def put_settings(
    name: str,
    push: PushOptions | None,
    rate_per_s: float | None,
    burst: int | None,
    max_in_flight: int | None,
) -> Call[QueueSettings]:
    body: dict[str, Any] = {"push": push}
    for key, value in (("rate_per_s", rate_per_s), ("burst", burst), ("max_in_flight", max_in_flight)):
        if value is not None:
            body[key] = value
    return Call("PUT", f"/v1/queues/{segment(name)}/settings", _settings, body)


def delete_dead(name: str) -> Call[int]:
    return Call("DELETE", f"/v1/queues/{segment(name)}/dead", lambda a: int(a.json()["deleted"]))


# Tasks.


def enqueue(queue: str, payload: Payload, options: TaskOptions) -> Call[Enqueued]:
    body = {**payload_field(payload), **_without_none(options)}
    return Call(
        "POST",
        f"/v1/queues/{segment(queue)}/tasks",
        lambda a: Enqueued.from_json(a.json(), created=a.status == 201),
        body,
    )


def enqueue_batch(queue: str, tasks: Iterable[NewTask]) -> Call[EnqueuedBatch]:
    body = {"tasks": [_new_task(task) for task in tasks]}
    return Call(
        "POST", f"/v1/queues/{segment(queue)}/tasks/batch", lambda a: EnqueuedBatch.from_json(a.json()), body
    )


def get_task(task_id: int) -> Call[Task]:
    return Call("GET", f"/v1/tasks/{int(task_id)}", _task)


def cancel(task_id: int) -> Call[None]:
    return Call("DELETE", f"/v1/tasks/{int(task_id)}", _nothing)


def reschedule(task_id: int, delay_ms: int | None, run_at_ms: int | None) -> Call[Task]:
    body = _without_none({"delay_ms": delay_ms, "run_at_ms": run_at_ms})
    return Call("PATCH", f"/v1/tasks/{int(task_id)}", _task, body)


def find_by_key(queue: str, key: str) -> Call[Task]:
    return Call("GET", f"/v1/queues/{segment(queue)}/keys/{segment(key)}", _task)


def list_tasks(queue: str, state: State | str | None, after: str | None, limit: int | None) -> Call[TaskPage]:
    params: dict[str, str | int] = _without_none({"state": state, "after": after, "limit": limit})
    if isinstance(state, State):
        params["state"] = state.value
    return Call("GET", f"/v1/queues/{segment(queue)}/tasks", lambda a: TaskPage.from_json(a.json()), params=params)


def list_dead(queue: str, after: str | None, limit: int | None) -> Call[TaskPage]:
    params: dict[str, str | int] = _without_none({"after": after, "limit": limit})
    return Call("GET", f"/v1/queues/{segment(queue)}/dead", lambda a: TaskPage.from_json(a.json()), params=params)


# Deliveries.


def claim(queue: str, max_tasks: int, lease_ms: int | None, wait_ms: int) -> Call[list[ClaimedTask]]:
    body = _without_none({"max": max_tasks, "lease_ms": lease_ms, "wait_ms": wait_ms})
    return Call(
        "POST",
        f"/v1/queues/{segment(queue)}/claim",
        lambda a: [ClaimedTask.from_json(t) for t in a.json()["tasks"]],
        body,
        wait_ms=wait_ms,
    )


def claim_and_ack(
    queue: str, acks: Iterable[AckRef], max_tasks: int, lease_ms: int | None, wait_ms: int
) -> Call[Claim]:
    body = _without_none({"max": max_tasks, "lease_ms": lease_ms, "wait_ms": wait_ms})
    refs = [_ack_pair(ref) for ref in acks]
    if refs:
        body["acks"] = refs
    return Call("POST", f"/v1/queues/{segment(queue)}/claim", lambda a: Claim.from_json(a.json()), body,
                wait_ms=wait_ms)


def ack(task_id: int, lease: str) -> Call[None]:
    return Call("POST", f"/v1/tasks/{int(task_id)}/ack", _nothing, {"lease": lease})


def _ack_pair(ref: AckRef) -> dict[str, Any]:
    task_id, lease = (ref.id, ref.lease) if isinstance(ref, ClaimedTask) else ref
    return {"id": int(task_id), "lease": lease}


def ack_batch(acks: Iterable[AckRef]) -> Call[list[AckResult]]:
    body = {"acks": [_ack_pair(ref) for ref in acks]}
    return Call("POST", "/v1/acks", lambda a: [AckResult.from_json(r) for r in a.json()["results"]], body)


def nack(task_id: int, lease: str, reason: str | None, delay_ms: int | None) -> Call[Task]:
    body = _without_none({"lease": lease, "reason": reason, "delay_ms": delay_ms})
    return Call("POST", f"/v1/tasks/{int(task_id)}/nack", _task, body)


def extend(task_id: int, lease: str, lease_ms: int) -> Call[int]:
    body = {"lease": lease, "lease_ms": lease_ms}
    return Call("POST", f"/v1/tasks/{int(task_id)}/extend", lambda a: int(a.json()["lease_until_ms"]), body)


def retry(task_id: int) -> Call[Task]:
    return Call("POST", f"/v1/tasks/{int(task_id)}/retry", _task)


# Schedules.


def put_schedule(name: str, queue: str, payload: Payload, options: ScheduleOptions) -> Call[tuple[Schedule, bool]]:
    body = {"queue": queue, **payload_field(payload), **_without_none(options)}
    return Call(
        "PUT",
        f"/v1/schedules/{segment(name)}",
        lambda a: (Schedule.from_json(a.json()), a.status == 201),
        body,
    )


def get_schedule(name: str) -> Call[Schedule]:
    return Call("GET", f"/v1/schedules/{segment(name)}", _schedule)


def list_schedules(after: str | None, limit: int | None) -> Call[SchedulePage]:
    params: dict[str, str | int] = _without_none({"after": after, "limit": limit})
    return Call("GET", "/v1/schedules", lambda a: SchedulePage.from_json(a.json()), params=params)


def pause_schedule(name: str) -> Call[Schedule]:
    return Call("POST", f"/v1/schedules/{segment(name)}/pause", _schedule)


def resume_schedule(name: str) -> Call[Schedule]:
    return Call("POST", f"/v1/schedules/{segment(name)}/resume", _schedule)


def delete_schedule(name: str) -> Call[None]:
    return Call("DELETE", f"/v1/schedules/{segment(name)}", _nothing)
