//! The queue's time base: whole milliseconds since the queue was made, which
//! are the wheel's ticks.

use std::time::Duration;

use tokio::time::Instant;

/// The longest a single sleep is armed for. A deadline further away is
/// reached by sleeping again, so every instant handed to tokio's timer is
/// close to now whatever the deadline (2^36 ms, about 2.2 years, is the range
/// of tokio's own wheel).
pub(crate) const SLEEP_MAX: Duration = Duration::from_millis(1 << 36);

/// Converts between instants and ticks of one millisecond from `start`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct TimeBase {
    start: Instant,
}

impl TimeBase {
    /// Ticks count from now.
    pub(crate) fn starting_now() -> TimeBase {
        TimeBase { start: Instant::now() }
    }

    /// The tick of a deadline, rounded up so that nothing comes out early; a
    /// deadline before the start is tick 0.
    #[inline]
    pub(crate) fn deadline_tick(&self, when: Instant) -> u64 {
        ceil_ms(when.saturating_duration_since(self.start))
    }

    /// The tick `timeout` after `now`, without overflow: a timeout too long
    /// for an `Instant` is the last tick, which never comes.
    #[inline]
    pub(crate) fn tick_after(&self, now: Instant, timeout: Duration) -> u64 {
        ceil_ms(now.saturating_duration_since(self.start).saturating_add(timeout))
    }

    /// The last tick that has fully passed at `now`.
    #[inline]
    pub(crate) fn elapsed_tick(&self, now: Instant) -> u64 {
        let since = now.saturating_duration_since(self.start);
        since.as_secs().saturating_mul(1000).saturating_add(u64::from(since.subsec_millis()))
    }

    /// The instant a tick stands for. Where the platform's `Instant` cannot
    /// reach that far (every tick fits on Linux and macOS), a distant instant
    /// that it can reach stands in.
    pub(crate) fn instant(&self, tick: u64) -> Instant {
        let mut ms = tick;
        loop {
            if let Some(at) = self.start.checked_add(Duration::from_millis(ms)) {
                return at;
            }
            ms /= 2;
        }
    }
}

/// Whole milliseconds, rounded up, saturating at `u64::MAX`.
#[inline]
fn ceil_ms(duration: Duration) -> u64 {
    let sub_ms = duration.subsec_nanos().div_ceil(1_000_000);
    duration.as_secs().saturating_mul(1000).saturating_add(u64::from(sub_ms))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deadlines_round_up_and_time_rounds_down() {
        let base = TimeBase::starting_now();
        let at = |ns: u64| base.start + Duration::from_nanos(ns);
        assert_eq!(base.deadline_tick(at(0)), 0);
        assert_eq!(base.deadline_tick(at(1)), 1);
        assert_eq!(base.deadline_tick(at(1_000_000)), 1);
        assert_eq!(base.deadline_tick(at(1_000_001)), 2);
        assert_eq!(base.elapsed_tick(at(1_999_999)), 1);
        assert_eq!(base.elapsed_tick(at(2_000_000)), 2);
        assert_eq!(base.instant(7), at(7_000_000));
    }

    #[test]
    fn any_timeout_has_a_tick_and_any_tick_an_instant() {
        let base = TimeBase::starting_now();
        assert_eq!(base.tick_after(base.start, Duration::MAX), u64::MAX);
        assert_eq!(base.tick_after(base.start, Duration::from_secs(3 * 365 * 86_400)), 3 * 365 * 86_400_000);
        assert!(base.instant(u64::MAX) > base.instant(u64::MAX / 2));
        assert_eq!(ceil_ms(Duration::from_nanos(999_999_999)), 1000);
    }
}
