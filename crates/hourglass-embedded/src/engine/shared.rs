//! What the engine, its writer and its timer thread share: the state under
//! its one lock, the wake-up of requests waiting for a settlement, and the
//! wake-up of the timer thread; and the writer's side of a settlement.

use std::sync::{Arc, OnceLock};
use std::thread::Thread;

use hourglass::WallClock;
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
    /// The timer thread, woken when a deadline earlier than its sleep appears.
    pub(crate) timer_thread: OnceLock<Thread>,
}

impl Shared {
    pub(crate) fn new(state: State) -> Shared {
        Shared { state: Mutex::new(state), settled: Notify::new(), timer_thread: OnceLock::new() }
    }

    pub(crate) fn wake_timers(&self) {
        if let Some(thread) = self.timer_thread.get() {
            thread.unpark();
        }
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
        let mut timers = false;
        {
            let mut state = self.shared.state.lock();
            let now_ms = self.clock.now_ms();
            for settlement in settlements {
                timers |= state.settle(settlement, durable, now_ms);
            }
            state.debug_check();
        }
        self.shared.settled.notify_waiters();
        if timers {
            self.shared.wake_timers();
        }
    }
}
