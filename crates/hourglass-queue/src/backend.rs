//! The seam every backend implements: see [`Backend`].

use async_trait::async_trait;

use crate::error::QueueError;
use crate::model::{Claimed, Enqueued, Lease, Nack, NewTask, Pause, RunAt, Status, TaskInfo};
use crate::schedule::{NewSchedule, ScheduleInfo};
use crate::stats::{QueueStats, StorageStats, Totals};

/// Where a listing starts: the position after the last task of the previous
/// page. Opaque to clients; the server encodes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Cursor {
    /// The priority of the last task listed, for listings in claim order.
    pub priority: u32,
    /// The due time of the last task listed, for listings in due-time order.
    pub run_at_ms: u64,
    /// The id of the last task listed.
    pub id: u64,
}

/// What to list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ListRequest {
    /// Only tasks of this status; every task of the queue if `None`.
    pub status: Option<Status>,
    /// Start after this position; from the beginning if `None`.
    pub after: Option<Cursor>,
    /// Most tasks to return, 1 to [`LIST_MAX`](crate::limits::LIST_MAX).
    pub limit: usize,
}

/// One page of a listing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Page {
    /// The tasks, in the listing's order: due tasks by due time, the others by id.
    pub tasks: Vec<TaskInfo>,
    /// Where the next page starts; `None` when this one is the last. A page
    /// may hold fewer tasks than asked (even none) and still have a next one:
    /// a listing does bounded work per page, whatever the queue's size.
    pub next: Option<Cursor>,
}

/// One page of the schedules, by name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchedulePage {
    /// The schedules, in name order.
    pub schedules: Vec<ScheduleInfo>,
    /// The name to list after for the next page; `None` when this one is the last.
    pub next: Option<Box<str>>,
}

