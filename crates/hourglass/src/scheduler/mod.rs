//! The in-process scheduler: one driver thread that sleeps until the next
//! deadline, a [`Wheel`] behind one lock, and a bounded pool of workers.

mod builder;
mod driver;
mod error;
mod handle;
mod pool;
mod stats;
mod task;
mod timebase;

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

pub use builder::{Builder, OverloadPolicy};
pub use error::{BuildError, ScheduleError};
pub use handle::Handle;
pub use stats::{Lateness, Stats};
pub use task::TaskId;

use crate::clock::Clock;
use crate::repeat::next_occurrence;
use crate::timer_thread::{TimerHandle, TimerThread};
use crate::wall_clock::WallClock;
use crate::wheel::Wheel;
use builder::Config;
use stats::Counters;
use task::{Job, Run, Task};
use timebase::{TickClock, TimeBase};

/// Runs jobs after a delay, at an instant, or every period, on a bounded pool
/// of worker threads.
///
/// # Example
/// ```
/// use std::sync::mpsc;
/// use std::time::Duration;
/// use hourglass::Scheduler;
///
/// let scheduler = Scheduler::new();
/// let (done, finished) = mpsc::channel();
/// let id = scheduler.schedule(Duration::from_millis(10), move || done.send("fired").unwrap()).unwrap();
/// let doomed = scheduler.schedule(Duration::from_secs(3600), || unreachable!()).unwrap();
/// assert!(scheduler.cancel(doomed));
/// assert_eq!(finished.recv().unwrap(), "fired");
/// assert!(!scheduler.cancel(id)); // it has run
/// let report = scheduler.shutdown();
/// assert!(report.dropped.is_empty());
/// ```
///
/// # Implementation
///
/// Producers insert into a [`Wheel`] under one lock, which costs tens of
/// nanoseconds; they wake the driver only when their deadline is earlier than
/// the one it sleeps until. The driver, a [`TimerThread`], sleeps until the
/// wheel's next expiration (with the timer slack of its thread minimised on
/// Linux), advances the wheel, and hands due jobs to the workers through a
/// bounded queue. It never blocks on that queue: when it is full, due jobs stay in the wheel, in due
/// order and still cancellable, and the [`OverloadPolicy`] decides what
/// producers feel. A cancel and the driver taking a job both happen under the
/// lock, so a cancel that races its job coming due either wins (the job never
/// runs, `cancel` returns `true`) or loses (the job runs, `cancel` returns
/// `false`). Dropping the scheduler shuts it down.
pub struct Scheduler {
    handle: Handle,
    threads: Mutex<Option<Threads>>,
}

/// What became of the jobs when a scheduler shut down.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ShutdownReport {
    /// Jobs that were pending and will never run (dropped without running).
    pub dropped: Vec<TaskId>,
    /// Runs that started between the call and the return of the shutdown.
    pub ran: u64,
}

struct Threads {
    driver: TimerThread,
    workers: Vec<JoinHandle<()>>,
}

pub(crate) struct Shared {
    state: Mutex<State>,
    clock: Arc<dyn Clock>,
    /// What calendar jobs read their occurrences against.
    #[cfg_attr(not(feature = "cron"), allow(dead_code))]
    wall_clock: Arc<dyn WallClock>,
    time: TimeBase,
    config: Config,
    /// The driver's: it records the tick it sleeps until (none while it waits
    /// for room in the pool), and a producer with an earlier one wakes it.
    timer: TimerHandle,
    /// The driver left due jobs in the wheel for want of room in the pool.
    wants_room: AtomicBool,
    /// Clock time (ns since the origin) up to which the driver has handed out jobs.
    processed_ns: AtomicU64,
    /// Driver turns begun (counted under the state lock) and finished.
    turns_begun: AtomicU64,
    turns_done: AtomicU64,
    counters: Counters,
    idle: Idle,
    #[cfg(feature = "tokio")]
    runtime: Option<tokio::runtime::Handle>,
}

struct State {
    wheel: Wheel<Task>,
    accepting: bool,
    stop: Option<Stop>,
    cancelled: u64,
}

/// A job's due time and the clock reading it was computed from, in ns since
/// the scheduler's origin.
#[derive(Debug, Clone, Copy)]
struct Due {
    due_ns: u64,
    now_ns: u64,
}

#[derive(Debug, Clone, Copy)]
enum Stop {
    /// Hand out nothing more.
    Now,
    /// Hand out everything due up to this tick, then stop.
    DrainUntil(u64),
}

