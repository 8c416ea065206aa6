//! Every bound the engine enforces, named, with its default.

/// Bounds on what clients may ask; going past one is a clear error.
#[derive(Debug, Clone)]
pub struct Limits {
    /// Largest payload, in bytes of JSON text.
    pub payload_bytes_max: usize,
    /// Tasks held at once (scheduled, due, leased and dead); past it, 429.
    pub tasks_max: usize,
}

impl Limits {
    /// The default payload limit: 1 MiB.
    pub const DEFAULT_PAYLOAD_BYTES_MAX: usize = 1 << 20;
    /// The default cap on tasks held: 10 million.
    pub const DEFAULT_TASKS_MAX: usize = 10_000_000;
}

impl Default for Limits {
    fn default() -> Self {
        Limits { payload_bytes_max: Self::DEFAULT_PAYLOAD_BYTES_MAX, tasks_max: Self::DEFAULT_TASKS_MAX }
    }
}

/// Longest queue name, in bytes.
pub const QUEUE_NAME_BYTES_MAX: usize = 128;
/// Longest idempotency key, in bytes.
pub const KEY_BYTES_MAX: usize = 256;
/// Longest delay, and furthest `run_at_ms` ahead: ten years.
pub const DELAY_MS_MAX: u64 = 10 * 365 * 24 * 3600 * 1000;
/// Shortest repeat period.
pub const EVERY_MS_MIN: u64 = 10;
/// Most attempts a task may be given.
pub const MAX_ATTEMPTS_MAX: u32 = 1_000;
/// Attempts when the client does not say.
pub const MAX_ATTEMPTS_DEFAULT: u32 = 5;
/// Shortest and longest lease.
pub const LEASE_MS_MIN: u64 = 100;
/// Longest lease: 12 hours.
pub const LEASE_MS_MAX: u64 = 12 * 3600 * 1000;
/// Lease when the client does not say.
pub const LEASE_MS_DEFAULT: u64 = 30_000;
/// Longest long-poll of a claim.
pub const WAIT_MS_MAX: u64 = 60_000;
/// Most tasks one claim returns.
pub const CLAIM_MAX: usize = 1_000;
/// Most tasks in one batch enqueue.
pub const BATCH_MAX: usize = 1_000;
/// Retry backoff after a failed attempt: `base * 2^(attempt-1)`, capped.
pub const BACKOFF_BASE_MS: u64 = 1_000;
/// The longest backoff: one hour.
pub const BACKOFF_MAX_MS: u64 = 3_600_000;
/// Most tasks one listing page returns.
pub const LIST_MAX: usize = 1_000;
/// Task ids a listing page looks at, at most, when it walks a queue in id
/// order: a page costs bounded work whatever the number of tasks.
pub const LIST_SCAN_MAX: usize = 100_000;
/// The most queues at once.
pub const QUEUES_MAX: usize = 1_000;
/// Changes waiting for the writer; past it, new writes wait for room (a soft
/// bound: each request already admitted may add its own, at most a batch or a
/// claim's worth).
pub const QUEUED_MUTATIONS_MAX: usize = 65_536;
