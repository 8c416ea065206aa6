//! A task as the engine keeps it in memory: 56 bytes. The queue is an index,
//! the counters are small, a large payload stays in the store, and the rarer
//! parts (a lease, an idempotency key, a repeat period) live in side tables of
//! [`State`](super::State).

/// One task's record.
pub(super) struct Slot {
    pub(super) run_at_ms: u64,
    pub(super) created_ms: u64,
    /// The raw wheel key of the due time or lease expiry; [`NO_TIMER`] if none.
    pub(super) timer: u64,
    /// The payload if it is kept in memory (at most
    /// [`PAYLOAD_INLINE_MAX`](hourglass_queue::limits::PAYLOAD_INLINE_MAX) bytes), else
    /// `None`: it is read from the store when handed out. A plain box: an
    /// `Arc` would add 16 bytes of counts to every task.
    pub(super) payload: Option<Box<[u8]>>,
    pub(super) queue: u32,
    /// The payload's size, wherever it is.
    pub(super) payload_bytes: u32,
    pub(super) attempt: u16,
    pub(super) max_attempts: u16,
    pub(super) phase: Phase,
    /// A change of this task is on its way to the store: the task is filed
    /// nowhere (no claim, timer or listing sees it) and requests for it wait
    /// until the change is settled. A new task is pending until its enqueue is
    /// durable.
    pub(super) pending: bool,
    /// New, and its enqueue not yet durable: not counted among the tasks held.
    pub(super) fresh: bool,
    pub(super) keyed: bool,
}

const _: () = assert!(std::mem::size_of::<Slot>() <= 56);
const _: () = assert!(std::mem::size_of::<Option<Slot>>() == std::mem::size_of::<Slot>());

/// No wheel entry: an index no wheel ever hands out.
pub(super) const NO_TIMER: u64 = u64::MAX;

/// Where a task is in its life; due is a scheduled task whose time has come.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Phase {
    Scheduled,
    Leased,
    Dead,
}