/// Wakes `wait_until_idle` callers when the driver or a worker makes progress.
#[derive(Default)]
struct Idle {
    lock: Mutex<()>,
    changed: Condvar,
    waiters: AtomicUsize,
}

impl Idle {
    fn notify(&self) {
        if self.waiters.load(Ordering::SeqCst) > 0 {
            let _guard = self.lock.lock();
            self.changed.notify_all();
        }
    }
}

impl Scheduler {
    /// The longest delay accepted: 100 years.
    pub const MAX_DELAY: Duration = Duration::from_secs(100 * 365 * 24 * 3600);

    /// How often, at most, a calendar job waiting for its occurrence looks at
    /// the wall clock again: its timer runs on the monotonic clock, so a wall
    /// clock stepped forward is noticed within this long. (One stepped back is
    /// noticed at the timer: nothing runs before its time on the wall clock.)
    #[cfg(feature = "cron")]
    pub const CALENDAR_RECHECK: Duration = Duration::from_secs(60);

    /// A scheduler with the default settings: one worker per core, a 1 ms tick,
    /// the system clock.
    ///
    /// # Panics
    /// If the operating system refuses to start its threads; use
    /// [`Scheduler::builder`] to get that as an error.
    pub fn new() -> Scheduler {
        Scheduler::builder().build().expect("could not start the scheduler")
    }

    /// A [`Builder`] to configure workers, tick, clock, limits and policies.
    pub fn builder() -> Builder {
        Builder::new()
    }

    fn start(builder: Builder) -> Result<Scheduler, BuildError> {
        let config = builder.config;
        let time = TimeBase { origin: builder.clock.now(), tick_ns: config.tick.as_nanos() as u64 };
        let (queue, receiver) = crossbeam_channel::bounded::<Run>(config.queue_capacity);
        let shared = Arc::new(Shared {
            state: Mutex::new(State { wheel: Wheel::new(), accepting: true, stop: None, cancelled: 0 }),
            clock: builder.clock,
            wall_clock: builder.wall_clock,
            time,
            timer: TimerHandle::new(),
            wants_room: AtomicBool::new(false),
            processed_ns: AtomicU64::new(0),
            turns_begun: AtomicU64::new(0),
            turns_done: AtomicU64::new(0),
            counters: Counters::new(config.workers),
            idle: Idle::default(),
            #[cfg(feature = "tokio")]
            runtime: builder.runtime,
            config,
        });
        let name = &shared.config.thread_name;
        let mut workers = Vec::with_capacity(shared.config.workers);
        for index in 0..shared.config.workers {
            let (shared, receiver) = (shared.clone(), receiver.clone());
            let worker = thread::Builder::new()
                .name(format!("{name}-worker-{index}"))
                .spawn(move || pool::work(&shared, &receiver, index))
                .map_err(BuildError::Spawn)?;
            workers.push(worker);
        }
        drop(receiver);
        let ticks = TickClock { clock: shared.clock.clone(), time };
        let turns = driver::turns(shared.clone(), queue);
        let driver =
            TimerThread::spawn(format!("{name}-driver"), &shared.timer, ticks, turns).map_err(BuildError::Spawn)?;
        Ok(Scheduler { handle: Handle { shared }, threads: Mutex::new(Some(Threads { driver, workers })) })
    }

    /// A handle for other threads and for jobs.
    pub fn handle(&self) -> Handle {
        self.handle.clone()
    }

