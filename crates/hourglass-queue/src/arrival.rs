//! When a request arrived, and the one rule for what it asks to happen
//! later: **never early**.
//!
//! Times are kept in whole milliseconds, and a task is due once the clock,
//! rounded down to the millisecond, reaches its due time: so it is handed
//! out at or after that millisecond's start. A delay counted from the
//! arrival rounded down could then be handed out up to a millisecond before
//! the delay has passed; counted from the arrival rounded up, it never is.
//! A task due at once (a delay of 0) is due from the arrival rounded down:
//! it exists only once it has arrived, so it cannot be handed out early, and
//! rounding up would only keep it waiting.

use hourglass::WallClock;

/// The instant a request arrived, in Unix microseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Arrival {
    us: u64,
}

impl Arrival {
    /// An arrival at `us` Unix microseconds.
    pub fn at_us(us: u64) -> Arrival {
        Arrival { us }
    }

    /// An arrival now, on `clock`.
    pub fn now(clock: &dyn WallClock) -> Arrival {
        Arrival::at_us(clock.now_us())
    }

    /// The millisecond it arrived in, rounded down: what has passed (a
    /// task's creation time, an expiry's check).
    pub fn ms(self) -> u64 {
        self.us / 1_000
    }

    /// When something asked for `delay_ms` after the arrival is due: never
    /// before the delay has passed.
    pub fn after_ms(self, delay_ms: u64) -> u64 {
        if delay_ms == 0 {
            self.ms()
        } else {
            self.us.div_ceil(1_000) + delay_ms
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_delay_counts_from_the_arrival_rounded_up_and_none_from_it_rounded_down() {
        let mid = Arrival::at_us(5_700);
        assert_eq!((mid.ms(), mid.after_ms(0), mid.after_ms(1), mid.after_ms(10)), (5, 5, 7, 16));
        let edge = Arrival::at_us(5_000);
        assert_eq!((edge.after_ms(0), edge.after_ms(10)), (5, 15), "on the millisecond: nothing to round");
        // Handed out from the due millisecond's start on, never before the delay has passed.
        for us in [0, 1, 999, 1_000, 1_001, 123_456_789] {
            for delay_ms in [1, 2, 20, 1_000] {
                assert!(
                    Arrival::at_us(us).after_ms(delay_ms) * 1_000 >= us + delay_ms * 1_000,
                    "{us} µs + {delay_ms} ms"
                );
            }
        }
    }
}
