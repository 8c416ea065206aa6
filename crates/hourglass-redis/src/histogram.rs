//! Lateness as the nodes count it together: a histogram of fixed
//! logarithmic buckets, which adds up in Redis with `HINCRBY` where the
//! engine's HDR histograms (`hourglass_queue::lateness`) would have to be
//! merged by a reader.
//!
//! The buckets are HDR's layout with three bits of precision: below
//! [`SUB_BUCKETS`] microseconds one bucket a microsecond, then each power of
//! two split into [`SUB_BUCKETS`] equal buckets. A bucket is at most an eighth
//! of its lower bound wide, so the midpoint a percentile reports is within
//! 1/16 (6.25 %) of every value in it.
//!
//! | lateness | bucket width |
//! |---|---|
//! | 0 – 8 µs | 1 µs |
//! | 8 – 16 µs | 1 µs |
//! | 1.024 – 2.048 ms | 128 µs |
//! | 1.05 – 2.1 s | 131 ms |
//! | up to a day ([`LATENESS_US_MAX`]) | [`BUCKETS`] buckets in all |

use std::collections::BTreeMap;

use hourglass_queue::lateness::LATENESS_US_MAX;
use hourglass_queue::{LatenessMs, LATENESS_BUCKETS_US};

/// Bits of precision: each power of two is split into `2^SUB_BITS` buckets.
const SUB_BITS: u32 = 3;
/// Buckets in each power of two.
pub(crate) const SUB_BUCKETS: u64 = 1 << SUB_BITS;
/// Buckets in all: those of every lateness up to [`LATENESS_US_MAX`].
pub(crate) const BUCKETS: u16 = bucket(LATENESS_US_MAX) + 1;

const _: () = assert!(BUCKETS == 275, "a day in three-bit buckets");
const _: () = {
    // Every bucket's bounds are those of the value they hold, up to the last.
    let mut at = 0;
    while at < BUCKETS {
        let (low, high) = bounds(at);
        assert!(bucket(low) == at && bucket(high - 1) == at && low < high);
        assert!(at < SUB_BUCKETS as u16 || (high - low) * SUB_BUCKETS <= low, "at most an eighth wide");
        at += 1;
    }
};

/// The bucket of `us` microseconds (clamped to [`LATENESS_US_MAX`]).
pub(crate) const fn bucket(us: u64) -> u16 {
    let us = if us > LATENESS_US_MAX { LATENESS_US_MAX } else { us };
    if us < SUB_BUCKETS {
        return us as u16;
    }
    let power = 63 - us.leading_zeros();
    let shift = power - SUB_BITS;
    ((shift as u64 + 1) * SUB_BUCKETS + ((us >> shift) & (SUB_BUCKETS - 1))) as u16
}

/// The values of bucket `at`: from the first, to the second excluded.
pub(crate) const fn bounds(at: u16) -> (u64, u64) {
    let at = at as u64;
    if at < SUB_BUCKETS {
        return (at, at + 1);
    }
    let shift = at / SUB_BUCKETS - 1;
    let mantissa = SUB_BUCKETS + at % SUB_BUCKETS;
    (mantissa << shift, (mantissa + 1) << shift)
}

/// Deliveries counted by bucket, with the sum and the latest of their
/// lateness: what a node adds to the store's sums, or what the sums hold.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Histogram {
    /// Deliveries in each bucket that has any.
    pub(crate) counts: BTreeMap<u16, u64>,
    /// The sum of their lateness, µs.
    pub(crate) sum_us: u64,
    /// The latest, µs.
    pub(crate) max_us: u64,
}

impl Histogram {
    /// Counts a delivery `us` late.
    pub(crate) fn record(&mut self, us: u64) {
        *self.counts.entry(bucket(us)).or_default() += 1;
        self.sum_us = self.sum_us.saturating_add(us);
        self.max_us = self.max_us.max(us);
    }

    /// Adds `other`'s deliveries to these.
    pub(crate) fn add(&mut self, other: &Histogram) {
        for (&at, &count) in &other.counts {
            *self.counts.entry(at).or_default() += count;
        }
        self.sum_us = self.sum_us.saturating_add(other.sum_us);
        self.max_us = self.max_us.max(other.max_us);
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.counts.is_empty()
    }

