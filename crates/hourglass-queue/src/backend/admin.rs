//! Queue administration: pausing a queue, deleting its dead tasks.

use async_trait::async_trait;

use crate::error::QueueError;
use crate::model::Pause;
use crate::stats::QueueStats;

/// What an operator does to a whole queue.
#[async_trait]
pub trait QueueAdmin: Send + Sync {
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
}
