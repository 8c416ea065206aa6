//! The delivery loop's settles: outcomes that end close together are
//! applied with one [`Source::settle_batch`], as soon as the previous settle
//! has returned (natural group commit).
//!
//! One task of the loop's own takes every outcome waiting, up to
//! [`SETTLE_BATCH_MAX`], settles them together, answers each delivery, and
//! takes what waits again. An outcome that finds no settle under way is
//! applied at once, alone: nothing is held back to wait for company. While a
//! settle is under way, the outcomes that end meanwhile wait for it to
//! return, then go together: the busier the loop, the larger the batches,
//! and the fewer requests (on Redis, one ack script a shard and queue; one
//! fsync under `appendfsync always`) per task.
//!
//! A delivery keeps its slot until its outcome is applied, as before: the
//! loop never holds more tasks than its concurrency, settled or not.

use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::limits::SETTLE_BATCH_MAX;
use crate::outcome::Outcome;
use crate::source::Source;

/// An outcome waiting to be applied, and where its answer goes.
struct Pending<S: Source> {
    ticket: S::Ticket,
    outcome: Outcome,
    answer: oneshot::Sender<Result<(), S::Error>>,
}

/// What deliveries hand their outcomes to; cloned into each. The settling
/// task ends once every clone is dropped and what they sent is applied.
pub(crate) struct Settles<S: Source> {
    pending: mpsc::UnboundedSender<Pending<S>>,
}

impl<S: Source> Clone for Settles<S> {
    fn clone(&self) -> Self {
        Settles { pending: self.pending.clone() }
    }
}

/// Why an outcome was not applied.
pub(crate) enum NotSettled<E> {
    /// The source failed it.
    Failed(E),
    /// The settling task ended first (the loop was stopped past its deadline).
    Gone,
}

/// The settling task.
pub(crate) struct Settler(JoinHandle<()>);

/// Starts the settling task over `source` on the current runtime.
pub(crate) fn start<S: Source>(source: std::sync::Arc<S>) -> (Settles<S>, Settler) {
    let (pending, waiting) = mpsc::unbounded_channel();
    (Settles { pending }, Settler(tokio::spawn(settle_all(source, waiting))))
}

impl<S: Source> Settles<S> {
    /// Applies `outcome` to the delivery of `ticket`, with whatever other
    /// outcomes wait at the time.
    pub(crate) async fn settle(&self, ticket: S::Ticket, outcome: Outcome) -> Result<(), NotSettled<S::Error>> {
        let (answer, answered) = oneshot::channel();
        self.pending.send(Pending { ticket, outcome, answer }).map_err(|_| NotSettled::Gone)?;
        match answered.await {
            Ok(result) => result.map_err(NotSettled::Failed),
            Err(_) => Err(NotSettled::Gone),
        }
    }
}

impl Settler {
    /// Waits until every outcome sent is applied (once every [`Settles`] is
    /// dropped), or until `deadline`: then what is left is abandoned, and
    /// its tasks come back when their leases end.
    pub(crate) async fn finish(self, deadline: Instant) {
        let mut handle = self.0;
        if tokio::time::timeout_at(deadline, &mut handle).await.is_err() {
            handle.abort();
            let _ = handle.await;
        }
    }
}

/// Takes every outcome waiting (at least one), settles them together,
/// answers each, and again, until no sender is left.
async fn settle_all<S: Source>(source: std::sync::Arc<S>, mut waiting: mpsc::UnboundedReceiver<Pending<S>>) {
    let mut taken = Vec::new();
    while waiting.recv_many(&mut taken, SETTLE_BATCH_MAX).await > 0 {
        let mut batch = Vec::with_capacity(taken.len());
        let mut answers = Vec::with_capacity(taken.len());
        for Pending { ticket, outcome, answer } in taken.drain(..) {
            batch.push((ticket, outcome));
            answers.push(answer);
        }
        let results = source.settle_batch(batch).await;
        debug_assert_eq!(results.len(), answers.len(), "a source answers each outcome of a batch");
        // A delivery no longer waiting (abandoned at a stop) needs no answer.
        for (answer, result) in answers.into_iter().zip(results) {
            let _ = answer.send(result);
        }
    }
}