    /// Percentiles and the dashboard's buckets. A percentile is the midpoint
    /// of the bucket it falls in, so within 6.25 % of the exact figure; a
    /// bucket is counted under the first of [`LATENESS_BUCKETS_US`] at or
    /// above its midpoint.
    pub(crate) fn read(&self) -> LatenessMs {
        let samples: u64 = self.counts.values().sum();
        if samples == 0 {
            return LatenessMs::default();
        }
        let ms = |us: u64| us as f64 / 1_000.0;
        let quantile = |q: f64| {
            let rank = (q * samples as f64).ceil().max(1.0) as u64;
            let mut below = 0;
            for (&at, &count) in &self.counts {
                below += count;
                if below >= rank {
                    return midpoint(at).min(self.max_us);
                }
            }
            self.max_us
        };
        let buckets = cumulative(self.dashboard_counts());
        LatenessMs {
            samples,
            p50: ms(quantile(0.5)),
            p99: ms(quantile(0.99)),
            max: ms(self.max_us),
            sum: ms(self.sum_us),
            buckets,
        }
    }
}

impl Histogram {
    /// Deliveries under each of [`LATENESS_BUCKETS_US`], not cumulative: a
    /// bucket is counted under the first bound at or above its midpoint, and
    /// not at all past the last.
    pub(crate) fn dashboard_counts(&self) -> [u64; LATENESS_BUCKETS_US.len()] {
        let mut counts = [0u64; LATENESS_BUCKETS_US.len()];
        for (&at, &count) in &self.counts {
            let first = LATENESS_BUCKETS_US.partition_point(|&bound| bound < midpoint(at));
            if let Some(under) = counts.get_mut(first) {
                *under += count;
            }
        }
        counts
    }
}

/// Counts made cumulative, as the dashboard's and Prometheus's buckets are.
pub(crate) fn cumulative<const N: usize>(counts: [u64; N]) -> [u64; N] {
    let mut total = 0;
    counts.map(|count| {
        total += count;
        total
    })
}

/// The value a bucket stands for: its midpoint.
const fn midpoint(at: u16) -> u64 {
    let (low, high) = bounds(at);
    low + (high - 1 - low) / 2
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_cover_every_value_in_order() {
        let mut last = 0;
        for us in (0..100_000).chain([LATENESS_US_MAX - 1, LATENESS_US_MAX, LATENESS_US_MAX + 1, u64::MAX]) {
            let at = bucket(us);
            assert!(at >= last, "bucket of {us} goes back");
            last = at;
            let (low, high) = bounds(at);
            assert!((low..high).contains(&us.min(LATENESS_US_MAX)), "{us} in bucket {at} of {low}..{high}");
        }
        assert_eq!(bucket(u64::MAX), BUCKETS - 1);
    }

    #[test]
    fn percentiles_are_within_a_sixteenth() {
        let mut histogram = Histogram::default();
        for us in 1..=10_000 {
            histogram.record(us * 10);
        }
        let read = histogram.read();
        assert_eq!(read.samples, 10_000);
        assert!((read.p50 / 50.0 - 1.0).abs() <= 1.0 / 16.0, "p50 {}", read.p50);
        assert!((read.p99 / 99.0 - 1.0).abs() <= 1.0 / 16.0, "p99 {}", read.p99);
        assert_eq!(read.max, 100.0);
        assert_eq!(read.sum, 500_050.0);
        assert_eq!(*read.buckets.last().unwrap(), 10_000, "cumulative: every delivery in the last");
        // 100 µs .. 100 ms: each dashboard bucket holds about what it should.
        for (at, &bound) in LATENESS_BUCKETS_US.iter().enumerate().take(10) {
            let exact = (bound / 10).min(10_000);
            let counted = read.buckets[at];
            assert!(counted.abs_diff(exact) <= exact / 8 + 1, "at {bound} µs: {counted}, not about {exact}");
        }
    }

    #[test]
    fn histograms_add_up() {
        let (mut one, mut other, mut both) = (Histogram::default(), Histogram::default(), Histogram::default());
        for us in [3, 900, 1_500, 70_000] {
            one.record(us);
            both.record(us);
        }
        for us in [4, 1_600, 2_000_000] {
            other.record(us);
            both.record(us);
        }
        one.add(&other);
        assert_eq!(one, both);
        assert!(Histogram::default().read() == LatenessMs::default());
    }
}
