//! The node's wheel: one timer per shard it holds, at the shard's next
//! deadline (a due time or a lease end) on this node's clock, and a thread
//! that sleeps on the clock to the microsecond until the wheel's next
//! expiration, then wakes the shard's timer task. A tokio timer, at the same
//! place, rounds up to its next millisecond and waits for a busy runtime: a
//! delivery through the shards was 2 to 4 ms late when idle, and 8 ms at the
//! median at 500 tasks/s (`BENCHMARKS.md`).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

use hourglass::{Key, SystemWallClock, WallClock, Wheel};
use parking_lot::Mutex;
use tokio::sync::Notify;

#[derive(Default)]
struct State {
    wheel: Wheel<u16>,
    /// Each shard's timer in the wheel, and what to wake.
    armed: HashMap<u16, (Key, Arc<Notify>)>,
    /// When the thread will look at the wheel next (local Unix ms).
    wakes_at: u64,
}

/// See the [module](self) documentation.
#[derive(Default)]
pub(crate) struct Alarms {
    state: Mutex<State>,
    thread: OnceLock<std::thread::Thread>,
    closed: AtomicBool,
}

impl Alarms {
    /// Starts the thread; it stops at [`close`](Alarms::close).
    pub(crate) fn start(self: &Arc<Self>) -> std::io::Result<()> {
        let alarms = self.clone();
        std::thread::Builder::new().name("hourglass-redis-timers".into()).spawn(move || {
            let _ = alarms.thread.set(std::thread::current());
            while !alarms.closed.load(Ordering::SeqCst) {
                let next_ms = alarms.ring(SystemWallClock.now_ms());
                SystemWallClock.park_until_us(next_ms.map(|ms| ms.saturating_mul(1_000)));
            }
        })?;
        Ok(())
    }

    /// Wakes the shards whose time has come; returns the next expiration.
    fn ring(&self, now_ms: u64) -> Option<u64> {
        let mut woken = Vec::new();
        let next = {
            let mut state = self.state.lock();
            state.wheel.advance(now_ms);
            while let Some(expired) = state.wheel.pop_expired() {
                if let Some((_, wake)) = state.armed.remove(&expired.value) {
                    woken.push(wake);
                }
            }
            let next = state.wheel.next_expiration();
            state.wakes_at = next.unwrap_or(u64::MAX);
            next
        };
        for wake in woken {
            wake.notify_one();
        }
        next
    }

    /// Sets `shard`'s timer to `at_ms` (local Unix ms), in place of any it
    /// had; `wake` is notified then.
    pub(crate) fn set(&self, shard: u16, at_ms: u64, wake: Arc<Notify>) {
        let mut state = self.state.lock();
        if let Some((key, _)) = state.armed.remove(&shard) {
            state.wheel.remove(key);
        }
        let Ok(key) = state.wheel.insert(at_ms, shard) else { return };
        state.armed.insert(shard, (key, wake));
        if at_ms < state.wakes_at {
            state.wakes_at = at_ms;
            drop(state);
            if let Some(thread) = self.thread.get() {
                thread.unpark();
            }
        }
    }

    /// Forgets `shard`'s timer.
    pub(crate) fn unset(&self, shard: u16) {
        let mut state = self.state.lock();
        if let Some((key, _)) = state.armed.remove(&shard) {
            state.wheel.remove(key);
        }
    }

    pub(crate) fn close(&self) {
        self.closed.store(true, Ordering::SeqCst);
        if let Some(thread) = self.thread.get() {
            thread.unpark();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_shard_s_timer_wakes_it_once_at_its_time() {
        let alarms = Alarms::default();
        let (a, b) = (Arc::new(Notify::new()), Arc::new(Notify::new()));
        alarms.set(1, 1_000, a.clone());
        alarms.set(2, 2_000, b.clone());
        alarms.set(1, 1_500, a.clone());
        assert_eq!(alarms.ring(1_200), Some(1_500), "moved, not doubled");
        assert_eq!(alarms.ring(1_500), Some(2_000));
        alarms.unset(2);
        assert_eq!(alarms.ring(3_000), None);
        assert_eq!(alarms.state.lock().armed.len(), 0);
    }
}