    /// Runs `job` once, `delay` from now; a zero delay runs it as soon as possible.
    ///
    /// # Errors
    /// See [`ScheduleError`].
    pub fn schedule<F: FnOnce() + Send + 'static>(&self, delay: Duration, job: F) -> Result<TaskId, ScheduleError> {
        self.handle.schedule(delay, job)
    }

    /// Runs `job` once at `at`; an instant in the past runs it as soon as possible.
    ///
    /// # Errors
    /// See [`ScheduleError`].
    pub fn schedule_at<F: FnOnce() + Send + 'static>(&self, at: Instant, job: F) -> Result<TaskId, ScheduleError> {
        self.handle.schedule_at(at, job)
    }

    /// Runs `job` every `period`, first one period from now, at fixed rate: the
    /// n-th run is due at `start + n * period`, however long runs take. Runs
    /// never overlap; missed ones follow [`MissedRuns`](crate::MissedRuns).
    ///
    /// # Errors
    /// See [`ScheduleError`].
    pub fn schedule_every<F: FnMut() + Send + 'static>(
        &self,
        period: Duration,
        job: F,
    ) -> Result<TaskId, ScheduleError> {
        self.handle.schedule_every(period, job)
    }

    /// Runs `job` at every occurrence of `cron` on the builder's
    /// [`wall_clock`](Builder::wall_clock), never two runs at once.
    ///
    /// Occurrences follow the wall clock, and daylight-saving transitions
    /// follow the rule in [`Cron`](crate::Cron)'s module. A job never runs
    /// before its occurrence by the wall clock, even if that clock is stepped
    /// back; if it is stepped forward, the job runs within
    /// [`CALENDAR_RECHECK`](Scheduler::CALENDAR_RECHECK). Occurrences missed
    /// (the process stalled, or the previous run was still going) are skipped
    /// and counted in [`Stats::skipped`](crate::Stats); the one that came due
    /// runs, late.
    ///
    /// # Example
    /// ```
    /// use hourglass::{Cron, Scheduler};
    ///
    /// let scheduler = Scheduler::new();
    /// let report = Cron::new("0 9 * * MON-FRI", "Europe/Berlin").unwrap();
    /// scheduler.schedule_cron(report, || println!("good morning, Berlin")).unwrap();
    /// ```
    ///
    /// # Errors
    /// [`ScheduleError::NeverFires`] if `cron` has no occurrence after now;
    /// otherwise as [`Scheduler::schedule`].
    #[cfg(feature = "cron")]
    pub fn schedule_cron<F: FnMut() + Send + 'static>(
        &self,
        cron: crate::Cron,
        job: F,
    ) -> Result<TaskId, ScheduleError> {
        self.handle.schedule_cron(cron, job)
    }

    /// Stops the job from running (a repeating job: from running again).
    /// Returns `false` if the id is unknown, has run, was cancelled, or is stale.
    pub fn cancel(&self, id: TaskId) -> bool {
        self.handle.cancel(id)
    }

    /// Moves a pending job to `delay` from now. `Ok(false)` if the id is unknown,
    /// has run, was cancelled, or is stale.
    ///
    /// # Errors
    /// [`ScheduleError::DelayTooLong`].
    pub fn reschedule(&self, id: TaskId, delay: Duration) -> Result<bool, ScheduleError> {
        self.handle.reschedule(id, delay)
    }

    /// Moves a pending job to `at`. As [`reschedule`](Scheduler::reschedule).
    ///
    /// # Errors
    /// [`ScheduleError::DelayTooLong`].
    pub fn reschedule_at(&self, id: TaskId, at: Instant) -> Result<bool, ScheduleError> {
        self.handle.reschedule_at(id, at)
    }

    /// A snapshot of the counters and the lateness percentiles.
    pub fn stats(&self) -> Stats {
        self.handle.stats()
    }

    /// Whether the scheduler has stopped accepting jobs.
    pub fn is_shutdown(&self) -> bool {
        self.handle.is_shutdown()
    }

    /// Blocks until every job due by the clock's current time has finished, or
    /// `timeout` of real time passed; returns whether it got there. With a
    /// [`ManualClock`](crate::ManualClock), this is how a test waits for what
    /// an `advance` set off.
    pub fn wait_until_idle(&self, timeout: Duration) -> bool {
        self.handle.wait_until_idle(timeout)
    }

    /// Stops accepting jobs, lets jobs already handed to workers finish, and
    /// drops every other pending job, due or not, without running it. Returns
    /// the dropped ids. Calling it again returns an empty report.
    pub fn shutdown(&self) -> ShutdownReport {
        self.stop(Stop::Now)
    }

    /// Stops accepting jobs, keeps running every job due up to `until` (waiting
    /// for the clock to get there if need be), then shuts down as
    /// [`shutdown`](Scheduler::shutdown). With `until` = now, it drains the
    /// backlog of due jobs and drops the rest.
    pub fn shutdown_drain(&self, until: Instant) -> ShutdownReport {
        let shared = &self.handle.shared;
        let until_tick = shared.time.tick_at_or_after(shared.time.ns_at(until));
        self.stop(Stop::DrainUntil(until_tick))
    }

    fn stop(&self, stop: Stop) -> ShutdownReport {
        let Some(threads) = self.threads.lock().take() else {
            return ShutdownReport::default();
        };
        let shared = &self.handle.shared;
        let fired_before = shared.counters.fired();
        {
            let mut state = shared.state.lock();
            state.accepting = false;
            state.stop = Some(stop);
        }
        shared.timer.wake();
        // The driver runs no jobs, so it finishes promptly; dropping its end of
        // the queue lets the workers finish what they were handed and exit.
        let _ = threads.driver.join();
        let dropped: Vec<_> = shared.state.lock().wheel.drain().collect();
        let ids = dropped.iter().map(|(key, _)| TaskId::from_key(*key)).collect();
        drop(dropped); // outside the lock: a job's captures may call back into us
        let current = thread::current().id();
        for worker in threads.workers {
            if worker.thread().id() != current {
                let _ = worker.join();
            }
        }
        shared.idle.notify();
        ShutdownReport { dropped: ids, ran: shared.counters.fired() - fired_before }
    }
}

