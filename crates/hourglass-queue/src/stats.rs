//! What a backend reports about its queues.

use std::sync::Arc;

/// Counts and lateness of one queue.
#[derive(Debug, Clone, PartialEq)]
pub struct QueueStats {
    /// The queue's name.
    pub name: Arc<str>,
    /// Scheduled and not yet due.
    pub scheduled: usize,
    /// Due and waiting for a claim.
    pub due: usize,
    /// Handed out under a lease.
    pub leased: usize,
    /// Out of attempts.
    pub dead: usize,
    /// The due time of the oldest due task, Unix ms.
    pub oldest_due_ms: Option<u64>,
    /// From due time to delivery, over this queue's claims.
    pub lateness: LatenessMs,
}

/// Lateness percentiles in milliseconds (fractional).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct LatenessMs {
    /// Deliveries measured.
    pub samples: u64,
    /// Median.
    pub p50: f64,
    /// 99th percentile.
    pub p99: f64,
    /// Latest.
    pub max: f64,
}

/// Counters since the backend started.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Totals {
    /// Tasks enqueued.
    pub enqueued: u64,
    /// Deliveries by claims.
    pub delivered: u64,
    /// Acks.
    pub acked: u64,
    /// Nacks.
    pub nacked: u64,
    /// Leases that expired.
    pub lease_expired: u64,
    /// Tasks that died: out of attempts, or expired.
    pub died: u64,
    /// Tasks not delivered by their expiry, which died for it.
    pub expired: u64,
    /// Tasks cancelled.
    pub cancelled: u64,
    /// Tasks enqueued by schedules, one per occurrence run.
    pub occurrences_enqueued: u64,
    /// Occurrences of schedules not run: missed under the `skip` or `once`
    /// misfire policy, past the `all` policy's limit, or forbidden to overlap.
    pub occurrences_skipped: u64,
    /// Tasks held now.
    pub tasks: usize,
    /// Schedules stored now.
    pub schedules: usize,
    /// Bytes of tasks held in memory, as the memory budget counts them.
    pub memory_bytes: u64,
    /// The memory budget, if the backend has one.
    pub memory_bytes_max: Option<u64>,
    /// Bytes of tasks in the store, as the disk budget counts them.
    pub disk_bytes: u64,
    /// The disk budget, if any.
    pub disk_bytes_max: Option<u64>,
}
