"""The server's bounds that this package relies on, named once.

They mirror ``crates/hourglass-queue/src/limits.rs``; the server checks them
and answers a request past one with ``InvalidRequest``. The worker keeps
inside them: its claims, ack batches, leases, waits and nack reasons.
"""

from __future__ import annotations

#: Most tasks one claim returns.
CLAIM_MAX = 1_000
#: Most acks in one ``POST /v1/acks``: a claim's worth.
ACK_BATCH_MAX = CLAIM_MAX
#: Most tasks in one batch enqueue.
BATCH_MAX = 1_000
#: Longest long-poll of a claim.
WAIT_MS_MAX = 60_000
#: Shortest lease.
LEASE_MS_MIN = 100
#: Longest lease: 12 hours.
LEASE_MS_MAX = 12 * 3600 * 1000
#: Lease when a claim does not say.
LEASE_MS_DEFAULT = 30_000
#: Longest nack reason, in bytes of UTF-8.
NACK_REASON_BYTES_MAX = 1_024
#: Tasks a listing page holds when the client does not say.
PAGE_DEFAULT = 100

assert ACK_BATCH_MAX >= CLAIM_MAX, "one claim's tasks are acked in one batch"
assert LEASE_MS_MIN <= LEASE_MS_DEFAULT <= LEASE_MS_MAX
