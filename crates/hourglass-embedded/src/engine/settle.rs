//! What becomes of a change once the writer has it on disk, or has failed to.
//!
//! A change that a client waits for is made in three steps: under the state
//! lock the task is hidden (or, new, inserted pending) and the change is sent
//! to the writer, in the order of the lock; the writer makes it durable; then,
//! on the writer thread and under the lock again, the change is *settled*: it
//! takes effect and becomes visible, or it is undone and leaves no trace. Only
//! then does the client hear back. Requests that touch a pending task wait for
//! its settlement, so nobody sees a change that is not durable, and no two
//! changes of one task are ever on their way at once.

use std::sync::Arc;

use hourglass::WallClock;
use parking_lot::Mutex;
use tokio::sync::Notify;

use super::schedules::Armed;
use super::state::State;
use crate::store::Settler;
use crate::store::StoreError;
use hourglass_queue::{Task, TaskState};

/// Why a task changed, for the counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Why {
    Reschedule,
    Nack,
    /// A lease ran out: the timer thread's change, which nobody waits for.
    Expire,
    /// A task was not delivered by its expiry: the timer thread's change too.
    Expired,
    Ack,
    Cancel,
}

/// A change waiting for the store.
#[derive(Debug)]
pub(crate) enum Settlement {
    /// New tasks: filed for delivery once durable, forgotten if not.
    Publish(Vec<u64>),
    /// A changed task: takes this form once durable, keeps its old one if not.
    Change { task: Task, why: Why },
    /// A removed task: gone once durable, back where it was if not.
    Remove { id: u64, why: Why },
    /// A schedule's occurrence: its new tasks published and the schedule moved
    /// to `next_ms` (having enqueued `last`) once durable; if not, the tasks
    /// forgotten and the schedule tried again later.
    Fire { name: Box<str>, next_ms: Option<u64>, last: Option<(u64, u64)>, ids: Vec<u64>, skipped: u64 },
    /// A schedule put: stored as `armed` once durable, as it was if not.
    PutSchedule(Armed),
    /// A schedule deleted: gone once durable, as it was if not.
    DeleteSchedule(Box<str>),
    /// Dead tasks deleted together: gone once durable, back if not.
    Purge(Vec<u64>),
    /// A queue paused or resumed: so once durable, as it was if not.
    PauseQueue { queue: u32, paused: bool, until_ms: Option<u64> },
}

/// What the engine and the writer share.
pub(crate) struct Shared {
    pub(crate) state: Mutex<State>,
    /// Notified after every settlement: requests waiting for a pending task
    /// look again.
    pub(crate) settled: Notify,
    /// The timer thread, woken when a deadline earlier than its sleep appears.
    pub(crate) timer_thread: std::sync::OnceLock<std::thread::Thread>,
}

impl Shared {
    pub(crate) fn wake_timers(&self) {
        if let Some(thread) = self.timer_thread.get() {
            thread.unpark();
        }
    }
}

/// The engine's side of the writer.
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
                match settlement {
                    Settlement::Publish(ids) => {
                        for id in ids {
                            if durable {
                                state.reveal(id, now_ms);
                                state.totals.enqueued += 1;
                                state.queue_of(id).enqueued += 1;
                                timers = true;
                            } else {
                                state.forget(id);
                            }
                        }
                    }
                    Settlement::Change { task, why } => {
                        if durable {
                            state.write_back(&task);
                            match why {
                                Why::Nack => state.totals.nacked += 1,
                                Why::Expire => state.totals.lease_expired += 1,
                                Why::Expired => state.totals.expired += 1,
                                Why::Ack => {
                                    state.totals.acked += 1;
                                    state.queue_of(task.id).acked += 1;
                                }
                                Why::Reschedule | Why::Cancel => {}
                            }
                            if matches!(why, Why::Nack | Why::Expire | Why::Expired) && task.state == TaskState::Dead {
                                state.totals.died += 1;
                            }
                        }
                        // Filed again, new or old: its timer may be due already.
                        state.reveal(task.id, now_ms);
                        timers = true;
                    }
                    Settlement::Fire { name, next_ms, last, ids, skipped } => {
                        if durable {
                            state.totals.enqueued += ids.len() as u64;
                            state.totals.occurrences_enqueued += ids.len() as u64;
                            state.totals.occurrences_skipped += skipped;
                            for id in ids {
                                state.reveal(id, now_ms);
                                state.queue_of(id).enqueued += 1;
                            }
                            state.schedules.fired(&name, next_ms, last);
                        } else {
                            for id in ids {
                                state.forget(id);
                            }
                            state.retry_schedule(&name, now_ms);
                        }
                        timers = true;
                    }
                    Settlement::PutSchedule(armed) => {
                        let name = armed.schedule.name.clone();
                        if durable {
                            state.schedules.reveal(&name, Some(armed), None);
                        } else {
                            state.schedules.restore(&name, None);
                        }
                        timers = true;
                    }
                    Settlement::DeleteSchedule(name) => {
                        if durable {
                            state.schedules.reveal(&name, None, None);
                        } else {
                            state.schedules.restore(&name, None);
                            timers = true;
                        }
                    }
                    Settlement::Purge(ids) => {
                        for id in ids {
                            timers |= removed(&mut state, id, Why::Cancel, durable, now_ms);
                        }
                    }
                    Settlement::PauseQueue { queue, paused, until_ms } => {
                        let q = &mut state.queues[queue as usize];
                        q.pausing = false;
                        if durable {
                            q.paused = paused;
                            q.paused_until_ms = until_ms;
                            if !paused || until_ms.is_some() {
                                // Claims waiting on it look again.
                                q.notify.notify_waiters();
                            }
                        }
                    }
                    Settlement::Remove { id, why } => timers |= removed(&mut state, id, why, durable, now_ms),
                }
            }
            state.debug_check();
        }
        self.shared.settled.notify_waiters();
        if timers {
            self.shared.wake_timers();
        }
    }
}

/// A removed task, settled: gone and counted once durable, filed again as it
/// was if not. Whether the timer thread must look again.
fn removed(state: &mut State, id: u64, why: Why, durable: bool, now_ms: u64) -> bool {
    if !durable {
        state.reveal(id, now_ms);
        return true;
    }
    match why {
        Why::Ack => {
            state.totals.acked += 1;
            state.queue_of(id).acked += 1;
        }
        Why::Cancel => state.totals.cancelled += 1,
        Why::Reschedule | Why::Nack | Why::Expire | Why::Expired => {}
    }
    state.forget(id);
    false
}
