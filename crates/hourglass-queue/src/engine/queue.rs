//! One queue's indexes: its due tasks in claim order, its keys, its dead
//! tasks, its counts, and the wake-up of claims waiting on it.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use hdrhistogram::Histogram;
use tokio::sync::Notify;

use crate::stats::{LatenessMs, QueueStats};

/// Longest lateness the per-queue histograms record exactly: a day.
pub(crate) const LATENESS_US_MAX: u64 = 86_400_000_000;

pub(crate) struct QueueState {
    pub(crate) name: Arc<str>,
    /// Due tasks, by (due time, id): claims take the oldest due first.
    pub(crate) ready: BTreeSet<(u64, u64)>,
    /// Idempotency key to the live task that has it.
    pub(crate) keys: HashMap<Box<str>, u64>,
    pub(crate) dead: BTreeSet<u64>,
    /// Filed scheduled tasks, due ones included.
    pub(crate) scheduled: usize,
    pub(crate) leased: usize,
    pub(crate) notify: Arc<Notify>,
    /// Allocated on the first claim.
    lateness_us: Option<Box<Histogram<u32>>>,
}

impl QueueState {
    pub(crate) fn new(name: Arc<str>) -> QueueState {
        QueueState {
            name,
            ready: BTreeSet::new(),
            keys: HashMap::new(),
            dead: BTreeSet::new(),
            scheduled: 0,
            leased: 0,
            notify: Arc::new(Notify::new()),
            lateness_us: None,
        }
    }

    /// Records one delivery's lateness.
    pub(crate) fn delivered(&mut self, lateness_us: u64) {
        self.lateness_us
            .get_or_insert_with(|| {
                Box::new(Histogram::new_with_bounds(1, LATENESS_US_MAX, 2).expect("valid histogram bounds"))
            })
            .saturating_record(lateness_us.clamp(1, LATENESS_US_MAX));
    }

    pub(crate) fn stats(&self) -> QueueStats {
        let lateness = self.lateness_us.as_ref().filter(|h| !h.is_empty()).map_or(LatenessMs::default(), |h| {
            let ms = |us: u64| us as f64 / 1_000.0;
            LatenessMs {
                samples: h.len(),
                p50: ms(h.value_at_quantile(0.5)),
                p99: ms(h.value_at_quantile(0.99)),
                max: ms(h.max()),
            }
        });
        QueueStats {
            name: self.name.clone(),
            scheduled: self.scheduled - self.ready.len(),
            due: self.ready.len(),
            leased: self.leased,
            dead: self.dead.len(),
            oldest_due_ms: self.ready.first().map(|&(run_at_ms, _)| run_at_ms),
            lateness,
        }
    }
}