impl Default for Scheduler {
    fn default() -> Self {
        Scheduler::new()
    }
}

impl Drop for Scheduler {
    fn drop(&mut self) {
        self.shutdown();
    }
}

impl std::fmt::Debug for Scheduler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Scheduler").field("config", &self.handle.shared.config).finish_non_exhaustive()
    }
}

impl Shared {
    #[inline]
    fn now_ns(&self) -> u64 {
        self.time.ns_at(self.clock.now())
    }

    /// When a job `delay` from now is due, and now (both ns since the origin):
    /// the clock is read once per call.
    fn due_after(&self, delay: Duration) -> Result<Due, ScheduleError> {
        if delay > Scheduler::MAX_DELAY {
            return Err(ScheduleError::DelayTooLong { max: Scheduler::MAX_DELAY });
        }
        let now_ns = self.now_ns();
        Ok(Due { due_ns: now_ns + delay.as_nanos() as u64, now_ns })
    }

    fn due_at(&self, at: Instant) -> Result<Due, ScheduleError> {
        let now = self.clock.now();
        if at.saturating_duration_since(now) > Scheduler::MAX_DELAY {
            return Err(ScheduleError::DelayTooLong { max: Scheduler::MAX_DELAY });
        }
        Ok(Due { due_ns: self.time.ns_at(at), now_ns: self.time.ns_at(now) })
    }

    /// The wheel tick for a job: a due time that has passed maps to tick 0,
    /// which the wheel expires at once.
    #[inline]
    fn tick_for(&self, due: Due) -> u64 {
        if due.due_ns <= due.now_ns {
            0
        } else {
            self.time.tick_at_or_after(due.due_ns)
        }
    }

    fn insert(self: &Arc<Self>, due: Due, job: Job) -> Result<TaskId, ScheduleError> {
        self.insert_armed(due.due_ns, due, job)
    }

    /// Inserts a job due at `due_ns` whose timer is armed at `armed`: the
    /// same time, or earlier for a calendar job that looks at the wall clock
    /// again before its occurrence.
    fn insert_armed(self: &Arc<Self>, due_ns: u64, armed: Due, job: Job) -> Result<TaskId, ScheduleError> {
        let now_ns = armed.now_ns;
        let tick = self.tick_for(armed);
        let config = &self.config;
        let mut state = self.state.lock();
        if !state.accepting {
            return Err(ScheduleError::Shutdown);
        }
        if state.wheel.len() >= config.max_pending {
            return Err(ScheduleError::Full { max_pending: config.max_pending });
        }
        let backlog = state.wheel.expired_len();
        if config.overload == OverloadPolicy::Reject && backlog >= config.max_backlog {
            return Err(ScheduleError::Overloaded { max_backlog: config.max_backlog });
        }
        let key = state
            .wheel
            .insert(tick, Task { due_ns, job })
            .map_err(|_| ScheduleError::Full { max_pending: Wheel::<()>::MAX_ENTRIES })?;
        drop(state);
        self.timer.wake_if_earlier(tick);
        if config.overload == OverloadPolicy::CallerRuns && backlog >= config.max_backlog {
            self.run_one_due_on_caller(now_ns);
        }
        Ok(TaskId::from_key(key))
    }

    fn move_to(&self, id: TaskId, due: Due) -> bool {
        let (due_ns, tick) = (due.due_ns, self.tick_for(due));
        let key = id.key();
        let mut state = self.state.lock();
        let Some(task) = state.wheel.get_mut(key) else {
            return false;
        };
        task.due_ns = due_ns;
        state.wheel.reset(key, tick);
        drop(state);
        self.timer.wake_if_earlier(tick);
        true
    }

