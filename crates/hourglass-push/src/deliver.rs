//! The delivery loop: claim as many push tasks as there are free slots,
//! send each, settle its outcome, and stop gracefully.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{watch, OwnedSemaphorePermit, Semaphore};
use tokio::task::{JoinHandle, JoinSet};
use tokio::time::Instant;

use crate::client::PushClient;
use crate::limits::{CLAIM_BATCH_MAX, CLAIM_RETRY_MS, CONCURRENCY_MAX};
use crate::metrics::PushMetrics;
use crate::settle::{self, NotSettled, Settles};
use crate::source::{Delivery, Source};

/// One node's delivery loop over a [`Source`].
///
/// # Implementation
/// A semaphore of `concurrency` permits bounds the requests in flight on
/// this node. The loop waits for a free permit, then claims as many tasks
/// as there are free permits (at most [`CLAIM_BATCH_MAX`]), each leased for
/// its target's timeout and a margin, and spawns one delivery per
/// task holding one permit: build and sign the request, send it, classify
/// the answer, settle the outcome with the source, release the permit. Only
/// the loop takes permits, so a claim never gets more tasks than there are
/// slots. Outcomes are settled by one task of the loop's own (`settle.rs`):
/// each outcome at once when no settle is under way, and those that end
/// while one is, together with [`Source::settle_batch`] as soon as it
/// returns. A failed claim is counted and tried again after
/// [`CLAIM_RETRY_MS`]; a failed settle is counted, and the task goes back
/// to the queue when its lease ends.
///
/// Stopping ([`Running::stop`]) stops claiming at once (a claim waiting
/// for tasks is dropped), then waits for the deliveries in flight up to a
/// deadline; those still running then are abandoned, and their tasks are
/// delivered again when their leases end: at least once. Outcomes handed
/// to the settling task are applied before the stop returns, within the
/// same deadline.
///
/// ```no_run
/// # async fn demo<S: hourglass_push::Source>(source: S) -> Result<(), reqwest::Error> {
/// use std::sync::Arc;
/// use std::time::Duration;
/// use hourglass_push::{Deliverer, PushClient};
///
/// let deliverer = Deliverer::new(Arc::new(source), PushClient::builder().build()?).concurrency(64);
/// let metrics = deliverer.metrics();
/// let running = deliverer.start();
/// // ... on shutdown:
/// let report = running.stop(Duration::from_secs(30)).await;
/// println!("{} abandoned, {:?}", report.abandoned, metrics.read());
/// # Ok(()) }
/// ```
pub struct Deliverer<S: Source> {
    source: Arc<S>,
    client: Arc<PushClient>,
    metrics: Arc<PushMetrics>,
    concurrency: usize,
}

/// A loop started by [`Deliverer::start`].
pub struct Running {
    stop: watch::Sender<Option<Instant>>,
    handle: JoinHandle<StopReport>,
}

/// How a loop ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StopReport {
    /// Deliveries that finished after the stop was asked for.
    pub drained: usize,
    /// Deliveries still in flight at the deadline, abandoned to their leases.
    pub abandoned: usize,
}

impl<S: Source> Deliverer<S> {
    /// A loop over `source` sending with `client`, with
    /// [`CONCURRENCY_DEFAULT`](crate::limits::CONCURRENCY_DEFAULT) requests in
    /// flight at most.
    pub fn new(source: Arc<S>, client: PushClient) -> Deliverer<S> {
        Deliverer {
            source,
            client: Arc::new(client),
            metrics: Arc::default(),
            concurrency: crate::limits::CONCURRENCY_DEFAULT,
        }
    }

    /// At most `concurrency` requests in flight on this node (1 to
    /// [`CONCURRENCY_MAX`]; values outside are brought within).
    pub fn concurrency(mut self, concurrency: usize) -> Deliverer<S> {
        self.concurrency = concurrency.clamp(1, CONCURRENCY_MAX);
        self
    }

    /// The counters this loop updates, for the server to export.
    pub fn metrics(&self) -> Arc<PushMetrics> {
        self.metrics.clone()
    }

    /// Starts the loop on the current tokio runtime.
    pub fn start(self) -> Running {
        let (stop, stopped) = watch::channel(None);
        let handle = tokio::spawn(self.run(stopped));
        Running { stop, handle }
    }

