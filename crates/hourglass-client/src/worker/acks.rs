//! The one path a worker's acks take to the server.
//!
//! A handler that succeeds hands its delivery to the [`Acker`]. A claim loop
//! about to send a claim (it waits for free slots, which a handler that ends
//! frees at once) says so with [`Acker::ride`]; it then [takes](Acker::take)
//! the acks gathered, sends them in its claim (`"acks"`, answered beside the
//! tasks), and [settles](Acker::settle) them with the answer, or gives them
//! [back](Acker::give_back) if the claim failed. The acker's own loop sends
//! `POST /v1/acks` only while no claim is about to go: when every claim
//! waits on the server (nothing due), or the worker is stopping. Batches
//! grow with the load, and an ack never waits for a timer.

use std::sync::{Arc, Mutex, PoisonError};

use hourglass_wire::{Ack, AckResult, Acks};
use tokio::sync::{watch, Notify};

use super::backoff::{retryable, Backoff};
use super::options::ACKS_PER_REQUEST_MAX;
use super::report::Counts;
use crate::client::Client;

/// Gathers the acks of the handlers that succeeded, and sends them.
#[derive(Debug)]
pub(crate) struct Acker {
    client: Client,
    counts: Arc<Counts>,
    state: Mutex<State>,
    wake: Notify,
    backoff_max: std::time::Duration,
}

#[derive(Debug, Default)]
struct State {
    pending: Vec<Ack>,
    /// Claim loops about to send a claim, which will carry the acks.
    riders: usize,
    /// The acks the acker's own loop has on their way.
    sending: Vec<Ack>,
}

impl State {
    /// Up to a request's worth of the pending acks, oldest first.
    fn batch(&mut self) -> Vec<Ack> {
        let end = self.pending.len().min(ACKS_PER_REQUEST_MAX);
        self.pending.drain(..end).collect()
    }
}

/// A claim loop about to send a claim: while one is held, the acker leaves
/// the acks to it.
pub(crate) struct Ride<'a>(&'a Acker);

impl Drop for Ride<'_> {
    fn drop(&mut self) {
        let none_left = {
            let mut state = self.0.lock();
            state.riders -= 1;
            state.riders == 0
        };
        if none_left {
            self.0.wake.notify_one();
        }
    }
}

impl Acker {
    pub(crate) fn new(client: Client, counts: Arc<Counts>, backoff_max: std::time::Duration) -> Acker {
        Acker { client, counts, state: Mutex::default(), wake: Notify::new(), backoff_max }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Task `id`'s handler succeeded with the delivery `lease`: ack it.
    pub(crate) fn add(&self, ack: Ack) {
        self.lock().pending.push(ack);
        self.wake.notify_one();
    }

    /// Several handlers succeeded: ack them, with one wake-up.
    pub(crate) fn add_all(&self, acks: Vec<Ack>) {
        if !acks.is_empty() {
            self.lock().pending.extend(acks);
            self.wake.notify_one();
        }
    }

    /// A claim is about to go, and will take the acks.
    pub(crate) fn ride(&self) -> Ride<'_> {
        self.lock().riders += 1;
        Ride(self)
    }

    /// Up to a request's worth of acks, oldest first, now on their way.
    pub(crate) fn take(&self) -> Vec<Ack> {
        self.lock().batch()
    }

    /// A request that carried `acks` failed: they go first in the next.
    pub(crate) fn give_back(&self, acks: Vec<Ack>) {
        if !acks.is_empty() {
            self.lock().pending.splice(0..0, acks);
            self.wake.notify_one();
        }
    }

    /// The server's answer to `acks`: one result each, in order.
    pub(crate) fn settle(&self, acks: &[Ack], results: &[AckResult]) {
        let matched = results.len() == acks.len() && acks.iter().zip(results).all(|(ack, r)| ack.id == r.id());
        if !matched {
            self.lose(acks.len(), &format!("{} acks were answered with {} other results", acks.len(), results.len()));
            return;
        }
        let acked = results.iter().filter(|r| matches!(r, AckResult::Acked(_))).count();
        Counts::add(&self.counts.acked, acked as u64);
        for result in results {
            if let AckResult::Failed { error, id } = result {
                self.lose(1, &format!("task {id}: {}: {}", error.code, error.message));
            }
        }
    }

