//! The node's wheel: one timer per shard it holds, at the shard's next
//! deadline (a due time or a lease end) on this node's clock, and a
//! [`TimerThread`] that sleeps on the clock to the microsecond until the
//! wheel's next expiration, then wakes the shard's timer task. A tokio timer,
//! at the same place, rounds up to its next millisecond and waits for a busy
//! runtime: a delivery through the shards was 2 to 4 ms late when idle, and
//! 8 ms at the median at 500 tasks/s (`BENCHMARKS.md`).
//!
//! The same thread ends the **holds** of tasks a fire handed a claim ahead
//! of their due time (`handover.rs`): each to the microsecond, as the few
//! that are under way at once are kept in a list of their own.
//!
//! The wheel and its lock are this module's; the thread, its parking, its
//! early wake-up (only for an earlier deadline than it sleeps until) and its
//! stop are the core crate's building block.

use std::collections::HashMap;
use std::sync::Arc;

use hourglass::{Key, Next, TimerHandle, TimerThread, Wheel};
use hourglass_queue::{SystemWallClock, WallClock};
use parking_lot::Mutex;
use tokio::sync::Notify;

/// What a shard's timer rings for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ring {
    /// The shard's next deadline: its fire has work.
    Deadline,
    /// A sweep, with no deadline before it: its fire most likely has none.
    Sweep,
}

/// A shard's timer in the wheel.
struct Armed {
    key: Key,
    at_ms: u64,
    ring: Ring,
    wake: Arc<Notify>,
}

/// The wheel of shard deadlines (local Unix ms), and the holds.
#[derive(Default)]
struct State {
    wheel: Wheel<u16>,
    /// Each shard's timer.
    armed: HashMap<u16, Armed>,
    /// Holds under way: when each ends (local Unix µs), and what it wakes.
    holds: Vec<(u64, Arc<Notify>)>,
}

impl State {
    /// Takes the shards and holds whose time has come at `now_us`: what to
    /// wake.
    fn ring(&mut self, now_us: u64) -> Vec<Arc<Notify>> {
        let mut woken = Vec::new();
        self.holds.retain(|(until_us, wake)| {
            let ends = *until_us <= now_us;
            if ends {
                woken.push(wake.clone());
            }
            !ends
        });
        self.wheel.advance(now_us / 1_000);
        while let Some(expired) = self.wheel.pop_expired() {
            if let Some(armed) = self.armed.remove(&expired.value) {
                woken.push(armed.wake);
            }
        }
        woken
    }

    /// Forgets `shard`'s timer.
    fn unset(&mut self, shard: u16) {
        if let Some(armed) = self.armed.remove(&shard) {
            self.wheel.remove(armed.key);
        }
    }

    /// When the thread must next wake (local Unix µs).
    fn next_us(&self) -> Option<u64> {
        let shards = self.wheel.next_expiration().map(|ms| ms.saturating_mul(1_000));
        let holds = self.holds.iter().map(|&(until_us, _)| until_us).min();
        shards.into_iter().chain(holds).min()
    }

    /// Sets `shard`'s timer, in place of any it had.
    fn set(&mut self, shard: u16, at_ms: u64, ring: Ring, wake: Arc<Notify>) {
        self.unset(shard);
        if let Ok(key) = self.wheel.insert(at_ms, shard) {
            self.armed.insert(shard, Armed { key, at_ms, ring, wake });
        }
    }
}

/// See the [module](self) documentation.
pub(crate) struct Alarms {
    state: Arc<Mutex<State>>,
    handle: TimerHandle,
    /// Stopped and joined when the alarms are dropped.
    _thread: TimerThread,
}

impl Alarms {
    /// The alarms and their thread, on this machine's clock; the thread stops
    /// at [`close`](Alarms::close), or when they are dropped.
    pub(crate) fn start() -> std::io::Result<Alarms> {
        Alarms::start_on(SystemWallClock)
    }

    /// The alarms, their thread sleeping on `clock`.
    fn start_on<C: WallClock + Clone>(clock: C) -> std::io::Result<Alarms> {
        let state = Arc::new(Mutex::new(State::default()));
        let handle = TimerHandle::new();
        let turn = {
            let (state, clock) = (state.clone(), clock.clone());
            move |handle: &TimerHandle| {
                let (woken, next_us) = {
                    let mut state = state.lock();
                    let woken = state.ring(clock.now_us());
                    let next_us = state.next_us();
                    handle.will_sleep_until(next_us);
                    (woken, next_us)
                };
                for wake in woken {
                    wake.notify_one();
                }
                Next::until(next_us)
            }
        };
        let thread = TimerThread::spawn("hourglass-redis-timers", &handle, clock, turn)?;
        Ok(Alarms { state, handle, _thread: thread })
    }

