//! Counters and the lateness histogram.
//!
//! Whatever a worker touches per job lives in that worker's own cache-padded
//! shard, so two workers never bounce a cache line between them; a snapshot
//! sums the shards.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::time::Duration;

use crossbeam_utils::CachePadded;
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
    /// Times the driver thread woke and advanced the wheel. It sleeps until
    /// the next deadline, so this stays still while nothing is due.
    pub driver_wakeups: u64,
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

/// What one thread that runs jobs counts.
struct Shard {
    started: AtomicU64,
    finished: AtomicU64,
    panicked: AtomicU64,
    lateness: Mutex<Histogram<u64>>,
}

fn lateness_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, LATENESS_NS_MAX, LATENESS_SIGNIFICANT_DIGITS)
        .expect("lateness histogram bounds are valid")
}

pub(crate) struct Counters {
    /// Runs handed to the pool, by the driver alone.
    pub(crate) dispatched: AtomicU64,
    pub(crate) skipped: AtomicU64,
    /// Due and left in the wheel for want of room, as of the driver's last turn
    /// (what `wait_until_idle` waits on; `Stats` reads the wheel itself).
    pub(crate) due_backlog: AtomicUsize,
    /// One per worker, then one shared by every other thread that runs jobs
    /// (producers under `CallerRuns`, async jobs' panics).
    shards: Box<[CachePadded<Shard>]>,
}

/// What the scheduler reads under its lock for a snapshot.
pub(crate) struct Locked {
    pub(crate) pending: usize,
    pub(crate) due_backlog: usize,
    pub(crate) cancelled: u64,
}

impl Counters {
    pub(crate) fn new(workers: usize) -> Self {
        let shards = (0..=workers)
            .map(|_| {
                CachePadded::new(Shard {
                    started: AtomicU64::new(0),
                    finished: AtomicU64::new(0),
                    panicked: AtomicU64::new(0),
                    lateness: Mutex::new(lateness_histogram()),
                })
            })
            .collect();
        Counters { dispatched: AtomicU64::new(0), skipped: AtomicU64::new(0), due_backlog: AtomicUsize::new(0), shards }
    }

    /// The shard of threads other than the workers.
    pub(crate) fn shared_shard(&self) -> usize {
        self.shards.len() - 1
    }

    #[inline]
    pub(crate) fn started(&self, shard: usize, lateness_ns: u64) {
        let shard = &self.shards[shard];
        shard.started.fetch_add(1, Relaxed);
        shard.lateness.lock().saturating_record(lateness_ns.clamp(1, LATENESS_NS_MAX));
    }

    /// Counted with release ordering: `wait_until_idle` that sees it also sees
    /// everything the job did.
    #[inline]
    pub(crate) fn finished(&self, shard: usize, panicked: bool) {
        let shard = &self.shards[shard];
        if panicked {
            shard.panicked.fetch_add(1, Relaxed);
        }
        shard.finished.fetch_add(1, std::sync::atomic::Ordering::Release);
    }

    /// A panic counted apart from a run (an async job's, on its runtime).
    #[cfg(feature = "tokio")]
    pub(crate) fn panicked(&self, shard: usize) {
        self.shards[shard].panicked.fetch_add(1, Relaxed);
    }

    fn sum(&self, field: impl Fn(&Shard) -> &AtomicU64, shards: std::ops::Range<usize>) -> u64 {
        self.shards[shards].iter().map(|shard| field(shard).load(std::sync::atomic::Ordering::Acquire)).sum()
    }

    /// Runs started by all threads.
    pub(crate) fn fired(&self) -> u64 {
        self.sum(|s| &s.started, 0..self.shards.len())
    }

    /// Runs handed to the pool that have not finished.
    pub(crate) fn in_flight(&self) -> u64 {
        let finished_by_workers = self.sum(|s| &s.finished, 0..self.shared_shard());
        self.dispatched.load(std::sync::atomic::Ordering::Acquire).saturating_sub(finished_by_workers)
    }

    fn lateness(&self) -> Lateness {
        let mut merged = lateness_histogram();
        for shard in self.shards.iter() {
            merged.add(&*shard.lateness.lock()).expect("lateness histograms share bounds");
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

    pub(crate) fn snapshot(&self, locked: Locked, driver_wakeups: u64) -> Stats {
        let all = 0..self.shards.len();
        let (started, finished) = (self.sum(|s| &s.started, all.clone()), self.sum(|s| &s.finished, all.clone()));
        Stats {
            pending: locked.pending,
            due_backlog: locked.due_backlog,
            in_flight: self.in_flight() as usize,
            running: started.saturating_sub(finished) as usize,
            fired: started,
            cancelled: locked.cancelled,
            panicked: self.sum(|s| &s.panicked, all),
            skipped: self.skipped.load(Relaxed),
            driver_wakeups,
            lateness: self.lateness(),
        }
    }
}
