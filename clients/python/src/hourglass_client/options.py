"""What a client sends, as ``TypedDict``\\ s.

A request is a JSON body, so it is typed as one: a ``TypedDict`` is the dict
you would write anyway (``{"payload": ..., "delay_ms": 5000}``), sent as it
is, and a type checker catches a misspelt or mistyped key. The methods take
these as keyword arguments (``client.enqueue("orders", payload,
delay_ms=5000)``); a batch takes a list of :class:`NewTask` dicts. The
server checks every value and answers a wrong one with ``InvalidRequest``
saying what is expected.
"""

from __future__ import annotations

from typing import TypedDict

from .models import Payload

__all__ = ["HttpOptions", "NewTask", "PushOptions", "ScheduleOptions", "TaskOptions"]


class _Url(TypedDict):
    #: An ``http`` or ``https`` URL.
    url: str


class HttpOptions(_Url, total=False):
    """An HTTP target: ``url``, and ``method`` (``POST`` if left out) and
    ``headers`` (name to value) if need be."""

    method: str
    headers: dict[str, str]


class PushOptions(HttpOptions, total=False):
    """A queue's push target: an :class:`HttpOptions` and how long a
    delivery may take (``timeout_ms``, 30 s if left out)."""

    timeout_ms: int


class TaskOptions(TypedDict, total=False):
    """How a task is enqueued; every key may be left out (the server's
    defaults apply)."""

    #: Due this long from now (now if neither this nor ``run_at_ms``).
    delay_ms: int
    #: Due at this time, Unix ms; not with ``delay_ms``.
    run_at_ms: int
    #: An idempotency key: while a task with it lives in the queue, enqueuing
    #: it again answers that task (``created`` false).
    key: str
    #: Deliveries before it dies; 0 for no limit (5 if left out).
    max_attempts: int
    #: Lower first among tasks due together.
    priority: int
    #: The lease of each delivery when the claim does not say.
    lease_ms: int
    #: Runs again this long after each ack: a recurring task.
    every_ms: int
    #: Dies if not delivered by this time, Unix ms.
    expires_at_ms: int
    #: Dies if not delivered within this long from now.
    expires_after_ms: int
    #: A target of its own: delivered by push, as this request.
    http: HttpOptions


class NewTask(TaskOptions):
    """A task of a batch: its ``payload`` (any JSON, or bytes: sent as
    ``payload_base64``) and its options."""

    payload: Payload


class ScheduleOptions(TypedDict, total=False):
    """A schedule's rule and policies: give ``cron`` (with ``time_zone``,
    UTC if left out) or ``every_ms``."""

    #: A cron expression (five to seven fields).
    cron: str
    #: The IANA time zone the cron expression is read in.
    time_zone: str
    #: A period, from when the schedule is put.
    every_ms: int
    #: ``skip`` (the default), ``once`` or ``all`` (a :class:`~hourglass_client.Misfire`).
    misfire: str
    #: ``allow`` (the default) or ``forbid`` (an :class:`~hourglass_client.Overlap`).
    overlap: str
    #: Each task's deliveries before it dies.
    max_attempts: int
    #: Each task dies if not delivered within this long of its occurrence.
    expires_after_ms: int
