//! What a backend counts: its queues, its totals, its store's work.

use async_trait::async_trait;

use crate::stats::{NodeStats, QueueStats, Second, StorageStats, Totals};

/// Counts, for the dashboard, `/metrics` and the CLI's `stats`.
#[async_trait]
pub trait Stats: Send + Sync {
    /// Every queue's counts, by name.
    async fn queues(&self) -> Vec<QueueStats>;

    /// One queue's counts; `None` if it was never used.
    async fn queue(&self, name: &str) -> Option<QueueStats>;

    /// Counters since start.
    async fn totals(&self) -> Totals;

    /// What the backend's store did since start (commits, their time and
    /// size); `None` for a backend that does not count them.
    async fn storage(&self) -> Option<StorageStats>;

    /// The nodes that share the store, by name, with the shards each holds;
    /// `None` for a backend that runs in one process.
    async fn nodes(&self) -> Option<Vec<NodeStats>> {
        None
    }

    /// The last [`HISTORY_SECONDS`](crate::stats::HISTORY_SECONDS) of every
    /// node's work, a second at a time, oldest first, for a backend that
    /// keeps them itself (several nodes see the same); `None` for one whose
    /// server keeps them.
    async fn history(&self) -> Option<Vec<Second>> {
        None
    }

    /// Whether the backend keeps [`history`](Stats::history) itself: then a
    /// server samples its queues (for their rates) only while a dashboard
    /// reads them, and an idle cluster costs its store no readings.
    fn keeps_history(&self) -> bool {
        false
    }
}
