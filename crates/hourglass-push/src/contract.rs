//! The delivery loop's [`Source`] over any backend of the contract: push
//! claims in, acks and nacks out.

use std::sync::Arc;

use hourglass_queue::limits::ACK_BATCH_MAX;
use hourglass_queue::{Claim, Lease, Nack, QueueError, SystemWallClock, Tasks, WallClock};

use crate::limits::CLAIM_WAIT_MS;
use crate::outcome::Outcome;
use crate::source::{Delivery, Source};

/// A [`Source`] over a backend's [`Tasks`]: a claim is the contract's push
/// claim ([`Claim::push`]: every queue, each task leased for its target's
/// timeout and a margin, waiting up to [`CLAIM_WAIT_MS`]); an outcome is an
/// ack, or a nack under the same lease ([`Outcome::as_nack`]). A batch of
/// outcomes is one [`ack_batch`](Tasks::ack_batch) of its acks (on Redis,
/// one script a shard and queue), beside a nack each, all at once. Works for
/// `Arc<dyn Backend>` as for a backend's own type.
///
/// ```no_run
/// # async fn demo(backend: std::sync::Arc<dyn hourglass_queue::Backend>) -> Result<(), reqwest::Error> {
/// use std::sync::Arc;
/// use hourglass_push::{Deliverer, PushClient, TasksSource};
///
/// let running = Deliverer::new(Arc::new(TasksSource::new(backend)), PushClient::builder().build()?).start();
/// # Ok(()) }
/// ```
pub struct TasksSource<B: ?Sized> {
    tasks: Arc<B>,
    clock: Arc<dyn WallClock>,
}

impl<B: Tasks + ?Sized> TasksSource<B> {
    /// Push claims from `tasks`, with the system's clock for `Retry-After`
    /// delays.
    pub fn new(tasks: Arc<B>) -> TasksSource<B> {
        TasksSource { tasks, clock: Arc::new(SystemWallClock) }
    }

    /// The same source on `clock` (a `Retry-After`'s time becomes a delay
    /// from its reading).
    pub fn with_clock(self, clock: Arc<dyn WallClock>) -> TasksSource<B> {
        TasksSource { clock, ..self }
    }
}

impl<B: Tasks + ?Sized> Source for TasksSource<B> {
    type Ticket = (u64, Lease);
    type Error = QueueError;

    async fn claim(&self, max: usize) -> Result<Vec<Delivery<(u64, Lease)>>, QueueError> {
        let claimed = self.tasks.claim_from(Claim::push(max, CLAIM_WAIT_MS)?).await?;
        let mut deliveries = Vec::with_capacity(claimed.len());
        for task in claimed {
            let Some(target) = task.target else {
                // A push claim resolves every target; one without is the
                // backend's bug, and the task goes back rather than stays
                // leased for nothing.
                debug_assert!(false, "a push claim handed out task {} without a target", task.id);
                let _ = self.tasks.nack(task.id, task.lease, Nack::default().because("no push target")).await;
                continue;
            };
            deliveries.push(Delivery {
                task_id: task.id,
                queue: task.queue,
                attempt: task.attempt,
                due_at_ms: task.run_at_ms,
                payload: task.payload,
                target,
                ticket: (task.id, task.lease),
            });
        }
        Ok(deliveries)
    }

    async fn settle(&self, (id, lease): (u64, Lease), outcome: Outcome) -> Result<(), QueueError> {
        match outcome.as_nack(self.clock.now_ms()) {
            None => self.tasks.ack(id, lease).await,
            Some(nack) => self.tasks.nack(id, lease, nack).await.map(drop),
        }
    }

    async fn settle_batch(&self, batch: Vec<((u64, Lease), Outcome)>) -> Vec<Result<(), QueueError>> {
        let now_ms = self.clock.now_ms();
        let mut results: Vec<Result<(), QueueError>> = Vec::with_capacity(batch.len());
        let (mut acks, mut acked_at, mut nacks) = (Vec::new(), Vec::new(), Vec::new());
        for (at, ((id, lease), outcome)) in batch.into_iter().enumerate() {
            results.push(Ok(()));
            match outcome.as_nack(now_ms) {
                None => {
                    acks.push((id, lease));
                    acked_at.push(at);
                }
                Some(nack) => nacks.push((at, id, lease, nack)),
            }
        }
        let acking = futures_util::future::join_all(acks.chunks(ACK_BATCH_MAX).map(|chunk| async move {
            match self.tasks.ack_batch(chunk).await {
                Ok(answers) => answers,
                // The batch as a whole failed: so did each of its acks.
                Err(error) => vec![Err(error); chunk.len()],
            }
        }));
        let nacking = futures_util::future::join_all(
            nacks.into_iter().map(|(at, id, lease, nack)| async move { (at, self.tasks.nack(id, lease, nack).await) }),
        );
        let (acked, nacked) = futures_util::future::join(acking, nacking).await;
        for (at, answer) in acked_at.into_iter().zip(acked.into_iter().flatten()) {
            results[at] = answer;
        }
        for (at, answer) in nacked {
            results[at] = answer.map(drop);
        }
        results
    }
}
