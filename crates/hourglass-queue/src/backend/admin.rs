//! Queue administration: pausing a queue, deleting its dead tasks.

use async_trait::async_trait;

use crate::error::QueueError;
use crate::model::Pause;
use crate::settings::QueueSettings;
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

    /// `queue`'s settings: its push target and flow control; the defaults
    /// (a pull queue without limits) for a queue never set.
    ///
    /// # Errors
    /// [`QueueError::Invalid`] for a malformed name, [`QueueError::Storage`],
    /// [`QueueError::Unsupported`] for a backend without settings.
    async fn settings(&self, queue: &str) -> Result<QueueSettings, QueueError> {
        let _ = queue;
        Err(QueueError::Unsupported("queue settings".into()))
    }

    /// Replaces `queue`'s settings whole, durably, and returns them. Due
    /// tasks follow at once: setting a push target moves the queue's tasks
    /// without a target of their own from pull claims to push claims, and
    /// removing it moves them back; a new rate starts with a full bucket,
    /// and a lower cap holds back claims until the tasks in flight fall
    /// below it (none is taken back). Waiting claims wake. A queue never
    /// used is created.
    ///
    /// # Errors
    /// [`QueueError::Invalid`] (checked by
    /// [`validate::settings`](crate::validate::settings), or one queue too
    /// many), [`QueueError::Storage`], [`QueueError::Unsupported`].
    async fn put_settings(&self, queue: &str, settings: QueueSettings) -> Result<QueueSettings, QueueError> {
        let _ = (queue, settings);
        Err(QueueError::Unsupported("queue settings".into()))
    }
}
