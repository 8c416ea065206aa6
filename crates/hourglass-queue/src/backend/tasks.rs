//! Tasks and claims: what every backend offers.

use async_trait::async_trait;

use crate::error::QueueError;
use crate::model::{Claimed, Enqueued, Lease, Nack, NewTask, RunAt, Status, TaskInfo};
use crate::target::Delivery;
use crate::validate;

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

/// A claim whose arguments passed every check ([`Claim::new`],
/// [`Claim::push`]): the only way to ask a backend's
/// [`claim_from`](Tasks::claim_from), so no backend checks them again, or
/// forgets to.
///
/// A pull claim ([`Claim::new`]) takes only tasks delivered by pull, a push
/// claim ([`Claim::push`]) only tasks delivered by push (see
/// [`Delivery`]). Both are held to each queue's flow control
/// ([`Flow`](crate::Flow)): a claim that would pass a queue's rate or its cap
/// on tasks in flight hands out fewer, and a waiting claim waits for a token
/// or a freed slot as it waits for a task to come due.
#[derive(Debug, Clone, Copy)]
pub struct Claim<'a> {
    queues: &'a [&'a str],
    max: usize,
    lease_ms: u64,
    wait_ms: u64,
    delivery: Delivery,
}

impl<'a> Claim<'a> {
    /// Up to `max` due tasks from `queues` (1 to
    /// [`QUEUES_MAX`](crate::limits::QUEUES_MAX) names), each under a lease of
    /// `lease_ms`, waiting up to `wait_ms` for one to come due.
    ///
    /// # Errors
    /// [`QueueError::Invalid`] for an argument out of range, named.
    pub fn new(queues: &'a [&'a str], max: usize, lease_ms: u64, wait_ms: u64) -> Result<Claim<'a>, QueueError> {
        validate::claim(queues, max, lease_ms, wait_ms)?;
        Ok(Claim { queues, max, lease_ms, wait_ms, delivery: Delivery::Pull })
    }

    /// The delivery loop's claim: up to `max` tasks delivered by push, from
    /// every queue, waiting up to `wait_ms` for one. Each is handed out with
    /// its target resolved ([`Claimed::target`]) under a lease of that
    /// target's [`lease_ms`](crate::PushTarget::lease_ms): its timeout and a
    /// margin. Among queues, the one whose first task comes first in claim
    /// order is served first; one claim may take from several.
    ///
    /// # Errors
    /// [`QueueError::Invalid`] for an argument out of range, named.
    pub fn push(max: usize, wait_ms: u64) -> Result<Claim<'static>, QueueError> {
        validate::push_claim(max, wait_ms)?;
        Ok(Claim { queues: &[], max, lease_ms: 0, wait_ms, delivery: Delivery::Push })
    }

    /// Which tasks it takes: pull or push ones.
    pub fn delivery(&self) -> Delivery {
        self.delivery
    }

    /// The queues, in the order given (none for a push claim: it takes from
    /// every queue).
    pub fn queues(&self) -> &'a [&'a str] {
        self.queues
    }

    /// Most tasks to hand out.
    pub fn max(&self) -> usize {
        self.max
    }

    /// The lease of each task handed out (unless the task has its own); 0 for
    /// a push claim, whose leases are its targets'.
    pub fn lease_ms(&self) -> u64 {
        self.lease_ms
    }

    /// How long to wait for a task to come due.
    pub fn wait_ms(&self) -> u64 {
        self.wait_ms
    }
}

/// Tasks and claims: enqueue, read, change, hand out and finish tasks.
#[async_trait]
pub trait Tasks: Send + Sync + 'static {
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
    /// As [`enqueue`](Tasks::enqueue); the first invalid task fails the batch.
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

    /// Like [`cancel`](Tasks::cancel), but refuses a leased task: only its
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

    /// Hands out up to `claim.max()` due tasks from the one of
    /// `claim.queues()` whose first task comes first in claim order (the most
    /// urgent priority, then the oldest due), each under a new lease. With
    /// none due, waits up to `claim.wait_ms()` and returns as soon as one
    /// comes due; empty if none did, or the backend closed meanwhile.
    ///
    /// Only tasks of the claim's [`delivery`](Claim::delivery) are handed out
    /// (a pull claim on a queue with a push target finds nothing), and no
    /// more than each queue's flow control allows at the moment; tasks held
    /// back by it count as not due for the wait.
    ///
    /// # Errors
    /// [`QueueError::Storage`] if the store failed.
    async fn claim_from(&self, claim: Claim<'_>) -> Result<Vec<Claimed>, QueueError>;

    /// Hands out up to `max` due tasks of `queue`, oldest due first, each under
    /// a new lease of `lease_ms`. With none due, waits up to `wait_ms` and
    /// returns as soon as one comes due.
    ///
    /// # Errors
    /// [`QueueError::Invalid`] for arguments out of range.
    async fn claim(&self, queue: &str, max: usize, lease_ms: u64, wait_ms: u64) -> Result<Vec<Claimed>, QueueError> {
        self.claim_from(Claim::new(&[queue], max, lease_ms, wait_ms)?).await
    }

    /// Hands out the first due task of any of `queues` (at most
    /// [`QUEUES_MAX`](crate::limits::QUEUES_MAX)), in claim order across
    /// them: the most urgent priority, then the oldest due. Like
    /// [`claim`](Tasks::claim) otherwise; `None` if none came due within
    /// `wait_ms`.
    ///
    /// # Errors
    /// [`QueueError::Invalid`] for arguments out of range.
    async fn claim_any(&self, queues: &[&str], lease_ms: u64, wait_ms: u64) -> Result<Option<Claimed>, QueueError> {
        Ok(self.claim_from(Claim::new(queues, 1, lease_ms, wait_ms)?).await?.pop())
    }

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

    /// Finishes up to [`ACK_BATCH_MAX`](crate::limits::ACK_BATCH_MAX) deliveries, of any queues, each as
    /// [`ack`](Tasks::ack) would: one answer each, in order (one stale lease
    /// fails only its own ack).
    ///
    /// # Errors
    /// [`QueueError::Invalid`] for an empty batch or one too large.
    async fn ack_batch(&self, acks: &[(u64, Lease)]) -> Result<Vec<Result<(), QueueError>>, QueueError> {
        validate::ack_batch(acks.len())?;
        self.ack_each(acks).await
    }

    /// [`ack_batch`](Tasks::ack_batch) of a batch already checked. The acks
    /// run at once, so a backend that groups writes (the embedded one's
    /// commits) makes fewer of them; a backend that can do better (Redis's
    /// pipelined scripts) replaces this.
    ///
    /// # Errors
    /// [`QueueError::Storage`] if the batch as a whole failed.
    async fn ack_each(&self, acks: &[(u64, Lease)]) -> Result<Vec<Result<(), QueueError>>, QueueError> {
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
}
