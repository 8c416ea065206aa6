//! Every bound the engine enforces, named, with its default.

/// Bounds on what clients may ask; going past one is a clear error.
#[derive(Debug, Clone)]
pub struct Limits {
    /// Largest payload, in bytes (of JSON text, or of the bytes a base64 payload
    /// stands for).
    pub payload_bytes_max: usize,
    /// Tasks held at once (scheduled, due, leased and dead); past it, 429.
    pub tasks_max: usize,
    /// Bytes the engine may hold in memory for its tasks, as
    /// [`task_memory_bytes`] counts them; past it, an enqueue is refused with
    /// `over_memory_budget` and changes nothing.
    pub memory_bytes_max: u64,
    /// Bytes the store may hold for the tasks, as estimated from their
    /// encoded size and a measured overhead per task; past it, an enqueue is
    /// refused with `over_disk_budget`. `None`: bounded by the disk alone, and
    /// a full disk is answered with `disk_full`.
    pub disk_bytes_max: Option<u64>,
}

impl Limits {
    /// The default payload limit: 1 MiB.
    pub const DEFAULT_PAYLOAD_BYTES_MAX: usize = 1 << 20;
    /// The default cap on tasks held: 10 million.
    pub const DEFAULT_TASKS_MAX: usize = 10_000_000;
    /// The default memory budget: 4 GiB, room for the default number of
    /// tasks with short keys and small payloads.
    pub const DEFAULT_MEMORY_BYTES_MAX: u64 = 4 << 30;
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            payload_bytes_max: Self::DEFAULT_PAYLOAD_BYTES_MAX,
            tasks_max: Self::DEFAULT_TASKS_MAX,
            memory_bytes_max: Self::DEFAULT_MEMORY_BYTES_MAX,
            disk_bytes_max: None,
        }
    }
}

/// Longest queue name, in bytes.
pub const QUEUE_NAME_BYTES_MAX: usize = 200;
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
/// A task's `max_attempts` that sets no limit: it is never dead for want of
/// attempts, and a delivery that fails without a delay (a lease that runs
/// out) makes it due again at once, not after a backoff, as beanstalkd does.
pub const ATTEMPTS_UNLIMITED: u32 = 0;
/// The priority of a task that names none: beanstalkd's convention, below
/// which a job counts as urgent.
pub const PRIORITY_DEFAULT: u32 = 1_024;
/// One hash table entry for a task's priority or own lease (kept only for a
/// task that has either).
pub const TERMS_OVERHEAD_BYTES: u64 = 32;

/// What a task's priority and own lease, when it has either, cost the
/// (memory, disk) budgets: the side table's entry, and their 4 bytes each.
pub const fn terms_bytes() -> (u64, u64) {
    (TERMS_OVERHEAD_BYTES, 8)
}
/// Shortest and longest lease.
pub const LEASE_MS_MIN: u64 = 100;
/// Longest lease: 12 hours.
pub const LEASE_MS_MAX: u64 = 12 * 3600 * 1000;
const _: () = assert!(LEASE_MS_MAX <= u32::MAX as u64, "a task's own lease fits a u32");
/// Lease when the client does not say.
pub const LEASE_MS_DEFAULT: u64 = 30_000;
/// Longest long-poll of a claim.
pub const WAIT_MS_MAX: u64 = 60_000;
/// Most tasks one claim returns.
pub const CLAIM_MAX: usize = 1_000;
/// Most tasks in one batch enqueue.
pub const BATCH_MAX: usize = 1_000;
/// Most acks in one batch: a claim's worth.
pub const ACK_BATCH_MAX: usize = CLAIM_MAX;
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
/// Payloads up to this many bytes are kept in memory beside their task, so a
/// claim hands them out without reading the store; larger ones live only in
/// the store and are read when a claim or a read hands them out. See
/// `BENCHMARKS.md` ("Payloads on disk") for the measurement behind it.
pub const PAYLOAD_INLINE_MAX: usize = 128;

