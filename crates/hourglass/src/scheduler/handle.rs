//! The handle: how producers, other threads and jobs reach a scheduler.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use super::task::{Job, Repeat};
// Named by the docs' links always, by the code only for calendar jobs.
#[cfg_attr(not(feature = "cron"), allow(unused_imports))]
use super::Scheduler;
use super::{stats, ScheduleError, Shared, Stats, TaskId};
#[cfg(feature = "cron")]
use super::{task::Calendar, Due};

/// A cheap, cloneable reference to a [`Scheduler`], for scheduling from other
/// threads or from inside jobs. It does not keep the scheduler alive: once the
/// scheduler is shut down, every call returns [`ScheduleError::Shutdown`] or
/// `false`.
#[derive(Clone)]
pub struct Handle {
    pub(super) shared: Arc<Shared>,
}

impl std::fmt::Debug for Handle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Handle").field("shutdown", &self.is_shutdown()).finish_non_exhaustive()
    }
}

impl Handle {
    /// See [`Scheduler::schedule`].
    ///
    /// # Errors
    /// See [`ScheduleError`].
    pub fn schedule<F: FnOnce() + Send + 'static>(&self, delay: Duration, job: F) -> Result<TaskId, ScheduleError> {
        let due = self.shared.due_after(delay)?;
        self.shared.insert(due, Job::Once(Box::new(job)))
    }

    /// See [`Scheduler::schedule_at`].
    ///
    /// # Errors
    /// See [`ScheduleError`].
    pub fn schedule_at<F: FnOnce() + Send + 'static>(&self, at: Instant, job: F) -> Result<TaskId, ScheduleError> {
        let due = self.shared.due_at(at)?;
        self.shared.insert(due, Job::Once(Box::new(job)))
    }

    /// See [`Scheduler::schedule_every`].
    ///
    /// # Errors
    /// See [`ScheduleError`].
    pub fn schedule_every<F: FnMut() + Send + 'static>(
        &self,
        period: Duration,
        job: F,
    ) -> Result<TaskId, ScheduleError> {
        if period < self.shared.config.tick {
            return Err(ScheduleError::PeriodTooShort { min: self.shared.config.tick });
        }
        let due = self.shared.due_after(period)?;
        let repeat = Repeat {
            period_ns: period.as_nanos() as u64,
            missed: self.shared.config.missed_runs,
            running: AtomicBool::new(false),
            job: Mutex::new(Box::new(job)),
        };
        self.shared.insert(due, Job::Every(Arc::new(repeat)))
    }

    /// See [`Scheduler::schedule_cron`].
    ///
    /// # Errors
    /// See [`Scheduler::schedule_cron`].
    #[cfg(feature = "cron")]
    pub fn schedule_cron<F: FnMut() + Send + 'static>(
        &self,
        cron: crate::Cron,
        job: F,
    ) -> Result<TaskId, ScheduleError> {
        let wall_us = self.shared.wall_clock.now_us();
        let at_ms = cron.next_after_ms(wall_us / 1_000).ok_or(ScheduleError::NeverFires)?;
        let now_ns = self.shared.now_ns();
        let due_ns = super::timebase::ns_at_wall_ms(now_ns, wall_us, at_ms);
        // Armed no later than the recheck: the wall clock may be stepped.
        let armed_ns = due_ns.min(now_ns.saturating_add(Scheduler::CALENDAR_RECHECK.as_nanos() as u64));
        let calendar = Calendar { cron, running: AtomicBool::new(false), job: Mutex::new(Box::new(job)) };
        let job = Job::Calendar { calendar: Arc::new(calendar), at_ms };
        // The run's lateness is measured from the occurrence, not the recheck.
        self.shared.insert_armed(due_ns, Due { due_ns: armed_ns, now_ns }, job)
    }

    /// Spawns `future` on the builder's tokio runtime, `delay` from now.
    ///
    /// # Errors
    /// [`ScheduleError::NoRuntime`] without a runtime handle; otherwise as
    /// [`Scheduler::schedule`].
    #[cfg(feature = "tokio")]
    pub fn schedule_async<Fut>(&self, delay: Duration, future: Fut) -> Result<TaskId, ScheduleError>
    where
        Fut: std::future::Future<Output = ()> + Send + 'static,
    {
        if self.shared.runtime.is_none() {
            return Err(ScheduleError::NoRuntime);
        }
        let due = self.shared.due_after(delay)?;
        self.shared.insert(due, Job::Async(Box::pin(future)))
    }

    /// See [`Scheduler::cancel`].
    pub fn cancel(&self, id: TaskId) -> bool {
        let removed = {
            let mut state = self.shared.state.lock();
            let removed = state.wheel.remove(id.key());
            // Counted under the lock we hold anyway: a shared atomic here would
            // bounce its cache line between every producer thread.
            state.cancelled += u64::from(removed.is_some());
            removed
        };
        let cancelled = removed.is_some();
        drop(removed); // outside the lock: a job's captures may call back into us
        cancelled
    }

    /// See [`Scheduler::reschedule`].
    ///
    /// # Errors
    /// [`ScheduleError::DelayTooLong`].
    pub fn reschedule(&self, id: TaskId, delay: Duration) -> Result<bool, ScheduleError> {
        let due = self.shared.due_after(delay)?;
        Ok(self.shared.move_to(id, due))
    }

    /// See [`Scheduler::reschedule_at`].
    ///
    /// # Errors
    /// [`ScheduleError::DelayTooLong`].
    pub fn reschedule_at(&self, id: TaskId, at: Instant) -> Result<bool, ScheduleError> {
        let due = self.shared.due_at(at)?;
        Ok(self.shared.move_to(id, due))
    }

    /// See [`Scheduler::stats`].
    pub fn stats(&self) -> Stats {
        let locked = {
            let state = self.shared.state.lock();
            stats::Locked {
                pending: state.wheel.len(),
                due_backlog: state.wheel.expired_len(),
                cancelled: state.cancelled,
            }
        };
        let driver_wakeups = self.shared.turns_done.load(Ordering::Relaxed);
        self.shared.counters.snapshot(locked, driver_wakeups)
    }

    /// See [`Scheduler::is_shutdown`].
    pub fn is_shutdown(&self) -> bool {
        !self.shared.state.lock().accepting
    }

    /// See [`Scheduler::wait_until_idle`].
    pub fn wait_until_idle(&self, timeout: Duration) -> bool {
        let shared = &self.shared;
        let give_up = Instant::now() + timeout;
        let target_ns = shared.now_ns();
        // A turn that begins after this sees every job inserted before the call.
        let target_turn = shared.turns_begun.load(Ordering::SeqCst) + 1;
        let is_idle = || {
            let stopped = shared.state.lock().stop.is_some();
            stopped
                || (shared.turns_done.load(Ordering::SeqCst) >= target_turn
                    && shared.processed_ns.load(Ordering::SeqCst) >= target_ns
                    && shared.counters.due_backlog.load(Ordering::SeqCst) == 0
                    && shared.counters.in_flight() == 0)
        };
        shared.idle.waiters.fetch_add(1, Ordering::SeqCst);
        shared.timer.wake(); // so that it processes `target_ns` even if nothing is due
        let mut guard = shared.idle.lock.lock();
        let idle = loop {
            if is_idle() {
                break true;
            }
            if shared.idle.changed.wait_until(&mut guard, give_up).timed_out() {
                break is_idle();
            }
        };
        drop(guard);
        shared.idle.waiters.fetch_sub(1, Ordering::SeqCst);
        idle
    }
}
