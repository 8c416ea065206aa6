//! What the engine, its writer and its timer thread share: the state under
//! its one lock, the wake-up of requests waiting for a settlement, and the
//! wake-up of the timer thread; and the writer's side of a settlement.

use std::sync::Arc;

use hourglass::{TimerHandle, WallClock};
use parking_lot::Mutex;
use tokio::sync::Notify;

use super::settlement::Settlement;
use super::state::State;
use crate::store::{Settler, StoreError};

/// What the engine and the writer share.
pub(crate) struct Shared {
    pub(crate) state: Mutex<State>,
    /// Notified after every settlement: requests waiting for a pending task
    /// look again.
    pub(crate) settled: Notify,
    /// The timer thread's handle (deadlines in Unix µs, its clock's unit):
    /// woken for a deadline earlier than it sleeps until, whether a request
    /// or a settlement filed it.
    pub(crate) timers: TimerHandle,
}

impl Shared {
    pub(crate) fn new(state: State) -> Shared {
        Shared { state: Mutex::new(state), settled: Notify::new(), timers: TimerHandle::new() }
    }

    /// Wakes the timer thread if a timer at `at_ms` (Unix ms), just set under
    /// the lock, is earlier than it sleeps until.
    pub(crate) fn wake_timers_for(&self, at_ms: u64) {
        self.timers.wake_if_earlier(at_ms.saturating_mul(1_000));
    }
}

/// The engine's side of the writer: settles each change of a batch under the
/// lock, once the batch is durable or has failed.
pub(crate) struct EngineSettler {
    pub(crate) shared: Arc<Shared>,
    pub(crate) clock: Arc<dyn WallClock>,
}

impl Settler<Settlement> for EngineSettler {
    fn settle(&mut self, settlements: Vec<Settlement>, result: Result<(), &StoreError>) {
        let durable = result.is_ok();
        let next_ms = {
            let mut state = self.shared.state.lock();
            let now_ms = self.clock.now_ms();
            let mut timers = false;
            for settlement in settlements {
                timers |= state.settle(settlement, durable, now_ms);
            }
            state.debug_check();
            // A task due now was filed ready by the settlement itself; only a
            // timer earlier than the thread sleeps until needs it awake. The
            // bound is never later than any deadline just filed, so no
            // wake-up is missed (a loose one costs a turn that finds nothing).
            if timers {
                state.next_deadline_ms(false)
            } else {
                None
            }
        };
        self.shared.settled.notify_waiters();
        if let Some(next_ms) = next_ms {
            self.shared.wake_timers_for(next_ms);
        }
    }
}
