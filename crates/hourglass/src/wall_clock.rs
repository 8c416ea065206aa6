//! Wall-clock time, for deadlines that outlive the process: Unix microseconds.
//!
//! [`Clock`](crate::Clock) is monotonic and right for in-process timers, whose
//! deadlines die with the process. A durable queue stores due times that must
//! mean the same after a restart, so it counts in Unix time and reads it from a
//! [`WallClock`], which tests replace with a [`ManualWallClock`]. Both kinds can
//! be slept on, so a timer thread never sleeps on the real clock in a test.

use std::fmt;
use std::sync::Arc;
use std::thread;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use parking_lot::Mutex;

use crate::clock::Sleepers;

/// A source of Unix time that a thread can sleep on.
pub trait WallClock: Send + Sync + fmt::Debug + 'static {
    /// Microseconds since the Unix epoch. May step back or forward if the
    /// system's clock is set; callers must not assume it is monotonic.
    fn now_us(&self) -> u64;

    /// Milliseconds since the Unix epoch, rounded down: what has passed.
    fn now_ms(&self) -> u64 {
        self.now_us() / 1_000
    }

    /// Milliseconds since the Unix epoch, rounded up: the first millisecond
    /// not before now. A due time counted from it (`now_ms_ceil() +
    /// delay_ms`) is never before its delay has passed, where one counted
    /// from [`now_ms`](WallClock::now_ms) could be up to a millisecond
    /// early, as a task is due once `now_ms` reaches its due time.
    fn now_ms_ceil(&self) -> u64 {
        self.now_us().div_ceil(1_000)
    }

    /// Parks the calling thread until this clock reads `deadline_us` (forever
    /// if `None`), or until the thread is unparked, whichever comes first. May
    /// return early, spuriously: callers re-check.
    fn park_until_us(&self, deadline_us: Option<u64>);
}

/// The system's clock ([`SystemTime`]).
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemWallClock;

impl WallClock for SystemWallClock {
    fn now_us(&self) -> u64 {
        // A clock before 1970 is a broken machine; treat it as the epoch.
        SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_micros() as u64)
    }

    fn park_until_us(&self, deadline_us: Option<u64>) {
        match deadline_us {
            None => thread::park(),
            Some(deadline_us) => {
                let wait_us = deadline_us.saturating_sub(self.now_us());
                if wait_us > 0 {
                    thread::park_timeout(Duration::from_micros(wait_us));
                }
            }
        }
    }
}

/// A wall clock that moves only when told to. Clones share the same time;
/// threads parked on it wake when it moves.
///
/// # Example
/// ```
/// use hourglass::{ManualWallClock, WallClock};
///
/// let clock = ManualWallClock::at_ms(1_700_000_000_000);
/// clock.advance_ms(1_500);
/// assert_eq!(clock.now_ms(), 1_700_000_001_500);
/// ```
#[derive(Clone, Default)]
pub struct ManualWallClock {
    inner: Arc<Mutex<ManualWall>>,
}

#[derive(Default)]
struct ManualWall {
    now_us: u64,
    parked: Sleepers,
}

impl ManualWallClock {
    /// A clock standing at `now_ms`.
    pub fn at_ms(now_ms: u64) -> Self {
        let clock = ManualWallClock::default();
        clock.inner.lock().now_us = now_ms * 1_000;
        clock
    }

    /// Moves the clock forward by `ms` and wakes the threads parked on it.
    pub fn advance_ms(&self, ms: u64) {
        self.set_us(self.now_us() + ms * 1_000);
    }

    /// Sets the clock, forward or back (as an administrator or NTP may step
    /// the system's clock), and wakes the threads parked on it.
    pub fn set_us(&self, now_us: u64) {
        let parked = {
            let mut inner = self.inner.lock();
            inner.now_us = now_us;
            inner.parked.take()
        };
        parked.wake();
    }
}

impl fmt::Debug for ManualWallClock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ManualWallClock").field("now_us", &self.now_us()).finish()
    }
}

impl WallClock for ManualWallClock {
    fn now_us(&self) -> u64 {
        self.inner.lock().now_us
    }

    fn park_until_us(&self, deadline_us: Option<u64>) {
        Sleepers::park_unless(
            &self.inner,
            |inner| deadline_us.is_some_and(|deadline_us| inner.now_us >= deadline_us),
            |inner| &mut inner.parked,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn milliseconds_round_down_for_what_passed_and_up_for_what_is_due() {
        let clock = ManualWallClock::at_ms(5);
        assert_eq!((clock.now_ms(), clock.now_ms_ceil()), (5, 5), "on the millisecond");
        clock.set_us(5_001);
        assert_eq!((clock.now_ms(), clock.now_ms_ceil()), (5, 6));
        clock.set_us(5_999);
        assert_eq!((clock.now_ms(), clock.now_ms_ceil()), (5, 6));
    }

    #[test]
    fn a_parked_thread_wakes_when_the_clock_passes_its_deadline() {
        let clock = ManualWallClock::at_ms(1_000);
        let sleeper = {
            let clock = clock.clone();
            thread::spawn(move || {
                while clock.now_ms() < 1_005 {
                    clock.park_until_us(Some(1_005_000));
                }
                clock.now_ms()
            })
        };
        clock.advance_ms(2);
        clock.advance_ms(3);
        assert_eq!(sleeper.join().unwrap(), 1_005);
    }

    #[test]
    fn the_system_clock_returns_at_once_for_a_past_deadline() {
        let clock = SystemWallClock;
        clock.park_until_us(Some(clock.now_us() - 1));
        assert!(clock.now_ms() > 1_600_000_000_000, "a machine clock set after 2020");
    }
}