/// The queue's operations: the seam every backend implements, at the level a
/// client asks for them. The HTTP server and the CLI use nothing else, so a
/// backend whose data several nodes share slots in without either changing.
///
/// What the contract asks of an implementation, so that the server can stay
/// the same over one node's disk or a store shared by many:
/// - **Ids come from the backend**, unique and never reused, not from a node's
///   memory.
/// - **A lease fences out a stale holder**: every claim makes a new [`Lease`];
///   ack, nack and extend with any other one fail with
///   [`QueueError::StaleLease`] and change nothing.
/// - **Long-poll wake-ups come from the backend**: [`claim`](Backend::claim)
///   with a `wait_ms` returns as soon as a task of the queue is due, whichever
///   node made it due.
/// - **A 2xx is durable**: an operation returns `Ok` only once its change is as
///   durable as the backend's mode promises, and no other request sees the
///   change before that. A failed write leaves no trace.
/// - **Bounded**: listings return at most [`LIST_MAX`](crate::limits::LIST_MAX)
///   tasks a page, claims at most [`CLAIM_MAX`](crate::limits::CLAIM_MAX).
///
/// [`Lease`]: crate::Lease
#[async_trait]
pub trait Backend: Send + Sync + 'static {
    /// Adds a task to `queue`. A key that matches a live task of the queue
    /// returns that task instead (`created: false`).
    ///
    /// # Errors
    /// [`QueueError::Invalid`], [`QueueError::PayloadTooLarge`],
    /// [`QueueError::TooManyTasks`], [`QueueError::Storage`].
    async fn enqueue(&self, queue: &str, new: NewTask) -> Result<Enqueued, QueueError> {
        let mut done = self.enqueue_batch(queue, vec![new]).await?;
        Ok(done.pop().expect("one task in, one out"))
    }

    /// Adds every task or none, in one durable write.
    ///
    /// # Errors
    /// As [`enqueue`](Backend::enqueue); the first invalid task fails the batch.
    async fn enqueue_batch(&self, queue: &str, batch: Vec<NewTask>) -> Result<Vec<Enqueued>, QueueError>;

    /// The task with its payload.
    ///
    /// # Errors
    /// [`QueueError::NotFound`].
    async fn get(&self, id: u64) -> Result<TaskInfo, QueueError>;

    /// The live task of `queue` with idempotency key `key`, if any.
    ///
    /// # Errors
    /// [`QueueError::Invalid`] for a malformed queue name or key.
    async fn find_by_key(&self, queue: &str, key: &str) -> Result<Option<TaskInfo>, QueueError>;

    /// Cancels (deletes) the task, whatever its state.
    ///
    /// # Errors
    /// [`QueueError::NotFound`], [`QueueError::Storage`].
    async fn cancel(&self, id: u64) -> Result<(), QueueError>;

    /// Like [`cancel`](Backend::cancel), but refuses a leased task: only its
    /// holder may remove it, with an ack (beanstalkd's `delete`).
    ///
    /// # Errors
    /// [`QueueError::NotFound`], [`QueueError::Conflict`] if it is leased,
    /// [`QueueError::Storage`].
    async fn cancel_unleased(&self, id: u64) -> Result<(), QueueError>;

    /// Moves a scheduled (or dead, which revives it) task to a new due time.
    ///
    /// # Errors
    /// [`QueueError::NotFound`], [`QueueError::Conflict`] for a leased task,
    /// [`QueueError::Invalid`], [`QueueError::Storage`].
    async fn reschedule(&self, id: u64, run_at: RunAt) -> Result<TaskInfo, QueueError>;

    /// Moves a dead task back to scheduled, due now, with its attempts reset.
    ///
    /// # Errors
    /// [`QueueError::NotFound`], [`QueueError::Conflict`] if it is not dead,
    /// [`QueueError::Storage`].
    async fn retry(&self, id: u64) -> Result<TaskInfo, QueueError>;

    /// Hands out up to `max` due tasks of `queue`, oldest due first, each under
    /// a new lease of `lease_ms`. With none due, waits up to `wait_ms` and
    /// returns as soon as one comes due.
    ///
    /// # Errors
    /// [`QueueError::Invalid`] for arguments out of range.
    async fn claim(&self, queue: &str, max: usize, lease_ms: u64, wait_ms: u64) -> Result<Vec<Claimed>, QueueError>;

    /// Hands out the first due task of any of `queues` (at most
    /// [`QUEUES_MAX`](crate::limits::QUEUES_MAX)), in claim order across
    /// them: the most urgent priority, then the oldest due. Like
    /// [`claim`](Backend::claim) otherwise; `None` if none came due within
    /// `wait_ms`.
    ///
    /// # Errors
    /// [`QueueError::Invalid`] for arguments out of range.
    async fn claim_any(&self, queues: &[&str], lease_ms: u64, wait_ms: u64) -> Result<Option<Claimed>, QueueError>;

    /// Hands out task `id` whatever its state but leased: scheduled, due or
    /// dead (beanstalkd's `reserve-job`), under a new lease (its own, or
    /// `lease_ms`).
    ///
    /// # Errors
    /// [`QueueError::NotFound`], [`QueueError::Conflict`] if it is leased,
    /// [`QueueError::Invalid`] for a lease out of range.
    async fn take(&self, id: u64, lease_ms: u64) -> Result<Claimed, QueueError>;

    /// Finishes a delivery: the task is removed (a repeating one is scheduled
    /// at its next occurrence).
    ///
    /// # Errors
    /// [`QueueError::NotFound`], [`QueueError::StaleLease`] (nothing changed),
    /// [`QueueError::Storage`].
    async fn ack(&self, id: u64, lease: Lease) -> Result<(), QueueError>;

    /// Finishes up to [`ACK_BATCH_MAX`](crate::limits::ACK_BATCH_MAX)
    /// deliveries, of any queues, each as [`ack`](Backend::ack) would: one
    /// answer each, in order (one stale lease fails only its own ack). The
    /// acks run at once, so a backend that groups writes (the embedded one's
    /// commits, Redis's pipelined scripts) makes fewer of them.
    ///
    /// # Errors
    /// [`QueueError::Invalid`] for an empty batch or one too large.
    async fn ack_batch(&self, acks: &[(u64, Lease)]) -> Result<Vec<Result<(), QueueError>>, QueueError> {
        let max = crate::limits::ACK_BATCH_MAX;
        if acks.is_empty() || acks.len() > max {
            return Err(QueueError::Invalid(format!("a batch of acks holds 1 to {max}, not {}", acks.len())));
        }
        Ok(futures_util::future::join_all(acks.iter().map(|&(id, lease)| self.ack(id, lease))).await)
    }

    /// Gives a delivery back as `nack` says: the task is due again after its
    /// delay (or a backoff that doubles with each attempt), or dead if out of
    /// attempts or asked to be; its reason becomes the task's
    /// [`last_error`](crate::Task::last_error) (a nack without one clears it),
    /// and its priority, if given, the task's.
    ///
    /// # Errors
    /// [`QueueError::NotFound`], [`QueueError::StaleLease`], [`QueueError::Invalid`],
    /// [`QueueError::Storage`].
    async fn nack(&self, id: u64, lease: Lease, nack: Nack) -> Result<TaskInfo, QueueError>;

    /// Extends a lease to `lease_ms` from now; returns the new end (Unix ms).
    ///
    /// # Errors
    /// [`QueueError::NotFound`], [`QueueError::StaleLease`], [`QueueError::Invalid`].
    async fn extend(&self, id: u64, lease: Lease, lease_ms: u64) -> Result<u64, QueueError>;

    /// A page of `queue`'s tasks.
    ///
    /// # Errors
    /// [`QueueError::Invalid`] for a malformed queue name or a limit out of range.
    async fn list(&self, queue: &str, request: ListRequest) -> Result<Page, QueueError>;

    /// Creates or replaces the schedule `name`; returns it as stored, and
    /// whether it is new. A replaced schedule starts again from now: its
    /// next occurrence is the first after now, and after the last one the
    /// version it replaces ran (which may have run one since the request
    /// came in).
    ///
    /// # Errors
    /// [`QueueError::Invalid`] (a bad name, expression or time zone, or a
    /// rule that never fires), [`QueueError::PayloadTooLarge`],
    /// [`QueueError::TooManySchedules`], [`QueueError::OverMemoryBudget`],
    /// [`QueueError::Storage`].
    async fn put_schedule(&self, name: &str, new: NewSchedule) -> Result<(ScheduleInfo, bool), QueueError>;

    /// Pauses (`true`) or resumes the schedule `name`. A paused schedule
    /// enqueues nothing; resumed, the occurrences it missed meanwhile go to
    /// its misfire policy. Pausing a paused one, or resuming a running one,
    /// changes nothing.
    ///
    /// # Errors
    /// [`QueueError::ScheduleNotFound`], [`QueueError::Storage`].
    async fn pause_schedule(&self, name: &str, paused: bool) -> Result<ScheduleInfo, QueueError>;

    /// The schedule `name` with its next occurrences.
    ///
    /// # Errors
    /// [`QueueError::ScheduleNotFound`], [`QueueError::Invalid`] for a malformed name.
    async fn schedule(&self, name: &str) -> Result<ScheduleInfo, QueueError>;

    /// A page of the schedules, in name order, after `after`.
    ///
    /// # Errors
    /// [`QueueError::Invalid`] for a limit out of 1 to
    /// [`SCHEDULE_LIST_MAX`](crate::limits::SCHEDULE_LIST_MAX).
    async fn schedules(&self, after: Option<&str>, limit: usize) -> Result<SchedulePage, QueueError>;

    /// Deletes the schedule `name`; tasks it enqueued stay.
    ///
    /// # Errors
    /// [`QueueError::ScheduleNotFound`], [`QueueError::Storage`].
    async fn delete_schedule(&self, name: &str) -> Result<(), QueueError>;

    /// Pauses (`true`) or resumes `queue`, durably: a paused queue's claims
    /// hand out nothing (a waiting claim waits on), its due tasks wait, and
    /// enqueues, timers and expiries go on. Returns the queue's counts.
    /// A pause [`Until`](Pause::Until) a time ends by itself then (claims
    /// waiting on the queue wake), across restarts too. Asking for the pause
    /// a queue has, or resuming a running one, changes nothing; a queue never
    /// used is created paused.
    ///
    /// # Errors
    /// [`QueueError::Invalid`] for a malformed name or one queue too many,
    /// [`QueueError::Storage`].
    async fn pause_queue(&self, queue: &str, pause: Pause) -> Result<QueueStats, QueueError>;

    /// Deletes up to `max` of `queue`'s dead tasks, in one durable write, and
    /// returns their ids; fewer than `max` means none is left. Deleting every
    /// dead task of a queue is a loop of these.
    ///
    /// # Errors
    /// [`QueueError::Invalid`] for a malformed name or a `max` out of 1 to
    /// [`LIST_MAX`](crate::limits::LIST_MAX), [`QueueError::Storage`].
    async fn delete_dead(&self, queue: &str, max: usize) -> Result<Vec<u64>, QueueError>;

    /// Every queue's counts, by name.
    async fn queues(&self) -> Vec<QueueStats>;

    /// One queue's counts; `None` if it was never used.
    async fn queue(&self, name: &str) -> Option<QueueStats>;

    /// Counters since start.
    async fn totals(&self) -> Totals;

    /// What the backend's store did since start (commits, their time and
    /// size); `None` for a backend that does not count them.
    async fn storage(&self) -> Option<StorageStats>;

    /// Stops handing out tasks and accepting writes, and wakes every waiting
    /// claim. Writes already accepted still complete.
    fn close(&self);
}
