//! Tasks and their states, as the engine and every backend know them. How they
//! look on the wire (names of states, the lease as text, JSON) is the server's
//! business, not this crate's.

use std::fmt;
use std::sync::Arc;

use crate::payload::Payload;
use crate::target::{HttpTarget, PushTarget};

/// A task: deliver its payload to whoever claims queue `queue`, at `run_at_ms`.
/// The payload is kept apart (it is never rewritten once stored).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Task {
    /// Unique, made by the backend, never reused.
    pub id: u64,
    /// The queue's name.
    pub queue: Arc<str>,
    /// When it is due, in milliseconds since the Unix epoch.
    pub run_at_ms: u64,
    /// Deliveries so far of the current run.
    pub attempt: u32,
    /// Deliveries allowed before the task is dead;
    /// [`ATTEMPTS_UNLIMITED`](crate::limits::ATTEMPTS_UNLIMITED) for no limit.
    pub max_attempts: u32,
    /// Among due tasks of its queue, those of the lowest priority are handed
    /// out first (0 is the most urgent), then the oldest due.
    pub priority: u32,
    /// The task's own lease: a claim hands it out for this long, whatever
    /// lease the claim asked for. (beanstalkd's time-to-run.)
    pub lease_ms: Option<u32>,
    /// The client's idempotency key, unique among the queue's live tasks.
    pub key: Option<Box<str>>,
    /// For a repeating task, its period.
    pub every_ms: Option<u64>,
    /// For a one-off task that must not run late: not delivered by then
    /// (Unix ms), it is dead, [`DeadReason::Expired`], instead.
    pub expires_at_ms: Option<u64>,
    /// Why it died, if it is dead ([`DeadReason::Attempts`] while it lives,
    /// and once retried).
    pub dead_reason: DeadReason,
    /// Why its latest delivery failed: the reason its latest nack gave (at
    /// most [`NACK_REASON_BYTES_MAX`](crate::limits::NACK_REASON_BYTES_MAX)
    /// bytes), or `lease expired`. Kept until the task is removed.
    pub last_error: Option<Box<str>>,
    /// Its own push target: delivered by push to it, whatever its queue's
    /// settings. Never changes.
    pub http: Option<Arc<HttpTarget>>,
    /// Where it is in its life.
    pub state: TaskState,
    /// When it was enqueued, in milliseconds since the Unix epoch.
    pub created_ms: u64,
}

/// The states of a task. "Due" is not a state of its own: a scheduled task whose
/// `run_at_ms` has passed is due, and waits in its queue for a claim.
///
/// ```text
/// scheduled --due--> (due) --claim--> leased --ack--> done (removed)
///     ^                 |               |  \--nack or lease expiry, attempts left--> scheduled (backoff)
///     |                 |               \----nack or lease expiry, none left (or expired)--> dead
///     |                 \--expires_at_ms passed, not delivered---------------------------> dead
///     +--------------retry------------------------------------------------------------- dead
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TaskState {
    /// Waiting for `run_at_ms`, or due and waiting for a claim.
    Scheduled,
    /// Handed to a consumer until `until_ms`, under a lease.
    Leased {
        /// What the consumer must show to ack, nack or extend.
        lease: Lease,
        /// When the lease expires and the task is redelivered.
        until_ms: u64,
    },
    /// Out of attempts: kept, listable, retryable or deletable.
    Dead,
}

/// Why a dead task died.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum DeadReason {
    /// Out of attempts, or nacked as dead.
    #[default]
    Attempts,
    /// Not delivered by its expiry.
    Expired,
    /// Its payload was found damaged when it was handed out: delivering it
    /// again would find the same damage.
    Corrupt,
}

/// What a listing filters on: the states, with "due" told apart from
/// "scheduled".
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Status {
    /// Scheduled, not yet due.
    Scheduled,
    /// Due, waiting for a claim.
    Due,
    /// Handed out under a lease.
    Leased,
    /// Out of attempts.
    Dead,
}

impl Status {
    /// Every status, in the order of a task's life.
    pub const ALL: [Status; 4] = [Status::Scheduled, Status::Due, Status::Leased, Status::Dead];

    /// The status at `now_ms` of a scheduled task due at `run_at_ms`: the one
    /// place "due" is told from "scheduled" (due from its due time on).
    pub fn of_scheduled(run_at_ms: u64, now_ms: u64) -> Status {
        if run_at_ms <= now_ms {
            Status::Due
        } else {
            Status::Scheduled
        }
    }

    /// The status of `task` at `now_ms`.
    pub fn of(task: &Task, now_ms: u64) -> Status {
        match task.state {
            TaskState::Scheduled => Status::of_scheduled(task.run_at_ms, now_ms),
            TaskState::Leased { .. } => Status::Leased,
            TaskState::Dead => Status::Dead,
        }
    }
}

/// The token of one delivery. A backend makes a new one for every claim, so
/// the holder of an expired lease cannot ack, nack or extend a later delivery.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Lease(pub u64);

impl fmt::Debug for Lease {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Lease({:016x})", self.0)
    }
}

/// When a new task is due.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunAt {
    /// This many milliseconds from now.
    Delay(u64),
    /// At this Unix time in milliseconds (a time past is due at once).
    At(u64),
}

