//! Queues: each queue's counts, the server's totals, and the answers of the
//! queue operations (pause, resume, deleting the dead).

use serde::{Deserialize, Serialize};

/// One queue's counts, as `GET /v1/queues/{queue}`, pause and resume show
/// them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Queue {
    /// Its name.
    pub name: String,
    /// Tasks waiting for their due time.
    pub scheduled: u64,
    /// Tasks due, not yet claimed.
    pub due: u64,
    /// Tasks claimed, their leases running.
    pub leased: u64,
    /// Dead tasks.
    pub dead: u64,
    /// The due time of the task due longest, Unix ms; `null` if none is due.
    pub oldest_due_ms: Option<u64>,
    /// How late deliveries were.
    pub lateness: Lateness,
    /// Paused: claims hand out nothing until it is resumed.
    pub paused: bool,
    /// Tasks enqueued since the server started.
    pub enqueued: u64,
    /// Deliveries since the server started.
    pub delivered: u64,
    /// Acks since the server started.
    pub acked: u64,
    /// Its push target and flow control, when it has any (`GET
    /// /v1/queues/{queue}/settings` shows them too); its tasks in flight are
    /// `leased`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub settings: Option<crate::QueueSettings>,
}

/// From due time to delivery, in fractional milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Lateness {
    /// Deliveries measured.
    pub samples: u64,
    /// The median.
    pub p50: f64,
    /// The 99th percentile.
    pub p99: f64,
    /// The latest.
    pub max: f64,
}

/// The server's counters since it started, and what it holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Totals {
    /// Tasks enqueued.
    pub enqueued: u64,
    /// Deliveries.
    pub delivered: u64,
    /// Acks.
    pub acked: u64,
    /// Nacks.
    pub nacked: u64,
    /// Leases that expired.
    pub lease_expired: u64,
    /// Tasks that died (out of attempts, or expired).
    pub died: u64,
    /// Tasks not delivered by their expiry.
    pub expired: u64,
    /// Tasks cancelled.
    pub cancelled: u64,
    /// Tasks enqueued by schedules.
    pub occurrences_enqueued: u64,
    /// Occurrences skipped by misfire or overlap policies.
    pub occurrences_skipped: u64,
    /// Tasks held.
    pub tasks: u64,
    /// Schedules held.
    pub schedules: u64,
    /// Bytes of tasks in memory, as the memory budget counts them.
    pub memory_bytes: u64,
    /// The memory budget; `null` if none.
    pub memory_bytes_max: Option<u64>,
    /// Bytes of tasks in the store, as the disk budget counts them.
    pub disk_bytes: u64,
    /// The disk budget; `null` if none.
    pub disk_bytes_max: Option<u64>,
    /// How fresh the counters are where several nodes count (the Redis
    /// backend): every node's counts up to this time (Unix ms, the store's
    /// clock) are in them, in these totals and in each queue's `enqueued`,
    /// `delivered`, `acked` and `lateness`. Absent where one process counts
    /// everything: then they are exact.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub counters_as_of_ms: Option<u64>,
}

/// The answer to `GET /v1/queues`: every queue, and the totals.
///
/// The server sends it rendered through `serde_json::Value`, as it always
/// has: every object's keys in alphabetical order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Queues {
    /// Every queue, by name.
    pub queues: Vec<Queue>,
    /// The server's totals.
    pub totals: Totals,
}

/// The answer to `DELETE /v1/queues/{queue}/dead`. Its keys are in
/// alphabetical order, as the server has always sent them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct DeletedDead {
    /// Dead tasks deleted.
    pub deleted: u64,
    /// The queue.
    pub queue: String,
}