    /// Takes up to `room` due jobs out of the wheel into `out`, re-arming
    /// repeating ones at their next occurrence.
    fn take_due(&self, state: &mut State, now_ns: u64, room: usize, out: &mut Vec<Run>) {
        let now_ns = now_ns.max(state.wheel.elapsed().saturating_mul(self.time.tick_ns));
        let mut skipped = 0;
        while out.len() < room {
            let Some(key) = state.wheel.peek_expired() else { break };
            let task = state.wheel.get_mut(key).expect("an expired key is live");
            #[cfg(feature = "cron")]
            if matches!(task.job, Job::Calendar { .. }) {
                skipped += self.take_calendar(state, key, now_ns, out);
                continue;
            }
            let Job::Every(repeat) = &task.job else {
                let task = state.wheel.remove(key).expect("an expired key is live");
                out.push(Run { due_ns: task.due_ns, job: task.job });
                continue;
            };
            let repeat = repeat.clone();
            let due_ns = task.due_ns;
            let (next_ns, missed) = next_occurrence(due_ns, now_ns, repeat.period_ns, repeat.missed);
            task.due_ns = next_ns;
            skipped += missed;
            state.wheel.reset(key, self.time.tick_at_or_after(next_ns));
            if repeat.running.swap(true, Ordering::AcqRel) {
                skipped += 1; // the previous run is still going: never overlap
            } else {
                out.push(Run { due_ns, job: Job::Every(repeat) });
            }
        }
        if skipped > 0 {
            self.counters.skipped.fetch_add(skipped, Ordering::Relaxed);
        }
    }

    /// A calendar job whose timer expired: runs it into `out` if its
    /// occurrence has come by the wall clock, and re-arms it at the next one
    /// (or at the recheck, whichever is first). Returns the occurrences
    /// skipped (counted up to [`CALENDAR_MISSED_COUNTED_MAX`]).
    #[cfg(feature = "cron")]
    fn take_calendar(&self, state: &mut State, key: crate::Key, now_ns: u64, out: &mut Vec<Run>) -> u64 {
        /// Missed occurrences are counted one by one, under the lock: at most this many.
        const CALENDAR_MISSED_COUNTED_MAX: usize = 1_000;
        let wall_us = self.wall_clock.now_us();
        let wall_ms = wall_us / 1_000;
        let recheck_ns = now_ns.saturating_add(Scheduler::CALENDAR_RECHECK.as_nanos() as u64);
        let ns_at = |at_ms: u64| timebase::ns_at_wall_ms(now_ns, wall_us, at_ms);
        let task = state.wheel.get_mut(key).expect("an expired key is live");
        let Job::Calendar { calendar, at_ms } = &mut task.job else { unreachable!("only calendar jobs come here") };
        let occurrence_ms = *at_ms;
        if wall_us < occurrence_ms.saturating_mul(1_000) {
            // Early by the wall clock: a recheck, or the clock stepped back.
            task.due_ns = ns_at(occurrence_ms);
            let tick = self.time.tick_at_or_after(task.due_ns.min(recheck_ns));
            state.wheel.reset(key, tick);
            return 0;
        }
        let calendar = calendar.clone();
        let due_ns = ns_at(occurrence_ms);
        // Nearly always none was missed, and the next after the occurrence is
        // the next after now: one reading of the rule.
        let after = calendar.cron.next_after_ms(occurrence_ms);
        let (mut skipped, next) = match after {
            Some(after_ms) if after_ms <= wall_ms => {
                let missed = calendar.cron.occurrences_after_ms(occurrence_ms).take_while(|&at| at <= wall_ms);
                (missed.take(CALENDAR_MISSED_COUNTED_MAX).count() as u64, calendar.cron.next_after_ms(wall_ms))
            }
            after => (0, after),
        };
        match next {
            Some(next_ms) => {
                *at_ms = next_ms;
                task.due_ns = ns_at(next_ms);
                let tick = self.time.tick_at_or_after(task.due_ns.min(recheck_ns));
                state.wheel.reset(key, tick);
            }
            // That was the last occurrence.
            None => drop(state.wheel.remove(key)),
        }
        if calendar.running.swap(true, Ordering::AcqRel) {
            skipped += 1; // the previous run is still going: never overlap
        } else {
            out.push(Run { due_ns, job: Job::Calendar { calendar, at_ms: occurrence_ms } });
        }
        skipped
    }

    /// [`OverloadPolicy::CallerRuns`]: the producer runs the oldest due job.
    fn run_one_due_on_caller(self: &Arc<Self>, now_ns: u64) {
        let mut runs = Vec::with_capacity(1);
        {
            let mut state = self.state.lock();
            self.take_due(&mut state, now_ns, 1, &mut runs);
            self.counters.due_backlog.store(state.wheel.expired_len(), Ordering::Relaxed);
        }
        for run in runs {
            pool::execute(self, run, self.counters.shared_shard());
        }
        self.idle.notify();
    }
}