    async fn run(self, mut stopped: watch::Receiver<Option<Instant>>) -> StopReport {
        let slots = Arc::new(Semaphore::new(self.concurrency));
        let (settles, settler) = settle::start(self.source.clone());
        let mut deliveries = JoinSet::new();
        let deadline = loop {
            while deliveries.try_join_next().is_some() {}
            let first = tokio::select! {
                permit = slots.clone().acquire_owned() => permit.expect("the loop never closes its semaphore"),
                deadline = stop_asked(&mut stopped) => break deadline,
            };
            let max = (1 + slots.available_permits()).min(CLAIM_BATCH_MAX);
            // A claim that has answered is taken before a stop: its tasks
            // are leased to this node, and are better delivered than left.
            let claimed = tokio::select! {
                biased;
                claimed = self.source.claim(max) => claimed,
                deadline = stop_asked(&mut stopped) => break deadline,
            };
            match claimed {
                Ok(batch) => self.spawn_all(batch, first, &slots, &settles, &mut deliveries).await,
                Err(error) => {
                    self.metrics.claim_failed();
                    tracing::warn!(error = %error, "push: claim failed; claiming again in {CLAIM_RETRY_MS} ms");
                    drop(first);
                    tokio::select! {
                        () = tokio::time::sleep(Duration::from_millis(CLAIM_RETRY_MS)) => {}
                        deadline = stop_asked(&mut stopped) => break deadline,
                    }
                }
            }
        };
        let report = drain(deliveries, deadline).await;
        // Every delivery has ended, and with it its handle on the settles.
        drop(settles);
        settler.finish(deadline).await;
        report
    }

    /// Spawns one delivery per task, each holding a slot: `first`, then free
    /// ones (there are as many as the claim asked for, since only the loop
    /// takes them; a source that hands out more is waited for).
    async fn spawn_all(
        &self,
        batch: Vec<Delivery<S::Ticket>>,
        first: OwnedSemaphorePermit,
        slots: &Arc<Semaphore>,
        settles: &Settles<S>,
        deliveries: &mut JoinSet<()>,
    ) {
        let mut first = Some(first);
        for delivery in batch {
            let slot = match first.take() {
                Some(slot) => slot,
                None => slots.clone().acquire_owned().await.expect("the loop never closes its semaphore"),
            };
            let (settles, client, metrics) = (settles.clone(), self.client.clone(), self.metrics.clone());
            deliveries.spawn(deliver(settles, client, metrics, delivery, slot));
        }
    }
}

/// One delivery: send, count, settle; its slot is freed when it returns.
async fn deliver<S: Source>(
    settles: Settles<S>,
    client: Arc<PushClient>,
    metrics: Arc<PushMetrics>,
    delivery: Delivery<S::Ticket>,
    _slot: OwnedSemaphorePermit,
) {
    let _in_flight = metrics.in_flight();
    let sent = client.send(&delivery).await;
    if let Some(sent_at_us) = sent.sent_at_us {
        metrics.sent(sent_at_us.saturating_sub(delivery.due_at_ms.saturating_mul(1_000)));
    }
    metrics.ended(sent.outcome.kind());
    let (task_id, queue) = (delivery.task_id, delivery.queue);
    match settles.settle(delivery.ticket, sent.outcome).await {
        Ok(()) => {}
        Err(NotSettled::Failed(error)) => {
            metrics.settle_failed();
            tracing::warn!(task = task_id, queue = %queue, error = %error, "push: the outcome was not applied; the task is delivered again when its lease ends");
        }
        Err(NotSettled::Gone) => {
            metrics.settle_failed();
            tracing::warn!(task = task_id, queue = %queue, "push: stopped before the outcome was applied; the task is delivered again when its lease ends");
        }
    }
}

/// Waits until a stop is asked for, and returns its deadline. A dropped
/// [`Running`] is a stop with no grace.
async fn stop_asked(stopped: &mut watch::Receiver<Option<Instant>>) -> Instant {
    match stopped.wait_for(Option::is_some).await {
        Ok(deadline) => deadline.expect("waited for a deadline"),
        // The `Running` was dropped without a stop: stop now.
        Err(_) => Instant::now(),
    }
}

/// Waits for the deliveries in flight until `deadline`, then abandons the rest.
async fn drain(mut deliveries: JoinSet<()>, deadline: Instant) -> StopReport {
    while deliveries.try_join_next().is_some() {}
    let mut drained = 0;
    while let Ok(Some(_)) = tokio::time::timeout_at(deadline, deliveries.join_next()).await {
        drained += 1;
    }
    let abandoned = deliveries.len();
    // Aborted tasks end at once; waiting for them lets go of what they hold
    // (the source, a backend) before the stop returns.
    deliveries.abort_all();
    while deliveries.join_next().await.is_some() {}
    StopReport { drained, abandoned }
}

impl Running {
    /// Stops claiming, waits for the deliveries in flight until `grace` has
    /// passed, abandons the rest, and says how it ended.
    pub async fn stop(self, grace: Duration) -> StopReport {
        // The loop may have ended already, if it panicked; then nothing is sent.
        let _ = self.stop.send(Some(Instant::now() + grace));
        self.handle.await.expect("the delivery loop does not panic")
    }

    /// Whether the loop has ended.
    pub fn is_finished(&self) -> bool {
        self.handle.is_finished()
    }
}