/// What a client asks to enqueue; checked by the backend.
#[derive(Debug, Clone)]
pub struct NewTask {
    /// The payload: bytes, kept as they are.
    pub payload: Payload,
    /// When it is due.
    pub run_at: RunAt,
    /// Optional idempotency key.
    pub key: Option<String>,
    /// Optional attempt limit.
    pub max_attempts: Option<u32>,
    /// Optional priority; [`PRIORITY_DEFAULT`](crate::limits::PRIORITY_DEFAULT) if not given.
    pub priority: Option<u32>,
    /// Optional lease of its own, in place of each claim's.
    pub lease_ms: Option<u64>,
    /// Optional repeat period.
    pub every_ms: Option<u64>,
    /// Optional expiry of a one-off task: not delivered by then, it is dead
    /// with the reason `expired` rather than run late. [`RunAt::Delay`]
    /// counts from now.
    pub expires: Option<RunAt>,
    /// Optional target of its own: the task is delivered by push, as this
    /// request.
    pub http: Option<HttpTarget>,
}

impl NewTask {
    /// A task with `payload`, due at `run_at`, with no key, the default attempt
    /// limit, no repeat and no expiry.
    pub fn new(payload: impl Into<Payload>, run_at: RunAt) -> NewTask {
        NewTask {
            payload: payload.into(),
            run_at,
            key: None,
            max_attempts: None,
            priority: None,
            lease_ms: None,
            every_ms: None,
            expires: None,
            http: None,
        }
    }
}

/// A task with its payload, as a read shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskInfo {
    /// Everything but the payload.
    pub task: Task,
    /// The payload.
    pub payload: Payload,
    /// Its status when it was read.
    pub status: Status,
}

/// A task handed to a consumer by a claim.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Claimed {
    /// The task's id.
    pub id: u64,
    /// The task's queue.
    pub queue: Arc<str>,
    /// The payload.
    pub payload: Payload,
    /// Which delivery this is, from 1.
    pub attempt: u32,
    /// The lease to ack, nack or extend with.
    pub lease: Lease,
    /// When the lease ends and the task is delivered again, Unix ms.
    pub lease_until_ms: u64,
    /// When the task was due, Unix ms.
    pub run_at_ms: u64,
    /// For a push claim, where to deliver it: the task's own target or its
    /// queue's, resolved ([`PushTarget::resolve`]); `None` for a pull claim.
    pub target: Option<Arc<PushTarget>>,
}

/// What [`QueueAdmin::pause_queue`](crate::QueueAdmin::pause_queue) asks of a queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pause {
    /// Claims hand out its tasks again.
    Resume,
    /// Paused until resumed.
    Indefinitely,
    /// Paused until this Unix time in milliseconds, then resumed by itself
    /// (beanstalkd's `pause-tube`); a restart keeps the end.
    Until(u64),
}

/// Whether a queue `paused` (until `until_ms`, if its pause ends by itself)
/// hands out nothing at `now_ms`: the one place every backend reads a pause.
pub fn paused_at(paused: bool, until_ms: Option<u64>, now_ms: u64) -> bool {
    paused && until_ms.is_none_or(|until_ms| now_ms < until_ms)
}

/// How a consumer gives a delivery back ([`Tasks::nack`](crate::Tasks::nack)).
///
/// For push deliveries: a failed attempt is `Nack::default().because("HTTP
/// 500: ...")`; a 429 or 503 with `Retry-After` is [`Nack::after`] (bounded
/// by [`PUSH_RETRY_AFTER_MS_MAX`](crate::limits::PUSH_RETRY_AFTER_MS_MAX));
/// a 410 or a refused target is [`Nack::dead`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Nack {
    /// Due again after this long; without it, after a backoff that doubles
    /// with each attempt (at once for a task of unlimited attempts).
    pub delay_ms: Option<u64>,
    /// What went wrong, at most
    /// [`NACK_REASON_BYTES_MAX`](crate::limits::NACK_REASON_BYTES_MAX) bytes:
    /// becomes the task's [`last_error`](Task::last_error); without one, the
    /// last error is cleared.
    pub reason: Option<Box<str>>,
    /// A new priority for the task.
    pub priority: Option<u32>,
    /// Dead at once, attempts left or not (beanstalkd's `bury`).
    pub dead: bool,
}

impl Nack {
    /// Due again after `delay_ms`.
    pub fn after(delay_ms: u64) -> Nack {
        Nack { delay_ms: Some(delay_ms), ..Nack::default() }
    }

    /// Dead at once, attempts left or not, with `reason` as the task's last
    /// error (a 410, a target the outbound rules refuse).
    pub fn dead(reason: &str) -> Nack {
        Nack { dead: true, ..Nack::default() }.because(reason)
    }

    /// With `reason` as the task's last error.
    pub fn because(self, reason: &str) -> Nack {
        Nack { reason: Some(reason.into()), ..self }
    }
}

/// The result of an enqueue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Enqueued {
    /// The task's id.
    pub id: u64,
    /// When it is due, Unix ms.
    pub run_at_ms: u64,
    /// `false` when the idempotency key matched a live task, which is returned instead.
    pub created: bool,
}
