//! Conversions between instants, nanoseconds since the scheduler's origin, and ticks.

use std::time::{Duration, Instant};

#[derive(Debug, Clone, Copy)]
pub(crate) struct TimeBase {
    /// Tick 0: when the scheduler was built.
    pub(crate) origin: Instant,
    pub(crate) tick_ns: u64,
}

impl TimeBase {
    /// Nanoseconds from the origin to `instant`; 0 for an instant before it.
    #[inline]
    pub(crate) fn ns_at(&self, instant: Instant) -> u64 {
        let ns = instant.saturating_duration_since(self.origin).as_nanos();
        u64::try_from(ns).unwrap_or(u64::MAX)
    }

    /// The first tick at or after `ns`: a job is never run before its due time.
    #[inline]
    pub(crate) fn tick_at_or_after(&self, ns: u64) -> u64 {
        ns.div_ceil(self.tick_ns)
    }

    /// The tick that `ns` falls in: how far the wheel may advance at time `ns`.
    #[inline]
    pub(crate) fn tick_containing(&self, ns: u64) -> u64 {
        ns / self.tick_ns
    }

    /// The instant at which `tick` starts; `None` if it is beyond `Instant`'s range.
    #[inline]
    pub(crate) fn instant_of_tick(&self, tick: u64) -> Option<Instant> {
        self.origin.checked_add(Duration::from_nanos(tick.checked_mul(self.tick_ns)?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn due_ticks_round_up_and_now_ticks_round_down() {
        let base = TimeBase { origin: Instant::now(), tick_ns: 1_000_000 };
        assert_eq!(base.tick_at_or_after(0), 0);
        assert_eq!(base.tick_at_or_after(1), 1);
        assert_eq!(base.tick_at_or_after(1_000_000), 1);
        assert_eq!(base.tick_containing(1_999_999), 1);
        assert_eq!(base.ns_at(base.origin - Duration::from_secs(1)), 0);
        assert!(base.instant_of_tick(u64::MAX).is_none());
    }
}
