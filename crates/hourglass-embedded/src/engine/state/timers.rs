//! Time under the lock: the wheel moved to now (tasks that came due filed
//! ready, expired leases and expiries hidden until their next form is
//! durable), rebuilt when the wall clock steps back, and the next deadline.

use std::num::NonZeroU64;

use hourglass::{Key, Wheel};

use super::slot::{Phase, NO_TIMER};
use super::{fail_attempt, State, LEASE_EXPIRED};
use crate::engine::settlement::{Settlement, Why};
use crate::store::Mutation;
use hourglass_queue::DeadReason;
use hourglass_queue::{Arrival, TaskState};

impl State {
    /// How far the wheel's time is ahead of `now_ms`: more than zero when
    /// the wall clock stepped back.
    pub(crate) fn timers_ahead_ms(&self, now_ms: u64) -> u64 {
        self.wheel.elapsed().saturating_sub(now_ms)
    }

    /// The wall clock stepped back: moves every timer to a new wheel that
    /// stands at `now_ms`, each at its deadline, so that none expires before
    /// its time on the clock as it now reads. Returns how many timers moved.
    pub(crate) fn rebase_timers(&mut self, now_ms: u64) -> usize {
        let mut wheel = Wheel::new();
        wheel.advance(now_ms);
        let old = std::mem::replace(&mut self.wheel, wheel);
        let ids: Vec<u64> = self.tasks.ids().collect();
        for id in ids {
            let slot = self.tasks.get_mut(&id).expect("a listed task");
            if slot.timer == NO_TIMER {
                continue;
            }
            let deadline = old.deadline(Key::from_raw(slot.timer)).expect("a task's timer is in the wheel");
            let wheel_id = NonZeroU64::new(id).expect("ids start at 1");
            slot.timer = self.wheel.insert(deadline, wheel_id).expect("below the wheel's capacity").into_raw();
        }
        self.wheel.len()
    }

    /// Advances the wheel: files tasks that came due, and hides each task whose
    /// lease expired until its next form (scheduled again after a backoff, or
    /// dead) is durable. Returns those writes, to be sent under this lock.
    pub(crate) fn expire(&mut self, now_ms: u64) -> Vec<(Mutation, Settlement)> {
        self.wheel.advance(now_ms);
        let mut writes = Vec::new();
        while let Some(expired) = self.wheel.pop_expired() {
            let id = expired.value.get();
            let Some(slot) = self.tasks.get_mut(&id) else { continue };
            debug_assert!(!slot.pending, "task {id} had a timer while pending");
            slot.timer = NO_TIMER;
            match slot.phase {
                Phase::Scheduled if self.expiries.get(&id).is_some_and(|&at| at <= now_ms) => {
                    // Not delivered by its expiry: dead, not late.
                    let mut task = self.task(id);
                    task.state = TaskState::Dead;
                    task.dead_reason = DeadReason::Expired;
                    self.hide(id);
                    writes.push((Mutation::Update(task.clone()), Settlement::Change { task, why: Why::Expired }));
                }
                Phase::Scheduled => {
                    let (queue, run_at_ms) = (slot.queue, slot.run_at_ms);
                    let place = self.place(id, run_at_ms);
                    self.make_ready(queue, place);
                    if let Some(&expires_at_ms) = self.expiries.get(&id) {
                        let wheel_id = NonZeroU64::new(id).expect("ids start at 1");
                        let timer = self.wheel.insert(expires_at_ms, wheel_id).expect("below the wheel's capacity");
                        self.tasks.get_mut(&id).expect("a known task").timer = timer.into_raw();
                    }
                }
                Phase::Leased => {
                    let mut task = self.task(id);
                    // A backoff from the tick that found the lease over.
                    fail_attempt(&mut task, Arrival::at_us(now_ms * 1_000), None);
                    task.last_error = Some(LEASE_EXPIRED.into());
                    // The wheel has consumed the timer; unfile sees none.
                    self.hide(id);
                    writes.push((Mutation::Update(task.clone()), Settlement::Change { task, why: Why::Expire }));
                }
                Phase::Dead => {}
            }
        }
        writes
    }

    /// The next time (Unix ms) anything may happen: a timer's or a
    /// schedule's; the wheel's own time while a step back is `waiting_out`.
    pub(crate) fn next_deadline_ms(&self, waiting_out: bool) -> Option<u64> {
        let schedule_ms = self.schedules.next_due();
        let wheel_ms = if waiting_out { Some(self.wheel.elapsed()) } else { self.wheel.next_expiration() };
        match (wheel_ms, schedule_ms) {
            (Some(wheel_ms), Some(schedule_ms)) => Some(wheel_ms.min(schedule_ms)),
            (wheel_ms, schedule_ms) => wheel_ms.or(schedule_ms),
        }
    }
}
