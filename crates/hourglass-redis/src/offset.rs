//! Redis's clock as this node sees it. Every script reads the time from Redis
//! (`TIME`), so that every node's tasks come due by one clock; a node needs
//! Redis's time only to set its timers, to check a due time it was sent and to
//! measure lateness, and estimates it from the times its replies carry. This
//! machine's time is read only through [`SystemWallClock`].

use std::time::{Duration, Instant};

use hourglass_queue::{Arrival, SystemWallClock, WallClock};

use crate::RedisBackend;

/// How long a sample of the clocks' offset counts, at least.
const OFFSET_WINDOW: Duration = Duration::from_secs(5);

/// Redis's clock minus this node's. A reply's time was read on Redis before
/// this node reads its own, and both are whole milliseconds, so each sample
/// is at most the true offset; the estimate is the largest sample of the
/// last two windows of [`OFFSET_WINDOW`], which follows the clocks if they
/// drift apart.
#[derive(Default)]
pub(crate) struct Offset {
    since: Option<Instant>,
    current: Option<i64>,
    previous: Option<i64>,
}

impl Offset {
    fn saw(&mut self, sample: i64, now: Instant) {
        if self.since.is_none_or(|since| now - since > OFFSET_WINDOW) {
            self.previous = self.current;
            self.current = Some(sample);
            self.since = Some(now);
        } else {
            self.current = Some(self.current.map_or(sample, |c| c.max(sample)));
        }
    }

    fn estimate(&self) -> i64 {
        self.current.max(self.previous).unwrap_or(0)
    }
}

impl RedisBackend {
    /// Notes Redis's time, read in a reply.
    pub(crate) fn saw_time(&self, redis_ms: u64) {
        self.offset.lock().saw(redis_ms as i64 - SystemWallClock.now_ms() as i64, Instant::now());
    }

    /// Redis's clock minus this node's, in ms, as estimated.
    pub(crate) fn offset_ms(&self) -> i64 {
        self.offset.lock().estimate()
    }

    /// Redis's time now, as this node estimates it.
    pub(crate) fn redis_ms(&self) -> u64 {
        (SystemWallClock.now_ms() as i64 + self.offset_ms()).max(0) as u64
    }

    /// A request's arrival now, on Redis's clock as this node estimates it
    /// (leaning late: the offset is the largest seen of late): what its
    /// delays count from, never early. The scripts count the same way.
    pub(crate) fn redis_arrival(&self) -> Arrival {
        Arrival::at_us(self.redis_us_since_epoch())
    }

    /// [`redis_us`](Self::redis_us), never before the epoch: a time to file
    /// or mark things by.
    pub(crate) fn redis_us_since_epoch(&self) -> u64 {
        self.redis_us().max(0) as u64
    }

    /// Redis's time now, as this node estimates it, in µs: when a claim's
    /// tasks are handed out, for their lateness.
    pub(crate) fn redis_us(&self) -> i64 {
        SystemWallClock.now_us() as i64 + self.offset_ms() * 1_000
    }

    /// `redis_ms` (Redis's time) on this node's clock.
    pub(crate) fn local_ms(&self, redis_ms: u64) -> u64 {
        (redis_ms as i64 - self.offset_ms()).max(0) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_estimate_is_the_largest_sample_of_the_last_two_windows() {
        let start = Instant::now();
        let mut offset = Offset::default();
        assert_eq!(offset.estimate(), 0, "none seen yet");
        offset.saw(-3, start);
        offset.saw(7, start + Duration::from_secs(1));
        offset.saw(2, start + Duration::from_secs(2));
        assert_eq!(offset.estimate(), 7);
        // A new window keeps the last one's largest...
        offset.saw(1, start + Duration::from_secs(6));
        assert_eq!(offset.estimate(), 7);
        // ...and forgets it a window later: the clocks drifted.
        offset.saw(1, start + Duration::from_secs(12));
        assert_eq!(offset.estimate(), 1);
    }
}
