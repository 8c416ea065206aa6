//! What the writer counts of its commits: how many, how long each took, how
//! many changes each carried. Atomics written by the writer thread alone,
//! read by whoever renders them (`/metrics`).

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

use hourglass_queue::{StorageStats, BATCH_BUCKETS, COMMIT_BUCKETS_US};

/// The writer's counters.
#[derive(Default)]
pub(crate) struct CommitStats {
    commits: AtomicU64,
    failed: AtomicU64,
    mutations: AtomicU64,
    micros: AtomicU64,
    /// Commits by the first bucket whose bound they are within; the last
    /// slot is past every bound.
    by_time: [AtomicU64; COMMIT_BUCKETS_US.len() + 1],
    by_size: [AtomicU64; BATCH_BUCKETS.len() + 1],
}

/// The index of the first bound `value` is within; `bounds.len()` if none.
fn bucket(bounds: &[u64], value: u64) -> usize {
    bounds.partition_point(|&bound| bound < value)
}

/// Cumulative counts at each bound, from per-bucket counts.
fn cumulative<const N: usize>(counts: &[AtomicU64]) -> [u64; N] {
    let mut total = 0;
    std::array::from_fn(|i| {
        total += counts[i].load(Relaxed);
        total
    })
}

impl CommitStats {
    /// One commit of `mutations` changes that took `took`.
    pub(crate) fn record(&self, mutations: usize, took: Duration, ok: bool) {
        let micros = u64::try_from(took.as_micros()).unwrap_or(u64::MAX);
        self.commits.fetch_add(1, Relaxed);
        if !ok {
            self.failed.fetch_add(1, Relaxed);
        }
        self.mutations.fetch_add(mutations as u64, Relaxed);
        self.micros.fetch_add(micros, Relaxed);
        self.by_time[bucket(&COMMIT_BUCKETS_US, micros)].fetch_add(1, Relaxed);
        self.by_size[bucket(&BATCH_BUCKETS, mutations as u64)].fetch_add(1, Relaxed);
    }

    pub(crate) fn snapshot(&self) -> StorageStats {
        StorageStats {
            commits: self.commits.load(Relaxed),
            failed: self.failed.load(Relaxed),
            mutations: self.mutations.load(Relaxed),
            commit_us_sum: self.micros.load(Relaxed),
            commit_us_buckets: cumulative(&self.by_time),
            batch_buckets: cumulative(&self.by_size),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commits_land_in_their_buckets_and_count_cumulatively() {
        let stats = CommitStats::default();
        stats.record(1, Duration::from_micros(50), true);
        stats.record(3, Duration::from_micros(900), true);
        stats.record(70_000, Duration::from_secs(5), false);
        let s = stats.snapshot();
        assert_eq!((s.commits, s.failed, s.mutations), (3, 1, 70_004));
        assert_eq!(s.commit_us_sum, 5_000_950);
        // 50 µs is within the first bound; 900 µs within 1 ms; 5 s past every one.
        let at = |bound| s.commit_us_buckets[COMMIT_BUCKETS_US.iter().position(|&b| b == bound).unwrap()];
        assert_eq!((at(50), at(500), at(1_000), at(1_000_000)), (1, 1, 2, 2));
        let size = |bound| s.batch_buckets[BATCH_BUCKETS.iter().position(|&b| b == bound).unwrap()];
        assert_eq!((size(1), size(4), size(65_536)), (1, 2, 2));
    }
}
