//! Conversions between instants, nanoseconds since the scheduler's origin, and
//! ticks; and the scheduler's clock in ticks, for its driver to sleep on.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::clock::Clock;
use crate::timer_thread::TimerClock;

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

/// The monotonic time (ns since the origin) at which the wall clock reads
/// `at_ms`, from one reading of both: `now_ns` when the wall clock read
/// `wall_us`. Counted from the wall clock's microseconds, not its truncated
/// millisecond, so a calendar job is armed at its occurrence and not up to a
/// millisecond after, and its lateness counts from the occurrence. An
/// occurrence before `wall_us` maps before `now_ns`.
#[cfg(feature = "cron")]
#[inline]
pub(crate) fn ns_at_wall_ms(now_ns: u64, wall_us: u64, at_ms: u64) -> u64 {
    let at_us = at_ms.saturating_mul(1_000);
    if at_us >= wall_us {
        now_ns.saturating_add((at_us - wall_us).saturating_mul(1_000))
    } else {
        now_ns.saturating_sub((wall_us - at_us).saturating_mul(1_000))
    }
}

/// The scheduler's [`Clock`] read in ticks of its wheel, so that its driver
/// sleeps on it as a [`TimerThread`](crate::TimerThread) with the wheel's
/// deadlines as they are.
#[derive(Debug, Clone)]
pub(crate) struct TickClock {
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) time: TimeBase,
}

impl TimerClock for TickClock {
    /// The tick now falls in: the wheel may advance to it.
    #[inline]
    fn now_ticks(&self) -> u64 {
        self.time.tick_containing(self.time.ns_at(self.clock.now()))
    }

    /// Until the instant `tick` starts, when [`now_ticks`](TickClock::now_ticks)
    /// reaches it; a tick beyond `Instant`'s range is never reached.
    #[inline]
    fn park_until_tick(&self, tick: u64) {
        self.clock.park_until(self.time.instant_of_tick(tick));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ManualClock;

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

    #[cfg(feature = "cron")]
    #[test]
    fn wall_times_map_to_the_microsecond() {
        assert_eq!(ns_at_wall_ms(5_000_000, 1_000_700, 2_000), 5_000_000 + 999_300_000);
        assert_eq!(ns_at_wall_ms(5_000_000, 1_000_700, 1_000), 5_000_000 - 700_000);
        assert_eq!(ns_at_wall_ms(5, 1_000_700, 0), 0);
    }

    #[test]
    fn the_tick_clock_reaches_a_tick_when_the_clock_reaches_its_start() {
        let clock = ManualClock::new();
        let ticks =
            TickClock { clock: Arc::new(clock.clone()), time: TimeBase { origin: clock.now(), tick_ns: 1_000_000 } };
        ticks.park_until_tick(0); // its start has come: returns at once
        clock.advance(Duration::from_nanos(1_999_999));
        assert_eq!(ticks.now_ticks(), 1);
        clock.advance(Duration::from_nanos(1));
        assert_eq!(ticks.now_ticks(), 2);
        ticks.park_until_tick(2);
    }
}
