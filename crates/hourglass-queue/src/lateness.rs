//! A queue's lateness since start, from due time to delivery: an HDR
//! histogram every backend records its claims in.

use std::sync::Arc;

use hdrhistogram::Histogram;
use parking_lot::Mutex;

use crate::stats::{LatenessMs, QueueStats, LATENESS_BUCKETS_US};

/// Longest lateness the per-queue histograms record exactly: a day.
pub const LATENESS_US_MAX: u64 = 86_400_000_000;

/// A queue's lateness histogram, allocated on its first claim. Behind a lock
/// of its own: working out its percentiles and buckets walks thousands of
/// counters, which must not hold the engine's lock (with 1,000 queues, ten
/// overviews a second doubled lateness p99 at 10 k tasks/s when it did).
#[derive(Clone, Default)]
pub struct Lateness(Arc<Mutex<Option<Box<Histogram<u32>>>>>);

impl Lateness {
    /// Records one delivery's lateness.
    pub fn record(&self, lateness_us: u64) {
        self.0
            .lock()
            .get_or_insert_with(|| {
                Box::new(Histogram::new_with_bounds(1, LATENESS_US_MAX, 2).expect("valid histogram bounds"))
            })
            .saturating_record(lateness_us.clamp(1, LATENESS_US_MAX));
    }

    /// Percentiles and buckets of the deliveries so far.
    pub fn read(&self) -> LatenessMs {
        let histogram = self.0.lock();
        let Some(h) = histogram.as_ref().filter(|h| !h.is_empty()) else { return LatenessMs::default() };
        let ms = |us: u64| us as f64 / 1_000.0;
        LatenessMs {
            samples: h.len(),
            p50: ms(h.value_at_quantile(0.5)),
            p99: ms(h.value_at_quantile(0.99)),
            max: ms(h.max()),
            sum: ms((h.mean() * h.len() as f64) as u64),
            buckets: buckets(h),
        }
    }
}

/// Fills in each queue's lateness, after the engine's lock.
pub fn with_lateness(read: Vec<(QueueStats, Lateness)>) -> Vec<QueueStats> {
    read.into_iter()
        .map(|(mut stats, lateness)| {
            stats.lateness = lateness.read();
            stats
        })
        .collect()
}

/// Deliveries at most each of [`LATENESS_BUCKETS_US`] late, cumulative, in one
/// pass over the values recorded (a `count_between` per bound walked the
/// histogram 18 times, under the engine's lock, for every queue). The
/// histogram keeps two significant digits, so a count is exact to 1 % of its
/// bound.
fn buckets(h: &Histogram<u32>) -> [u64; LATENESS_BUCKETS_US.len()] {
    let mut counts = [0u64; LATENESS_BUCKETS_US.len()];
    for recorded in h.iter_recorded() {
        let at = LATENESS_BUCKETS_US.partition_point(|&bound| bound < recorded.value_iterated_to());
        if let Some(count) = counts.get_mut(at) {
            *count += u64::from(recorded.count_at_value());
        }
    }
    let mut total = 0;
    counts.map(|count| {
        total += count;
        total
    })
}
