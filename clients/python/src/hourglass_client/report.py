"""What a worker did: its counts, live while it runs and final when it stops."""

from __future__ import annotations

from dataclasses import dataclass, fields


@dataclass(frozen=True, slots=True)
class WorkerReport:
    """A worker's counts since it started.

    Every delivery ends in exactly one of ``acked``, ``nacked``,
    ``lost_leases`` or ``abandoned`` (once the worker has stopped);
    ``succeeded + failed`` are the handlers that ended (``handled``).
    """

    #: Deliveries the server handed to this worker.
    claimed: int = 0
    #: Handlers that returned.
    succeeded: int = 0
    #: Handlers that raised.
    failed: int = 0
    #: Acks the server confirmed.
    acked: int = 0
    #: Nacks the server confirmed.
    nacked: int = 0
    #: Deliveries whose lease ran out, or was found stale, before their ack
    #: or nack: the server delivers them again.
    lost_leases: int = 0
    #: Handlers still running at the shutdown deadline (their leases run
    #: out, and the server delivers their tasks again).
    abandoned: int = 0
    #: Requests that failed (unreachable, 5xx, 507, 429) and were tried again.
    retries: int = 0

    @property
    def handled(self) -> int:
        """Handlers that ended, either way."""
        return self.succeeded + self.failed

    def __str__(self) -> str:
        counts = ", ".join(f"{field.name} {getattr(self, field.name)}" for field in fields(self))
        return f"handled {self.handled}: {counts}"


class Counts:
    """The worker's counts as they change (on its event loop only)."""

    def __init__(self) -> None:
        self.claimed = 0
        self.succeeded = 0
        self.failed = 0
        self.acked = 0
        self.nacked = 0
        self.lost_leases = 0
        self.abandoned = 0
        self.retries = 0

    def report(self) -> WorkerReport:
        """The counts now."""
        return WorkerReport(**vars(self))
