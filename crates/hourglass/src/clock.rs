//! Time sources: the system's monotonic clock, and a manual clock for tests.

use std::fmt;
use std::sync::Arc;
use std::thread::{self, Thread};
use std::time::{Duration, Instant};

use parking_lot::Mutex;

/// A source of monotonic time that the scheduler's driver can sleep on.
///
/// The scheduler reads time only through this trait, so a test can swap in a
/// [`ManualClock`] and move time by hand instead of sleeping.
pub trait Clock: Send + Sync + fmt::Debug + 'static {
    /// The current time. Never goes back.
    fn now(&self) -> Instant;

    /// Parks the calling thread until this clock reaches `deadline` (forever if
    /// `None`), or until the thread is unparked with [`Thread::unpark`],
    /// whichever comes first. May return early, spuriously: callers re-check.
    fn park_until(&self, deadline: Option<Instant>);
}

/// The operating system's monotonic clock ([`Instant::now`]).
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    #[inline]
    fn now(&self) -> Instant {
        Instant::now()
    }

    fn park_until(&self, deadline: Option<Instant>) {
        match deadline {
            None => thread::park(),
            Some(deadline) => {
                let timeout = deadline.saturating_duration_since(Instant::now());
                if !timeout.is_zero() {
                    thread::park_timeout(timeout);
                }
            }
        }
    }
}

/// A clock that moves only when told to: for tests that must not sleep.
///
/// Clones share the same time. Threads parked on it (the scheduler's driver)
/// wake when [`advance`](ManualClock::advance) moves time past their deadline.
///
/// It is a [`WallClock`](crate::WallClock) too, standing at the Unix time given
/// to [`at_unix_ms`](ManualClock::at_unix_ms) (the epoch for
/// [`new`](ManualClock::new)) and moving with the monotonic one: one clock for
/// a test of calendar jobs, which read both.
///
/// # Example
/// ```
/// use std::time::Duration;
/// use hourglass::{Clock, ManualClock};
///
/// let clock = ManualClock::new();
/// let start = clock.now();
/// clock.advance(Duration::from_secs(30));
/// assert_eq!(clock.now() - start, Duration::from_secs(30));
/// ```
#[derive(Clone, Default)]
pub struct ManualClock {
    inner: Arc<Mutex<ManualState>>,
}

#[derive(Default)]
struct ManualState {
    offset: Duration,
    unix_origin_us: u64,
    origin: Option<Instant>,
    parked: Sleepers,
}

/// Threads parked on a manual clock until a deadline, woken when it moves.
/// Shared by [`ManualClock`] and [`ManualWallClock`](crate::ManualWallClock).
#[derive(Default)]
pub(crate) struct Sleepers(Vec<Thread>);

impl Sleepers {
    /// Parks the calling thread on a manual clock guarded by `lock`, unless
    /// `reached` says its deadline has passed. Checked under the lock that
    /// advancing the clock takes: an advance either happened before (and we
    /// return) or will find us among the sleepers and wake us.
    pub(crate) fn park_unless<S>(
        lock: &Mutex<S>,
        reached: impl FnOnce(&mut S) -> bool,
        sleepers: fn(&mut S) -> &mut Sleepers,
    ) {
        {
            let mut state = lock.lock();
            if reached(&mut state) {
                return;
            }
            sleepers(&mut state).add_current();
        }
        thread::park();
    }

    fn add_current(&mut self) {
        let current = thread::current();
        if !self.0.iter().any(|t| t.id() == current.id()) {
            self.0.push(current);
        }
    }

    /// Takes every registered thread; wake them after releasing the lock.
    pub(crate) fn take(&mut self) -> Sleepers {
        Sleepers(std::mem::take(&mut self.0))
    }

    /// Unparks them.
    pub(crate) fn wake(self) {
        for thread in self.0 {
            thread.unpark();
        }
    }
}

impl ManualState {
    fn now(&mut self) -> Instant {
        *self.origin.get_or_insert_with(Instant::now) + self.offset
    }

    fn unix_us(&self) -> u64 {
        self.unix_origin_us.saturating_add(self.offset.as_micros() as u64)
    }
}

impl ManualClock {
    /// A manual clock standing at the moment it is made.
    pub fn new() -> Self {
        let clock = ManualClock::default();
        clock.inner.lock().origin = Some(Instant::now());
        clock
    }

    /// A manual clock whose wall-clock reading starts at `unix_ms`.
    pub fn at_unix_ms(unix_ms: u64) -> Self {
        let clock = ManualClock::new();
        clock.inner.lock().unix_origin_us = unix_ms.saturating_mul(1_000);
        clock
    }

    /// Moves time forward by `by` and wakes the threads parked on this clock.
    pub fn advance(&self, by: Duration) {
        let parked = {
            let mut state = self.inner.lock();
            state.offset += by;
            state.parked.take()
        };
        parked.wake();
    }

    /// How far [`advance`](ManualClock::advance) has moved this clock in all.
    pub fn elapsed(&self) -> Duration {
        self.inner.lock().offset
    }
}

impl fmt::Debug for ManualClock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ManualClock").field("elapsed", &self.elapsed()).finish()
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Instant {
        self.inner.lock().now()
    }

    fn park_until(&self, deadline: Option<Instant>) {
        Sleepers::park_unless(
            &self.inner,
            |state| deadline.is_some_and(|deadline| state.now() >= deadline),
            |state| &mut state.parked,
        );
    }
}

impl crate::WallClock for ManualClock {
    fn now_us(&self) -> u64 {
        self.inner.lock().unix_us()
    }

    fn park_until_us(&self, deadline_us: Option<u64>) {
        Sleepers::park_unless(
            &self.inner,
            |state| deadline_us.is_some_and(|deadline_us| state.unix_us() >= deadline_us),
            |state| &mut state.parked,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manual_clock_wakes_a_parked_thread_when_its_deadline_passes() {
        let clock = ManualClock::new();
        let deadline = clock.now() + Duration::from_secs(5);
        let sleeper = {
            let clock = clock.clone();
            thread::spawn(move || {
                while clock.now() < deadline {
                    clock.park_until(Some(deadline));
                }
                clock.now()
            })
        };
        clock.advance(Duration::from_secs(2));
        clock.advance(Duration::from_secs(3));
        assert!(sleeper.join().unwrap() >= deadline);
    }

    #[test]
    fn system_clock_returns_at_once_for_a_past_deadline() {
        let clock = SystemClock;
        let past = clock.now();
        clock.park_until(Some(past));
        assert!(clock.now() >= past);
    }
}
