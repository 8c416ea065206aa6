//! Settling a change under the lock: it takes effect once durable, or is
//! undone and leaves no trace. The one place a change is made visible or
//! undone: the writer settles what it wrote, and a sender settles (as not
//! durable) what the writer never took.

use super::State;
use crate::engine::settlement::{Settlement, Why};
use hourglass_queue::TaskState;

impl State {
    /// Settles one change: made visible and counted if `durable`, undone if
    /// not. Returns whether a timer or a schedule may have been filed earlier
    /// than the timer thread sleeps until (the settler then compares the next
    /// deadline with it).
    pub(crate) fn settle(&mut self, settlement: Settlement, durable: bool, now_ms: u64) -> bool {
        match settlement {
            Settlement::Publish(ids) => {
                let published = !ids.is_empty() && durable;
                for id in ids {
                    if durable {
                        self.reveal(id, now_ms);
                        self.totals.enqueued += 1;
                        self.queue_of(id).enqueued += 1;
                    } else {
                        self.forget(id);
                    }
                }
                published
            }
            Settlement::Change { task, why } => {
                if durable {
                    self.write_back(&task);
                    self.count_change(task.id, why, task.state == TaskState::Dead);
                }
                // Filed again, new or old: its timer may be due already.
                self.reveal(task.id, now_ms);
                true
            }
            Settlement::Fire { name, next_ms, last, ids, skipped } => {
                if durable {
                    self.totals.enqueued += ids.len() as u64;
                    self.totals.occurrences_enqueued += ids.len() as u64;
                    self.totals.occurrences_skipped += skipped;
                    for id in ids {
                        self.reveal(id, now_ms);
                        self.queue_of(id).enqueued += 1;
                    }
                    self.schedules.fired(&name, next_ms, last);
                } else {
                    for id in ids {
                        self.forget(id);
                    }
                    self.retry_schedule(&name, now_ms);
                }
                true
            }
            Settlement::PutSchedule(armed) => {
                let name = armed.schedule.name.clone();
                if durable {
                    self.schedules.reveal(&name, Some(armed), None);
                } else {
                    self.schedules.restore(&name, None);
                }
                true
            }
            Settlement::DeleteSchedule(name) => {
                if durable {
                    self.schedules.reveal(&name, None, None);
                    false
                } else {
                    self.schedules.restore(&name, None);
                    true
                }
            }
            Settlement::PutSettings { queue, settings } => {
                self.settle_settings(queue, settings, durable, now_ms);
                false
            }
            Settlement::Purge(ids) => {
                let mut timers = false;
                for id in ids {
                    timers |= self.settle_removal(id, Why::Cancel, durable, now_ms);
                }
                timers
            }
            Settlement::PauseQueue { queue, paused, until_ms } => {
                let q = &mut self.queues[queue as usize];
                q.pausing = false;
                if durable {
                    q.paused = paused;
                    q.paused_until_ms = until_ms;
                    if !paused || until_ms.is_some() {
                        // Claims waiting on it look again.
                        q.notify.notify_waiters();
                    }
                }
                false
            }
            Settlement::Remove { id, why } => self.settle_removal(id, why, durable, now_ms),
        }
    }

    /// Counts a change of task `id` that is durable.
    fn count_change(&mut self, id: u64, why: Why, dead: bool) {
        match why {
            Why::Nack => self.totals.nacked += 1,
            Why::Expire => self.totals.lease_expired += 1,
            Why::Expired => self.totals.expired += 1,
            Why::Ack => {
                self.totals.acked += 1;
                self.queue_of(id).acked += 1;
            }
            Why::Reschedule | Why::Cancel | Why::Corrupt => {}
        }
        if matches!(why, Why::Nack | Why::Expire | Why::Expired | Why::Corrupt) && dead {
            self.totals.died += 1;
        }
    }

    /// A removed task, settled: gone and counted once durable, filed again as
    /// it was if not. Whether a timer may have been filed (see `settle`).
    fn settle_removal(&mut self, id: u64, why: Why, durable: bool, now_ms: u64) -> bool {
        if !durable {
            self.reveal(id, now_ms);
            return true;
        }
        match why {
            Why::Ack => {
                self.totals.acked += 1;
                self.queue_of(id).acked += 1;
            }
            Why::Cancel => self.totals.cancelled += 1,
            Why::Reschedule | Why::Nack | Why::Expire | Why::Expired | Why::Corrupt => {}
        }
        self.forget(id);
        false
    }
}
