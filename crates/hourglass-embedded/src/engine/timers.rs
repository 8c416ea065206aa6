//! The timer thread: the core crate's [`TimerThread`] on the engine's
//! [`WallClock`](hourglass::WallClock), sleeping until the wheel's next
//! expiration, to the microsecond, or until woken by an earlier deadline;
//! each turn files what came due, expires leases and fires schedules
//! ([`Engine::poll_timers`]), and records, under the lock, the deadline it
//! sleeps to (so that a claim adding a later one need not wake it).

use std::sync::Arc;

use hourglass::{Next, TimerHandle, TimerThread};

use hourglass_queue::limits::CLOCK_STEP_BACK_REBASE_MS;
use hourglass_queue::TaskState;

use super::settlement::{Settlement, Why};
use super::state::schedules::Firing;
use super::Engine;

impl Engine {
    /// Starts the timer thread; it stops when the engine is closed.
    pub(crate) fn spawn_timer_thread(self: &Arc<Self>) -> std::io::Result<TimerThread> {
        let engine = self.clone();
        let turn = move |handle: &TimerHandle| {
            if engine.closed.is_closed() {
                return Next::Stop;
            }
            Next::until(engine.poll(Some(handle)).map(|ms| ms.saturating_mul(1_000)))
        };
        TimerThread::spawn("hourglass-timers", &self.shared.timers, self.clock.clone(), turn)
    }

    /// Moves the wheel to now: files tasks that came due, expires leases,
    /// fires schedules. Returns the next time (Unix ms) anything may happen;
    /// the timer thread's turn (`sleeps`) records it, under the lock, as the
    /// deadline it sleeps until.
    pub(crate) fn poll(&self, sleeps: Option<&TimerHandle>) -> Option<u64> {
        let now_ms = self.clock.now_ms();
        let mut state = self.shared.state.lock();
        let behind_ms = state.timers_ahead_ms(now_ms);
        if behind_ms >= CLOCK_STEP_BACK_REBASE_MS {
            let started = std::time::Instant::now();
            let timers = state.rebase_timers(now_ms);
            tracing::warn!(behind_ms, timers, took = ?started.elapsed(), "the wall clock stepped back: timers rebuilt");
        }
        // A smaller step back is waited out: the wheel's time never goes back,
        // and what it holds at or before its tick must not come out early.
        let waiting_out = state.timers_ahead_ms(now_ms) > 0;
        // Sent under the lock: a cancel that follows is written after these.
        // Nobody waits for the replies; the writer settles each change (and
        // if the writer is gone, the store keeps the lease, and a restart
        // makes the task due).
        let expired = if waiting_out { Vec::new() } else { state.expire(now_ms) };
        for (mutation, settlement) in expired {
            let Settlement::Change { task, why } = &settlement else { unreachable!("expiries are changes") };
            match why {
                Why::Expired => {
                    tracing::debug!(task = task.id, queue = %task.queue, "not delivered by its expiry: dead")
                }
                _ => {
                    tracing::debug!(task = task.id, queue = %task.queue, attempt = task.attempt, dead = task.state == TaskState::Dead, "a lease expired")
                }
            }
            let _ = self.send(&mut state, vec![mutation], settlement);
        }
        for firing in state.fire_schedules(now_ms, &self.limits) {
            match firing {
                Firing::Write(mutations, settlement) => {
                    let Settlement::Fire { name, ids, skipped, .. } = &settlement else { unreachable!("firings fire") };
                    if *skipped > 0 {
                        tracing::info!(schedule = %name, skipped, enqueued = ids.len(), "occurrences missed");
                    }
                    // If the writer is gone, the store keeps the schedule as
                    // it was, and a restart fires the occurrence.
                    let _ = self.send(&mut state, mutations, settlement);
                }
                Firing::Refused { name, error } => {
                    tracing::warn!(schedule = %name, %error, "a schedule's occurrence could not be enqueued; trying again");
                    state.retry_schedule(&name, now_ms);
                }
            }
        }
        state.debug_check();
        let next_ms = state.next_deadline_ms(waiting_out);
        if let Some(handle) = sleeps {
            handle.will_sleep_until(next_ms.map(|ms| ms.saturating_mul(1_000)));
        }
        drop(state);
        self.committer.help();
        next_ms
    }
}