/// Whether a payload of this size is kept in memory ([`PAYLOAD_INLINE_MAX`]);
/// else it lives only in the store. The one place that rule is written.
pub const fn payload_inline(payload_bytes: usize) -> bool {
    payload_bytes <= PAYLOAD_INLINE_MAX
}
/// Payload bytes one claim or listing page hands out, at most: it stops
/// before the task that would pass it (a claim always hands out at least one).
pub const ANSWER_PAYLOAD_BYTES_MAX: usize = 16 << 20;
/// Payload bytes waiting for the writer; past it, new writes wait for room,
/// like [`QUEUED_MUTATIONS_MAX`]. Bounds what large payloads in flight cost.
pub const QUEUED_PAYLOAD_BYTES_MAX: usize = 64 << 20;

/// Memory the engine counts for one task held: its slot, its index entries
/// and its timer, measured (`BENCHMARKS.md`, "Payloads on disk"), plus its
/// payload of `payload_bytes` if kept in memory ([`payload_inline`]) and its
/// idempotency key (held twice, in the task's side table and in its queue's
/// index).
pub const fn task_memory_bytes(payload_bytes: usize, key_bytes: Option<usize>) -> u64 {
    let key = match key_bytes {
        Some(bytes) => KEY_OVERHEAD_BYTES + 2 * bytes as u64,
        None => 0,
    };
    let payload = if payload_inline(payload_bytes) { payload_bytes as u64 } else { 0 };
    TASK_OVERHEAD_BYTES + payload + key
}

/// Resident memory per task without key or payload, measured with the
/// server's allocator (jemalloc): a server with 1 M tasks whose 4 KiB payloads
/// are all on disk had 187 B of resident memory per task, of which 33 B were
/// redb's page cache and 8 B the empty process. (With glibc's malloc it was
/// 174 B, and this 136.)
pub const TASK_OVERHEAD_BYTES: u64 = 146;
/// Two hash table entries and two allocations for a key.
pub const KEY_OVERHEAD_BYTES: u64 = 96;

/// Longest reason a nack may give, in bytes of UTF-8: room for an error
/// message, not for a stack trace. A task's reason is charged to the memory
/// and disk budgets, but a nack is never refused for them (the consumer must
/// be able to give a task back), so a budget may be passed by at most this
/// much a task.
pub const NACK_REASON_BYTES_MAX: usize = 1_024;
/// One hash table entry and one allocation for a task's last error.
pub const ERROR_OVERHEAD_BYTES: u64 = 48;

/// What a task's last error costs the (memory, disk) budgets.
pub const fn error_bytes(error_bytes: usize) -> (u64, u64) {
    (ERROR_OVERHEAD_BYTES + error_bytes as u64, 2 + error_bytes as u64)
}

/// A wall clock stepped back by this much or more is met by rebuilding the
/// timers at their deadlines on the clock as it now reads (work in
/// proportion to the tasks held); a smaller step back is waited out, and
/// what comes due meanwhile is late by at most the step. Either way nothing
/// is handed out before its time on the clock. `docs/DESIGN.md`, "Time".
pub const CLOCK_STEP_BACK_REBASE_MS: u64 = 1_000;

/// The most schedules at once.
pub const SCHEDULES_MAX: usize = 10_000;
/// Longest schedule name, in bytes: short enough that its occurrence keys
/// (`schedule:NAME:MS`) stay within [`KEY_BYTES_MAX`].
pub const SCHEDULE_NAME_BYTES_MAX: usize = 128;
const _: () = assert!("schedule:".len() + SCHEDULE_NAME_BYTES_MAX + 1 + 20 <= KEY_BYTES_MAX);
/// An occurrence enqueued this late or less is on time; later, it was missed
/// (the server was down or stalled) and the schedule's misfire policy decides.
/// Long enough for a restart or a stall of the writer, short against the
/// shortest cron period (a second).
pub const MISFIRE_GRACE_MS: u64 = 5_000;
/// Most missed occurrences one schedule enqueues at once under the `all`
/// misfire policy: the latest ones.
pub const MISFIRE_RUNS_MAX: usize = 100;
/// When an occurrence could not be enqueued (the store failed, or a limit or
/// budget was reached), the schedule tries again this much later.
pub const SCHEDULE_RETRY_MS: u64 = 1_000;
/// Most schedules one listing page returns.
pub const SCHEDULE_LIST_MAX: usize = 1_000;

