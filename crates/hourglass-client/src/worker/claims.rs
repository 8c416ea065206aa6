//! The claim loop of one queue: it takes up to its share of the free slots,
//! claims that many tasks (carrying the acks gathered meanwhile), begins a
//! delivery of each, and waits out a server that is away.
//!
//! Deliveries begin on the claim loop's own task, one after another, while
//! they take less than [`INLINE_BUDGET`] between them: handlers that end at
//! once free their slots before the next claim is asked for, so the loop
//! claims again at once with its whole share. What is left of a batch past
//! the budget, and every handler still running after its first poll, gets a
//! task of its own, where handlers run side by side.

use std::sync::Arc;
use std::time::Duration;

use hourglass_wire::ClaimRequest;
use tokio::sync::{watch, OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinSet;
use tokio::time::Instant;

use super::backoff::{retryable, Backoff};
use super::delivery::{begin, deliver};
use super::report::Counts;
use super::Shared;
use crate::error::Error;

/// How long a claim waits for more slots to free up when fewer than half
/// its share are: handlers that end one by one would otherwise make claims
/// of one or two tasks, a request each. A slot left idle this long costs a
/// slow handler nothing to speak of.
const GATHER: Duration = Duration::from_millis(2);
/// How long a batch's handlers may run on the claim loop's task, first
/// polls together, before the rest of the batch is handed to tasks of their
/// own: a handler that computes before it first awaits then delays the next
/// claim by about this much, and no longer keeps its peers from running.
const INLINE_BUDGET: Duration = Duration::from_micros(500);

/// Up to `share` free slots, waiting for the first (and [`GATHER`] more
/// while fewer than half are free).
async fn slots(slots: &Arc<Semaphore>, share: usize) -> Vec<OwnedSemaphorePermit> {
    let first = Arc::clone(slots).acquire_owned().await.expect("the worker's slots are never closed");
    let mut taken = vec![first];
    let mut gathered = false;
    loop {
        while taken.len() < share {
            match Arc::clone(slots).try_acquire_owned() {
                Ok(permit) => taken.push(permit),
                Err(_) => break,
            }
        }
        if gathered || taken.len() * 2 >= share {
            return taken;
        }
        gathered = true;
        tokio::time::sleep(GATHER).await;
    }
}

/// Claims from `queue` until `stopping` turns true, or a claim is refused
/// (its error). Either way, the deliveries it started, still running or
/// done, are in `deliveries`.
pub(crate) async fn claim_loop(
    shared: Arc<Shared>,
    queue: String,
    share: usize,
    mut stopping: watch::Receiver<bool>,
    deliveries: &mut JoinSet<()>,
) -> Result<(), Error> {
    let options = &shared.options;
    let (mut failures, mut quick) = (Backoff::new(options.backoff_max), Backoff::new(options.backoff_max));
    let mut stopped = async move || {
        let _ = stopping.wait_for(|stop| *stop).await;
    };
    // The acks of the handlers that ended on this task, handed over at once
    // when the next claim is about to go, which then carries them.
    let mut ended = Vec::new();
    loop {
        let taken = {
            let _ride = options.acks_on_claims.then(|| shared.acker.ride());
            shared.acker.add_all(std::mem::take(&mut ended));
            tokio::select! {
                taken = slots(&shared.slots, share) => taken,
                () = stopped() => return Ok(()),
            }
        };
        while deliveries.try_join_next().is_some() {}
        let acks = if options.acks_on_claims { shared.acker.take() } else { Vec::new() };
        // A claim that carries acks does not wait: their results would wait
        // with it. If nothing is due, the next claim waits.
        let wait_ms = if acks.is_empty() { options.wait_ms } else { 0 };
        let request = ClaimRequest {
            max: Some(taken.len()),
            lease_ms: Some(options.lease_ms),
            wait_ms: Some(wait_ms),
            acks: (!acks.is_empty()).then(|| acks.clone()),
        };
        let sent = Instant::now();
        let claim = shared.client.claim(&queue, &request);
        let answer = if acks.is_empty() {
            tokio::select! {
                answer = claim => answer,
                () = stopped() => return Ok(()),
            }
        } else {
            // Quick, and its acks' fate must be known: not cut short.
            claim.await
        };
        let claimed = match answer {
            Ok(claimed) => claimed,
            Err(error) if retryable(&error) => {
                shared.acker.give_back(acks);
                Counts::add(&shared.counts.retries, 1);
                let wait = failures.next();
                if failures.failures() == 1 {
                    tracing::warn!("claims from {queue} failed ({error}); trying again in {wait:?}");
                }
                tokio::select! {
                    () = tokio::time::sleep(wait) => continue,
                    () = stopped() => return Ok(()),
                }
            }
            Err(error) => {
                shared.acker.give_back(acks);
                tracing::error!("claims from {queue} refused ({error}): the worker stops");
                return Err(error);
            }
        };
        if failures.failures() > 0 {
            tracing::info!("claims from {queue} go through again, after {} failures", failures.failures());
            failures.reset();
        }
        if let Some(results) = &claimed.acks {
            shared.acker.settle(&acks, results);
        }
        let got = claimed.tasks.len();
        Counts::add(&shared.counts.claimed, got as u64);
        let leased_until = sent + Duration::from_millis(options.lease_ms);
        let began = Instant::now();
        for (task, slot) in claimed.tasks.into_iter().zip(taken) {
            if began.elapsed() >= INLINE_BUDGET {
                deliveries.spawn(deliver(Arc::clone(&shared), task, slot, leased_until));
                continue;
            }
            match begin(&shared, task, slot, leased_until).await {
                Ok(ack) => ended.push(ack),
                Err(rest) => {
                    deliveries.spawn(rest.run());
                }
            }
        }
        // An empty answer before its wait was up (a server that is stopping
        // answers so) is no reason to ask again at once.
        if got > 0 || !acks.is_empty() || (wait_ms > 0 && sent.elapsed() >= Duration::from_millis(wait_ms / 2)) {
            quick.reset();
        } else {
            tokio::select! {
                () = tokio::time::sleep(quick.next()) => {}
                () = stopped() => return Ok(()),
            }
        }
    }
}
