//! A backend that several nodes share, as the server sees one: the embedded
//! engine, answering its nodes and its counters' freshness as the Redis
//! backend does ([`Stats::nodes`], [`Totals::counters_as_of_ms`]) with what
//! the test gives it, and counting how often its nodes are read.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use async_trait::async_trait;
use hourglass_embedded::Engine;
use hourglass_queue::prelude::*;
use hourglass_queue::{
    Claim, Claimed, Enqueued, Lease, ListRequest, Nack, NewTask, NodeStats, Page, Pause, QueueError, QueueSettings,
    QueueStats, RunAt, StorageStats, TaskInfo, Totals,
};

/// The engine, and what it says of the nodes.
pub struct SeveralNodes {
    engine: Arc<Engine>,
    nodes: Vec<NodeStats>,
    counters_as_of_ms: u64,
    readings: AtomicUsize,
}

impl SeveralNodes {
    /// `engine`, whose `nodes()` answers `nodes` and whose counters are all
    /// in as of `counters_as_of_ms`.
    pub fn new(engine: Arc<Engine>, nodes: Vec<NodeStats>, counters_as_of_ms: u64) -> Arc<SeveralNodes> {
        Arc::new(SeveralNodes { engine, nodes, counters_as_of_ms, readings: AtomicUsize::new(0) })
    }

    /// How many times the nodes were read.
    pub fn readings(&self) -> usize {
        self.readings.load(Ordering::SeqCst)
    }
}

/// A node named `name` holding `shards`, its latest heartbeat at
/// `heartbeat_ms`.
pub fn node(name: &str, this: bool, heartbeat_ms: u64, shards: &[u16]) -> NodeStats {
    NodeStats { name: name.into(), this, heartbeat_ms, shards: shards.to_vec() }
}

#[async_trait]
impl Stats for SeveralNodes {
    async fn queues(&self) -> Vec<QueueStats> {
        self.engine.queues().await
    }

    async fn queue(&self, name: &str) -> Option<QueueStats> {
        self.engine.queue(name).await
    }

    async fn totals(&self) -> Totals {
        Totals { counters_as_of_ms: Some(self.counters_as_of_ms), ..self.engine.totals().await }
    }

    async fn storage(&self) -> Option<StorageStats> {
        self.engine.storage().await
    }

    async fn nodes(&self) -> Option<Vec<NodeStats>> {
        self.readings.fetch_add(1, Ordering::SeqCst);
        Some(self.nodes.clone())
    }
}

#[async_trait]
impl Tasks for SeveralNodes {
    async fn enqueue_batch(&self, queue: &str, batch: Vec<NewTask>) -> Result<Vec<Enqueued>, QueueError> {
        self.engine.enqueue_batch(queue, batch).await
    }

    async fn get(&self, id: u64) -> Result<TaskInfo, QueueError> {
        self.engine.get(id).await
    }

    async fn find_by_key(&self, queue: &str, key: &str) -> Result<Option<TaskInfo>, QueueError> {
        self.engine.find_by_key(queue, key).await
    }

    async fn cancel(&self, id: u64) -> Result<(), QueueError> {
        self.engine.cancel(id).await
    }

    async fn cancel_unleased(&self, id: u64) -> Result<(), QueueError> {
        self.engine.cancel_unleased(id).await
    }

    async fn reschedule(&self, id: u64, run_at: RunAt) -> Result<TaskInfo, QueueError> {
        self.engine.reschedule(id, run_at).await
    }

    async fn retry(&self, id: u64) -> Result<TaskInfo, QueueError> {
        self.engine.retry(id).await
    }

    async fn claim_from(&self, claim: Claim<'_>) -> Result<Vec<Claimed>, QueueError> {
        self.engine.claim_from(claim).await
    }

    async fn take(&self, id: u64, lease_ms: u64) -> Result<Claimed, QueueError> {
        self.engine.take(id, lease_ms).await
    }

    async fn ack(&self, id: u64, lease: Lease) -> Result<(), QueueError> {
        self.engine.ack(id, lease).await
    }

    async fn ack_batch(&self, acks: &[(u64, Lease)]) -> Result<Vec<Result<(), QueueError>>, QueueError> {
        self.engine.ack_batch(acks).await
    }

    async fn nack(&self, id: u64, lease: Lease, nack: Nack) -> Result<TaskInfo, QueueError> {
        self.engine.nack(id, lease, nack).await
    }

    async fn extend(&self, id: u64, lease: Lease, lease_ms: u64) -> Result<u64, QueueError> {
        self.engine.extend(id, lease, lease_ms).await
    }

    async fn list(&self, queue: &str, request: ListRequest) -> Result<Page, QueueError> {
        self.engine.list(queue, request).await
    }
}

#[async_trait]
impl QueueAdmin for SeveralNodes {
    async fn pause_queue(&self, queue: &str, pause: Pause) -> Result<QueueStats, QueueError> {
        self.engine.pause_queue(queue, pause).await
    }

    async fn delete_dead(&self, queue: &str, max: usize) -> Result<Vec<u64>, QueueError> {
        self.engine.delete_dead(queue, max).await
    }

    async fn settings(&self, queue: &str) -> Result<QueueSettings, QueueError> {
        self.engine.settings(queue).await
    }

    async fn put_settings(&self, queue: &str, settings: QueueSettings) -> Result<QueueSettings, QueueError> {
        self.engine.put_settings(queue, settings).await
    }
}

impl Backend for SeveralNodes {
    fn as_schedules(&self) -> Option<&dyn Schedules> {
        self.engine.as_schedules()
    }

    fn store_unavailable(&self) -> Option<String> {
        self.engine.store_unavailable()
    }

    fn close(&self) {
        self.engine.close();
    }
}
