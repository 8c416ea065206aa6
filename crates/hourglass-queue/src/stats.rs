//! What a backend reports about its queues.

use std::sync::Arc;

use crate::settings::QueueSettings;

/// Counts and lateness of one queue.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct QueueStats {
    /// The queue's name.
    pub name: Arc<str>,
    /// Scheduled and not yet due.
    pub scheduled: usize,
    /// Due and waiting for a claim.
    pub due: usize,
    /// Of those due, how many are more urgent than
    /// [`PRIORITY_DEFAULT`](crate::limits::PRIORITY_DEFAULT).
    pub urgent: usize,
    /// Handed out under a lease.
    pub leased: usize,
    /// Out of attempts.
    pub dead: usize,
    /// The due time of the oldest due task, Unix ms.
    pub oldest_due_ms: Option<u64>,
    /// From due time to delivery, over this queue's claims.
    pub lateness: LatenessMs,
    /// Paused: claims hand out nothing, and due tasks wait.
    pub paused: bool,
    /// When a pause that ends by itself ends, Unix ms.
    pub paused_until_ms: Option<u64>,
    /// Tasks enqueued since start.
    pub enqueued: u64,
    /// Deliveries by claims since start.
    pub delivered: u64,
    /// Acks since start.
    pub acked: u64,
    /// Its push target and flow control (tasks in flight are `leased`).
    pub settings: QueueSettings,
}

/// The upper bounds of the lateness histogram's buckets, in microseconds:
/// 100 µs to 60 s, about three to a decade. What `/metrics` exposes as a
/// Prometheus histogram, and what the dashboard's chart of lateness is
/// worked out from.
pub const LATENESS_BUCKETS_US: [u64; 18] = [
    100, 250, 500, 1_000, 2_500, 5_000, 10_000, 25_000, 50_000, 100_000, 250_000, 500_000, 1_000_000, 2_500_000,
    5_000_000, 10_000_000, 30_000_000, 60_000_000,
];

const _: () = {
    let mut i = 1;
    while i < LATENESS_BUCKETS_US.len() {
        assert!(LATENESS_BUCKETS_US[i - 1] < LATENESS_BUCKETS_US[i], "bucket bounds rise");
        i += 1;
    }
};

/// Lateness since start, from due time to delivery: percentiles in
/// milliseconds (fractional), and the histogram they come from.
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
    /// The sum of every delivery's lateness, in milliseconds.
    pub sum: f64,
    /// Deliveries at most [`LATENESS_BUCKETS_US`]`[i]` late, for each `i`
    /// (cumulative, as Prometheus counts them).
    pub buckets: [u64; LATENESS_BUCKETS_US.len()],
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
    /// How fresh the counters are, where several nodes count: every node's
    /// counts up to this time (Unix ms, the store's clock) are in them, in
    /// these totals and in each queue's counters and lateness. `None` where
    /// one process counts everything: then they are exact.
    pub counters_as_of_ms: Option<u64>,
}

/// Seconds of history a backend that keeps it shows: the dashboard's
/// fifteen minutes.
pub const HISTORY_SECONDS: u64 = 15 * 60;

/// One second of every node's work, as a backend that keeps the history
/// itself counts it (the Redis backend's; the server keeps the embedded
/// store's).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Second {
    /// Its start, Unix ms (the store's clock).
    pub at_ms: u64,
    /// Tasks enqueued in it.
    pub enqueued: u64,
    /// Deliveries in it.
    pub delivered: u64,
    /// Acks in it.
    pub acked: u64,
    /// Its deliveries at most [`LATENESS_BUCKETS_US`]`[i]` late, cumulative.
    pub lateness: [u64; LATENESS_BUCKETS_US.len()],
}

/// One node of a backend that runs on several (the Redis backend's).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeStats {
    /// Its name, as in its shard leases.
    pub name: String,
    /// Whether it is the node that answered.
    pub this: bool,
    /// Its latest heartbeat, Unix ms (the store's clock). A node is alive
    /// while its heartbeat is younger than a shard lease.
    pub heartbeat_ms: u64,
    /// The shards it holds, ascending.
    pub shards: Vec<u16>,
}

/// The upper bounds of the commit-time histogram's buckets, in microseconds:
/// 50 µs to 1 s.
pub const COMMIT_BUCKETS_US: [u64; 13] =
    [50, 100, 250, 500, 1_000, 2_500, 5_000, 10_000, 25_000, 50_000, 100_000, 250_000, 1_000_000];

/// The upper bounds of the commit-size histogram's buckets, in changes
/// (mutations) per commit: 1 to the writer's queue bound.
pub const BATCH_BUCKETS: [u64; 9] = [1, 4, 16, 64, 256, 1_024, 4_096, 16_384, 65_536];

const _: () = assert!(
    BATCH_BUCKETS[BATCH_BUCKETS.len() - 1] == crate::limits::QUEUED_MUTATIONS_MAX as u64,
    "the largest commit is the writer's queue bound"
);

/// What a backend's store did since start: its commits, their time and size.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StorageStats {
    /// Commits (one transaction, and one fsync when durable, each).
    pub commits: u64,
    /// Commits that failed.
    pub failed: u64,
    /// Changes written, over every commit.
    pub mutations: u64,
    /// Time spent committing, in microseconds.
    pub commit_us_sum: u64,
    /// Commits that took at most [`COMMIT_BUCKETS_US`]`[i]`, cumulative.
    pub commit_us_buckets: [u64; COMMIT_BUCKETS_US.len()],
    /// Commits of at most [`BATCH_BUCKETS`]`[i]` changes, cumulative.
    pub batch_buckets: [u64; BATCH_BUCKETS.len()],
}
