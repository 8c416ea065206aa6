"""One delivery as the worker holds it, how it ends, and the reason its
nack gives."""

from __future__ import annotations

import enum
from dataclasses import dataclass

from .limits import NACK_REASON_BYTES_MAX
from .models import ClaimedTask
from .report import Counts

#: What ends a reason cut to fit.
ELLIPSIS = "…"


class Outcome(enum.Enum):
    """How a delivery ended, for this worker: each ends in exactly one."""

    #: The server confirmed its ack.
    ACKED = "acked"
    #: The server confirmed its nack.
    NACKED = "nacked"
    #: Its ack or nack was refused (``stale_lease``: its lease ran out) or
    #: never got through: the server delivers it again.
    LOST = "lost_leases"
    #: Its handler was still running at the shutdown deadline.
    ABANDONED = "abandoned"


@dataclass(slots=True, eq=False)
class Delivery:
    """A claimed task while this worker holds it.

    ``deadline`` is when its lease ends by this process's monotonic clock:
    the claim's (or last extend's) send time plus the lease. The server's
    lease began after that send, so it ends no earlier than this, whatever
    the two clocks say. The server stays the judge: the worker goes on
    extending, acking or nacking after the deadline, and only an answer of
    ``stale_lease`` (or ``not_found``) makes the delivery lost.
    """

    task: ClaimedTask
    deadline: float
    #: An extend is on its way.
    extending: bool = False
    #: The server said its lease is not current: no ack or nack will do.
    stale: bool = False
    #: The deadline passed without an extend (logged once).
    overdue: bool = False
    outcome: Outcome | None = None

    def left_s(self, now: float) -> float:
        """Seconds until the lease ends."""
        return self.deadline - now

    def end(self, outcome: Outcome, counts: Counts) -> None:
        """The delivery ended so: counted once, in ``counts``."""
        assert self.outcome is None, f"task {self.task.id} ended twice: {self.outcome} then {outcome}"
        self.outcome = outcome
        setattr(counts, outcome.value, getattr(counts, outcome.value) + 1)


def nack_reason(error: BaseException, limit_bytes: int = NACK_REASON_BYTES_MAX) -> str:
    """What a nack says about ``error``: ``Type: text``, as the last line of
    a traceback says it (the type alone when the text is empty), cut to
    ``limit_bytes`` of UTF-8 on a character boundary, ending in ``…`` when
    cut. Text that is not valid UTF-8 (lone surrogates) is replaced."""
    text = str(error)
    reason = f"{type(error).__name__}: {text}" if text else type(error).__name__
    encoded = reason.encode("utf-8", "replace")
    if len(encoded) <= limit_bytes:
        return encoded.decode("utf-8")
    room = limit_bytes - len(ELLIPSIS.encode("utf-8"))
    # Cutting bytes may split a character: "ignore" drops only its start,
    # since everything before the cut is valid UTF-8.
    cut = encoded[:room].decode("utf-8", "ignore") + ELLIPSIS
    assert len(cut.encode("utf-8")) <= limit_bytes, (len(cut.encode("utf-8")), limit_bytes)
    return cut
