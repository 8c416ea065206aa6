//! What push delivery counts, as plain counters and one histogram the server
//! exports: deliveries by outcome, and lateness from a task's due time to its
//! request being sent.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

use hourglass_queue::lateness::Lateness;
use hourglass_queue::LatenessMs;

use crate::outcome::OutcomeKind;

/// Counters of one node's deliveries since start. Cheap to update from
/// every delivery (atomics, and the lateness histogram's own lock).
#[derive(Default)]
pub struct PushMetrics {
    outcomes: [AtomicU64; OutcomeKind::ALL.len()],
    claim_errors: AtomicU64,
    settle_errors: AtomicU64,
    in_flight: AtomicU64,
    lateness: Lateness,
}

/// A reading of [`PushMetrics`].
#[derive(Debug, Clone, PartialEq)]
pub struct PushCounts {
    /// Deliveries by outcome, in the order of [`OutcomeKind::ALL`].
    pub outcomes: [(OutcomeKind, u64); OutcomeKind::ALL.len()],
    /// Claims that failed (the loop waits and claims again).
    pub claim_errors: u64,
    /// Outcomes the source could not apply (a lease that ran out, a store
    /// that failed): the task is delivered again when its lease ends.
    pub settle_errors: u64,
    /// Requests in flight now.
    pub in_flight: u64,
    /// From due time to request sent, over every request sent.
    pub lateness: LatenessMs,
}

impl PushCounts {
    /// Deliveries that ended as `kind`.
    pub fn deliveries(&self, kind: OutcomeKind) -> u64 {
        self.outcomes.iter().find(|(k, _)| *k == kind).map_or(0, |(_, n)| *n)
    }
}

impl PushMetrics {
    /// The counts now.
    pub fn read(&self) -> PushCounts {
        PushCounts {
            outcomes: OutcomeKind::ALL.map(|kind| (kind, self.outcomes[index(kind)].load(Relaxed))),
            claim_errors: self.claim_errors.load(Relaxed),
            settle_errors: self.settle_errors.load(Relaxed),
            in_flight: self.in_flight.load(Relaxed),
            lateness: self.lateness.read(),
        }
    }

    pub(crate) fn sent(&self, lateness_us: u64) {
        self.lateness.record(lateness_us);
    }

    pub(crate) fn ended(&self, kind: OutcomeKind) {
        self.outcomes[index(kind)].fetch_add(1, Relaxed);
    }

    pub(crate) fn claim_failed(&self) {
        self.claim_errors.fetch_add(1, Relaxed);
    }

    pub(crate) fn settle_failed(&self) {
        self.settle_errors.fetch_add(1, Relaxed);
    }

    /// Counts a request in flight until the guard is dropped (a delivery
    /// abandoned at a stop's deadline drops it too).
    pub(crate) fn in_flight(self: &Arc<Self>) -> InFlight {
        self.in_flight.fetch_add(1, Relaxed);
        InFlight(self.clone())
    }
}

/// A request in flight, counted until dropped.
pub(crate) struct InFlight(Arc<PushMetrics>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Relaxed);
    }
}

fn index(kind: OutcomeKind) -> usize {
    OutcomeKind::ALL.iter().position(|&k| k == kind).expect("every kind is in ALL")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_by_outcome_and_lateness() {
        let metrics = Arc::new(PushMetrics::default());
        metrics.ended(OutcomeKind::Done);
        metrics.ended(OutcomeKind::Done);
        metrics.ended(OutcomeKind::RetryAfter);
        metrics.sent(2_000);
        let flying = metrics.in_flight();
        let counts = metrics.read();
        assert_eq!(counts.deliveries(OutcomeKind::Done), 2);
        assert_eq!(counts.deliveries(OutcomeKind::RetryAfter), 1);
        assert_eq!(counts.deliveries(OutcomeKind::Dead), 0);
        assert_eq!(counts.in_flight, 1);
        assert_eq!(counts.lateness.samples, 1);
        drop(flying);
        assert_eq!(metrics.read().in_flight, 0);
    }
}