/// Longest URL of a push target, in bytes.
pub const PUSH_URL_BYTES_MAX: usize = 2_048;
/// Most headers of a push target.
pub const PUSH_HEADERS_MAX: usize = 32;
/// Longest header name of a push target, in bytes.
pub const PUSH_HEADER_NAME_BYTES_MAX: usize = 128;
/// Longest header value of a push target, in bytes.
pub const PUSH_HEADER_VALUE_BYTES_MAX: usize = 4_096;
/// Most bytes of a push target's headers, names and values together.
pub const PUSH_HEADERS_BYTES_MAX: usize = 16_384;
/// Headers a push target may not set: hop-by-hop ones (RFC 9110, 7.6.1) and
/// those the client works out itself. Names are compared without case;
/// names starting with [`PUSH_RESERVED_HEADER_PREFIX`] are refused too.
pub const PUSH_FORBIDDEN_HEADERS: [&str; 11] = [
    "connection",
    "keep-alive",
    "proxy-authenticate",
    "proxy-authorization",
    "proxy-connection",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "host",
    "content-length",
];
/// The prefix of the headers hourglass sets on a push delivery
/// (`Hourglass-Task-Id`, `Hourglass-Signature`, ...): a target may not set any.
pub const PUSH_RESERVED_HEADER_PREFIX: &str = "hourglass-";
/// Shortest timeout of a push delivery.
pub const PUSH_TIMEOUT_MS_MIN: u32 = 100;
/// Longest timeout of a push delivery: 30 minutes.
pub const PUSH_TIMEOUT_MS_MAX: u32 = 30 * 60 * 1_000;
/// A push delivery's timeout when its queue sets none: 30 seconds.
pub const PUSH_TIMEOUT_MS_DEFAULT: u32 = 30_000;
/// What a push delivery's lease adds to its timeout, so that the delivery
/// is settled (acked or nacked) before the lease runs out.
pub const PUSH_LEASE_MARGIN_MS: u64 = 10_000;
const _: () = assert!(PUSH_TIMEOUT_MS_MIN as u64 + PUSH_LEASE_MARGIN_MS >= LEASE_MS_MIN);
const _: () = assert!(PUSH_TIMEOUT_MS_MAX as u64 + PUSH_LEASE_MARGIN_MS <= LEASE_MS_MAX);
const _: () = assert!(PUSH_TIMEOUT_MS_MIN <= PUSH_TIMEOUT_MS_DEFAULT && PUSH_TIMEOUT_MS_DEFAULT <= PUSH_TIMEOUT_MS_MAX);
/// The longest a `Retry-After` (429, 503) may put a delivery off: the
/// longest backoff.
pub const PUSH_RETRY_AFTER_MS_MAX: u64 = BACKOFF_MAX_MS;
/// Highest rate a queue may be limited to, in tasks a second.
pub const RATE_PER_S_MAX: f64 = 1_000_000.0;
/// Lowest rate a queue may be limited to: one task every ten minutes.
pub const RATE_PER_S_MIN: f64 = 1.0 / 600.0;
/// Largest token bucket of a queue's rate limit.
pub const BURST_MAX: u32 = 1_000_000;
/// Highest cap on a queue's tasks leased at once.
pub const MAX_IN_FLIGHT_MAX: u32 = 1_000_000;
/// When a claim finds every due task held back by a queue's flow control, it
/// looks again at least this often: a slot freed on another node (which may
/// wake nobody here) is seen within it.
pub const FLOW_LOOK_AGAIN_MS: u64 = 100;
/// One hash table entry and one allocation for a task's own HTTP target,
/// besides its encoded bytes.
pub const TARGET_OVERHEAD_BYTES: u64 = 64;
