//! Counters and the lateness histogram.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::time::Duration;

use hdrhistogram::Histogram;
use parking_lot::Mutex;

/// The longest lateness recorded exactly; longer ones are recorded as this.
const LATENESS_NS_MAX: u64 = 3_600 * 1_000_000_000;
/// Significant decimal digits kept by the lateness histogram (0.1 % error).
const LATENESS_SIGNIFICANT_DIGITS: u8 = 3;

/// A snapshot of what a scheduler is doing and has done.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct Stats {
    /// Jobs in the wheel: not yet due, or due and waiting for a worker.
    pub pending: usize,
    /// Of `pending`, the jobs already due and waiting for room in the pool.
    pub due_backlog: usize,
    /// Jobs handed to the pool and not finished (queued or running).
    pub in_flight: usize,
    /// Jobs running right now.
    pub running: usize,
    /// Runs started (a repeating job counts once per run).
    pub fired: u64,
    /// Jobs cancelled before they ran.
    pub cancelled: u64,
    /// Runs that panicked (the worker lived on).
    pub panicked: u64,
    /// Occurrences of repeating jobs skipped, see [`MissedRuns`](crate::MissedRuns).
    pub skipped: u64,
    /// How long after its due time each run started.
    pub lateness: Lateness,
}

/// Percentiles of how late runs started, measured from the exact due time
/// asked for (not the tick it was rounded up to) to the start of the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Lateness {
    /// Runs measured.
    pub samples: u64,
    /// Median.
    pub p50: Duration,
    /// 99th percentile.
    pub p99: Duration,
    /// The latest.
    pub max: Duration,
}

#[derive(Default)]
pub(crate) struct Counters {
    pub(crate) fired: AtomicU64,
    pub(crate) cancelled: AtomicU64,
    pub(crate) panicked: AtomicU64,
    pub(crate) skipped: AtomicU64,
    pub(crate) running: AtomicUsize,
    /// Dispatched to the pool and not finished.
    pub(crate) in_flight: AtomicUsize,
    /// Due and left in the wheel for want of room, as of the driver's last turn
    /// (what `wait_until_idle` waits on; `Stats` reads the wheel itself).
    pub(crate) due_backlog: AtomicUsize,
}

/// One lateness histogram per recording thread, so workers never contend.
pub(crate) struct LatenessRecorder {
    shards: Box<[Mutex<Histogram<u64>>]>,
}

impl LatenessRecorder {
    pub(crate) fn new(shards: usize) -> Self {
        let shards = (0..shards.max(1))
            .map(|_| {
                let histogram = Histogram::new_with_bounds(1, LATENESS_NS_MAX, LATENESS_SIGNIFICANT_DIGITS)
                    .expect("lateness histogram bounds are valid");
                Mutex::new(histogram)
            })
            .collect();
        LatenessRecorder { shards }
    }

    #[inline]
    pub(crate) fn record(&self, shard: usize, lateness_ns: u64) {
        let mut histogram = self.shards[shard % self.shards.len()].lock();
        histogram.saturating_record(lateness_ns.clamp(1, LATENESS_NS_MAX));
    }

    pub(crate) fn snapshot(&self) -> Lateness {
        let mut merged = Histogram::<u64>::new_with_bounds(1, LATENESS_NS_MAX, LATENESS_SIGNIFICANT_DIGITS)
            .expect("lateness histogram bounds are valid");
        for shard in self.shards.iter() {
            merged.add(&*shard.lock()).expect("lateness histograms share bounds");
        }
        if merged.is_empty() {
            return Lateness::default();
        }
        Lateness {
            samples: merged.len(),
            p50: Duration::from_nanos(merged.value_at_quantile(0.50)),
            p99: Duration::from_nanos(merged.value_at_quantile(0.99)),
            max: Duration::from_nanos(merged.max()),
        }
    }
}

impl Counters {
    pub(crate) fn snapshot(&self, pending: usize, due_backlog: usize, lateness: Lateness) -> Stats {
        Stats {
            pending,
            due_backlog,
            in_flight: self.in_flight.load(Relaxed),
            running: self.running.load(Relaxed),
            fired: self.fired.load(Relaxed),
            cancelled: self.cancelled.load(Relaxed),
            panicked: self.panicked.load(Relaxed),
            skipped: self.skipped.load(Relaxed),
            lateness,
        }
    }
}