    /// Sets `shard`'s timer to `at_ms` (local Unix ms), for `ring`, in place
    /// of any it had; `wake` is notified then.
    pub(crate) fn set(&self, shard: u16, at_ms: u64, ring: Ring, wake: Arc<Notify>) {
        self.state.lock().set(shard, at_ms, ring, wake);
        self.handle.wake_if_earlier(at_ms.saturating_mul(1_000));
    }

    /// Wakes `wake` once this machine's clock reads `until_us` (local Unix
    /// µs): a hold's end.
    pub(crate) fn hold(&self, until_us: u64, wake: Arc<Notify>) {
        self.state.lock().holds.push((until_us, wake));
        self.handle.wake_if_earlier(until_us);
    }

    /// How many shards' timers ring for a deadline by `at_ms` (local Unix
    /// ms), not yet rung. Sweeps are not counted: they rarely fire anything.
    pub(crate) fn deadlines_by(&self, at_ms: u64) -> usize {
        let state = self.state.lock();
        state.armed.values().filter(|armed| armed.ring == Ring::Deadline && armed.at_ms <= at_ms).count()
    }

    /// Forgets `shard`'s timer.
    pub(crate) fn unset(&self, shard: u16) {
        self.state.lock().unset(shard);
    }

    /// Stops the thread (without waiting for it).
    pub(crate) fn close(&self) {
        self.handle.close();
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use hourglass::ManualWallClock;

    use super::*;

    #[test]
    fn a_shard_s_timer_rings_once_at_its_time() {
        let mut state = State::default();
        let (a, b) = (Arc::new(Notify::new()), Arc::new(Notify::new()));
        for (shard, at_ms, wake) in [(1, 1_000, &a), (2, 2_000, &b), (1, 1_500, &a)] {
            state.set(shard, at_ms, Ring::Deadline, wake.clone());
        }
        assert!(state.ring(1_200_000).is_empty(), "moved, not doubled");
        assert_eq!(state.ring(1_500_000).len(), 1);
        assert_eq!(state.next_us(), Some(2_000_000));
        state.unset(2);
        assert!(state.ring(3_000_000).is_empty());
        assert_eq!((state.armed.len(), state.next_us()), (0, None));
    }

    #[test]
    fn a_hold_ends_at_its_microsecond_before_the_shards_millisecond() {
        let mut state = State::default();
        let (shard, hold) = (Arc::new(Notify::new()), Arc::new(Notify::new()));
        state.set(1, 2, Ring::Deadline, shard);
        state.holds.push((1_250, hold));
        assert_eq!(state.next_us(), Some(1_250), "the hold first");
        assert!(state.ring(1_249).is_empty(), "not a microsecond early");
        assert_eq!(state.ring(1_250).len(), 1);
        assert_eq!(state.next_us(), Some(2_000), "then the shard");
        assert_eq!(state.ring(2_000).len(), 1);
        assert_eq!(state.next_us(), None);
    }

    #[tokio::test]
    async fn the_thread_wakes_a_shard_when_the_clock_reaches_its_time() {
        use futures_util::FutureExt;

        let clock = ManualWallClock::at_ms(1_000);
        let alarms = Alarms::start_on(clock.clone()).unwrap();
        let (early, late, sweep) = (Arc::new(Notify::new()), Arc::new(Notify::new()), Arc::new(Notify::new()));
        alarms.set(2, 5_000, Ring::Deadline, late.clone());
        alarms.set(3, 1_200, Ring::Sweep, sweep.clone());
        // Earlier than the thread sleeps until: it is woken to sleep less.
        alarms.set(1, 1_500, Ring::Deadline, early.clone());
        let by = |at_ms| alarms.deadlines_by(at_ms);
        assert_eq!((by(1_000), by(1_500), by(5_000)), (0, 1, 2), "the sweep is not counted");
        let within = Duration::from_secs(10);
        clock.advance_ms(500);
        tokio::time::timeout(within, early.notified()).await.expect("shard 1 woken at 1 500 ms");
        assert!(late.notified().now_or_never().is_none(), "shard 2 not before 5 000 ms");
        assert_eq!(alarms.deadlines_by(5_000), 1, "shard 1 rang: its fire counts itself");
        clock.advance_ms(3_500);
        tokio::time::timeout(within, late.notified()).await.expect("shard 2 woken at 5 000 ms");
        alarms.close();
    }

    #[test]
    fn the_thread_stops_when_the_alarms_are_dropped_unclosed() {
        let alarms = Alarms::start_on(ManualWallClock::at_ms(1)).unwrap();
        let handle = alarms.handle.clone();
        drop(alarms);
        assert!(handle.is_closed(), "stopped and joined");
    }
}