    /// `n` acks that will not be: the server delivers their tasks again.
    fn lose(&self, n: usize, why: &str) {
        if n > 0 {
            Counts::add(&self.counts.lost_leases, n as u64);
            tracing::warn!("{n} tasks not acked ({why}); the server delivers them again");
        }
    }

    /// Sends the acks no claim takes, until `stopping` turns true; then sends
    /// every one left and returns. If it is dropped before it is done (the
    /// shutdown deadline), [`Acker::abandon`] counts what it had not sent.
    pub(crate) async fn run(self: Arc<Acker>, mut stopping: watch::Receiver<bool>) {
        let mut backoff = Backoff::new(self.backoff_max);
        loop {
            let stop = *stopping.borrow();
            let acks = {
                let mut state = self.lock();
                if state.pending.is_empty() && stop {
                    return;
                }
                if state.riders > 0 && !stop {
                    Vec::new()
                } else {
                    let acks = state.batch();
                    state.sending.clone_from(&acks);
                    acks
                }
            };
            if acks.is_empty() {
                tokio::select! {
                    () = self.wake.notified() => {}
                    _ = stopping.changed(), if !stop => {}
                }
                continue;
            }
            let answer = self.client.ack_batch(&Acks { acks }).await;
            let acks = std::mem::take(&mut self.lock().sending);
            match answer {
                Ok(answer) => {
                    backoff.reset();
                    self.settle(&acks, &answer.results);
                }
                Err(error) if retryable(&error) => {
                    Counts::add(&self.counts.retries, 1);
                    tracing::debug!("{} acks failed ({error}); trying again", acks.len());
                    self.give_back(acks);
                    tokio::time::sleep(backoff.next()).await;
                }
                Err(error) => self.lose(acks.len(), &error.to_string()),
            }
        }
    }

    /// The acks not sent by the shutdown deadline: lost.
    pub(crate) fn abandon(&self) {
        let n = {
            let mut state = self.lock();
            let n = state.pending.len() + state.sending.len();
            state.pending.clear();
            state.sending.clear();
            n
        };
        self.lose(n, "not sent before the shutdown deadline");
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::Ordering;
    use std::time::Duration;

    use hourglass_wire::Lease;

    use super::*;

    #[tokio::test]
    async fn acks_ride_on_a_claim_about_to_go_and_go_alone_otherwise() {
        // Nothing listens there: a request of the acker's own fails, and is
        // counted as a retry.
        let client = Client::new("http://127.0.0.1:9", None);
        let counts = Arc::new(Counts::default());
        let acker = Arc::new(Acker::new(client, Arc::clone(&counts), Duration::from_millis(10)));
        let (stop, stopping) = watch::channel(false);
        let running = tokio::spawn(Arc::clone(&acker).run(stopping));

        let ride = acker.ride();
        acker.add(Ack::new(1, Lease(1)));
        for _ in 0..20 {
            tokio::task::yield_now().await;
        }
        assert_eq!(counts.retries.load(Ordering::Relaxed), 0, "a claim about to go takes the acks");
        assert_eq!(acker.take(), [Ack::new(1, Lease(1))]);
        drop(ride);

        acker.add(Ack::new(2, Lease(2)));
        tokio::time::timeout(Duration::from_secs(30), async {
            while counts.retries.load(Ordering::Relaxed) == 0 {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
        .await
        .expect("with no claim about to go, the acker sends them itself");
        let _ = stop.send(true);
        running.abort();
        let _ = running.await;
        acker.abandon();
        assert_eq!(counts.lost_leases.load(Ordering::Relaxed), 1, "the one it could not send");
    }
}
