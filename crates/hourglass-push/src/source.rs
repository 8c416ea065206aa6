//! Where push tasks come from and where their outcomes go: the one trait a
//! backend stands behind for the delivery loop.

use std::future::Future;
use std::sync::Arc;

use hourglass_queue::PushTarget;

use crate::outcome::Outcome;

/// One task to push, as a claim hands it out.
#[derive(Debug, Clone)]
pub struct Delivery<T> {
    /// The task's id (`Hourglass-Task-Id`).
    pub task_id: u64,
    /// The task's queue (`Hourglass-Queue`).
    pub queue: Arc<str>,
    /// Which delivery this is, from 1 (`Hourglass-Attempt`).
    pub attempt: u32,
    /// When the task was due, Unix ms (`Hourglass-Due-At`; lateness counts
    /// from it).
    pub due_at_ms: u64,
    /// The payload: the request's body, its bytes as they are.
    pub payload: hourglass_queue::Payload,
    /// Where to send it: the task's own target, or its queue's, resolved
    /// ([`PushTarget::resolve`]).
    pub target: Arc<PushTarget>,
    /// What [`Source::settle`] needs to find this delivery again: the task's
    /// id and lease, say.
    pub ticket: T,
}

/// Push tasks to deliver, and their outcomes: what the delivery loop
/// ([`Deliverer`](crate::Deliverer)) is generic over. [`TasksSource`](crate::TasksSource)
/// is it over any backend of the contract; a test's source in memory is another.
///
/// The contract:
/// - [`claim`](Source::claim) hands out at most `max` due push tasks (the
///   queue's push target, or the task's own `http`), each under a new lease
///   of its target's [`lease_ms`](PushTarget::lease_ms) (its timeout and a
///   margin), so that no other node
///   delivers it meanwhile and a node that dies mid-delivery leaves it to be
///   delivered again when the lease ends (at least once). It should wait a while for a task
///   to come due (long-poll) before it returns an empty batch: the loop
///   claims again at once, and a source that answers empty at once would
///   keep a core busy. The loop
///   drops a claim in progress when asked to stop: a claim must then lose
///   nothing but leases (the tasks it held return when they end).
/// - [`settle`](Source::settle) applies an [`Outcome`] under the ticket's
///   lease: [`Outcome::Done`] acks; [`Outcome::Failed`] records the error as
///   `last_error` and makes the task due after its backoff (or at
///   `not_before_ms`, when given), or dead if it has no attempt left;
///   [`Outcome::Dead`] makes it dead with the reason
///   ([`Outcome::as_nack`] says it in the contract's terms: an ack, or a
///   [`Nack`](hourglass_queue::Nack) under the lease). A lease that is no
///   longer the task's (it ran out, and another node delivered it) changes
///   nothing, and is an error the loop counts.
/// - [`settle_batch`](Source::settle_batch) applies several outcomes, each
///   as [`settle`](Source::settle) would, with one answer each in order (one
///   stale lease fails only its own). The loop hands it the outcomes that
///   ended while the previous settle was under way, so a source that can
///   apply them together (one request a shard, one write to disk) should:
///   by default they are settled each on its own, all at once.
pub trait Source: Send + Sync + 'static {
    /// What [`settle`](Source::settle) takes back to find a delivery.
    type Ticket: Send + Sync + 'static;
    /// A failed claim's or settle's error.
    type Error: std::error::Error + Send + Sync + 'static;

    /// Up to `max` due push tasks, each leased for its target's
    /// [`lease_ms`](PushTarget::lease_ms).
    fn claim(&self, max: usize) -> impl Future<Output = Result<Vec<Delivery<Self::Ticket>>, Self::Error>> + Send;

    /// Applies `outcome` to the delivery of `ticket`.
    fn settle(&self, ticket: Self::Ticket, outcome: Outcome) -> impl Future<Output = Result<(), Self::Error>> + Send;

    /// Applies each outcome to the delivery of its ticket: one answer each,
    /// in order (at most [`SETTLE_BATCH_MAX`](crate::limits::SETTLE_BATCH_MAX)
    /// at once).
    fn settle_batch(
        &self,
        batch: Vec<(Self::Ticket, Outcome)>,
    ) -> impl Future<Output = Vec<Result<(), Self::Error>>> + Send {
        futures_util::future::join_all(batch.into_iter().map(|(ticket, outcome)| self.settle(ticket, outcome)))
    }
}
