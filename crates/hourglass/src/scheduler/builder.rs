//! Configuration of a [`Scheduler`].

use std::sync::Arc;
use std::time::Duration;

use super::error::BuildError;
use super::Scheduler;
use crate::clock::{Clock, SystemClock};
use crate::repeat::MissedRuns;
use crate::wall_clock::{SystemWallClock, WallClock};
use crate::wheel::Wheel;

/// What happens when jobs come due faster than the workers run them and the
/// pool's queue is full.
///
/// In every case the driver never blocks: due jobs that find no room stay in
/// the wheel (still cancellable, counted in [`Stats::due_backlog`](crate::Stats))
/// and are handed over in due order as workers free up. The policies differ in
/// what they do to *producers* while that backlog is long.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum OverloadPolicy {
    /// Producers are not affected; the backlog is bounded by `max_pending`.
    #[default]
    Queue,
    /// While `max_backlog` due jobs wait, `schedule` fails fast with
    /// [`ScheduleError::Overloaded`](crate::ScheduleError::Overloaded).
    Reject,
    /// While `max_backlog` due jobs wait, each `schedule` call first runs the
    /// oldest due job on the caller's thread, so producers slow down by helping.
    CallerRuns,
}

/// Builds a [`Scheduler`]; made by [`Scheduler::builder`].
///
/// # Example
/// ```
/// use std::time::Duration;
/// use hourglass::{OverloadPolicy, Scheduler};
///
/// let scheduler = Scheduler::builder()
///     .workers(4)
///     .tick(Duration::from_millis(1))
///     .max_pending(1_000_000)
///     .overload(OverloadPolicy::Reject)
///     .build()
///     .unwrap();
/// # drop(scheduler);
/// ```
#[derive(Debug, Clone)]
pub struct Builder {
    pub(crate) config: Config,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) wall_clock: Arc<dyn WallClock>,
    #[cfg(feature = "tokio")]
    pub(crate) runtime: Option<tokio::runtime::Handle>,
}

#[derive(Debug, Clone)]
pub(crate) struct Config {
    pub(crate) workers: usize,
    pub(crate) queue_capacity: usize,
    pub(crate) tick: Duration,
    pub(crate) max_pending: usize,
    pub(crate) overload: OverloadPolicy,
    pub(crate) max_backlog: usize,
    pub(crate) missed_runs: MissedRuns,
    pub(crate) thread_name: String,
}

impl Builder {
    /// The most worker threads.
    pub const MAX_WORKERS: usize = 1024;
    /// The largest pool queue.
    pub const MAX_QUEUE_CAPACITY: usize = 1 << 20;
    /// The pool queue's default capacity: enough that the driver rarely waits.
    pub const DEFAULT_QUEUE_CAPACITY: usize = 4096;
    /// The finest tick.
    pub const MIN_TICK: Duration = Duration::from_micros(1);
    /// The coarsest tick.
    pub const MAX_TICK: Duration = Duration::from_secs(60);
    /// The default tick, as tokio's timer.
    pub const DEFAULT_TICK: Duration = Duration::from_millis(1);
    /// The default cap on pending jobs.
    pub const DEFAULT_MAX_PENDING: usize = 1 << 25;
    /// The default backlog at which `Reject` and `CallerRuns` start acting.
    pub const DEFAULT_MAX_BACKLOG: usize = 1 << 16;

    pub(crate) fn new() -> Self {
        let workers = std::thread::available_parallelism().map_or(2, usize::from).min(Self::MAX_WORKERS);
        Builder {
            config: Config {
                workers,
                queue_capacity: Self::DEFAULT_QUEUE_CAPACITY,
                tick: Self::DEFAULT_TICK,
                max_pending: Self::DEFAULT_MAX_PENDING,
                overload: OverloadPolicy::default(),
                max_backlog: Self::DEFAULT_MAX_BACKLOG,
                missed_runs: MissedRuns::default(),
                thread_name: "hourglass".to_owned(),
            },
            clock: Arc::new(SystemClock),
            wall_clock: Arc::new(SystemWallClock),
            #[cfg(feature = "tokio")]
            runtime: None,
        }
    }

    /// The calendar that [`schedule_cron`](crate::Scheduler::schedule_cron)
    /// reads occurrences against (default: the system's). Tests give a
    /// [`ManualClock`](crate::ManualClock), which is both clocks at once, or a
    /// [`ManualWallClock`](crate::ManualWallClock) to step it apart.
    pub fn wall_clock(mut self, clock: impl WallClock) -> Self {
        self.wall_clock = Arc::new(clock);
        self
    }

    /// Worker threads that run due jobs (default: one per core), 1 to
    /// [`MAX_WORKERS`](Builder::MAX_WORKERS).
    pub fn workers(mut self, workers: usize) -> Self {
        self.config.workers = workers;
        self
    }

    /// Due jobs queued for the workers at most (default
    /// [`DEFAULT_QUEUE_CAPACITY`](Builder::DEFAULT_QUEUE_CAPACITY)); past it,
    /// the [`OverloadPolicy`] applies.
    pub fn queue_capacity(mut self, capacity: usize) -> Self {
        self.config.queue_capacity = capacity;
        self
    }

    /// The wheel's resolution (default 1 ms): jobs start at the first tick
    /// boundary at or after their due time, never before.
    pub fn tick(mut self, tick: Duration) -> Self {
        self.config.tick = tick;
        self
    }

    /// The time source (default [`SystemClock`]); tests pass a
    /// [`ManualClock`](crate::ManualClock).
    pub fn clock(mut self, clock: impl Clock) -> Self {
        self.clock = Arc::new(clock);
        self
    }

    /// Jobs pending at most; `schedule` past it returns
    /// [`ScheduleError::Full`](crate::ScheduleError::Full).
    pub fn max_pending(mut self, max_pending: usize) -> Self {
        self.config.max_pending = max_pending;
        self
    }

    /// What producers feel when due jobs outrun the workers (default
    /// [`OverloadPolicy::Queue`]).
    pub fn overload(mut self, policy: OverloadPolicy) -> Self {
        self.config.overload = policy;
        self
    }

    /// The due backlog at which [`OverloadPolicy::Reject`] and
    /// [`OverloadPolicy::CallerRuns`] act.
    pub fn max_backlog(mut self, max_backlog: usize) -> Self {
        self.config.max_backlog = max_backlog;
        self
    }

    /// What repeating jobs do about missed occurrences (default [`MissedRuns::Skip`]).
    pub fn missed_runs(mut self, missed_runs: MissedRuns) -> Self {
        self.config.missed_runs = missed_runs;
        self
    }

    /// Prefix of the threads' names (default `hourglass`).
    pub fn thread_name(mut self, name: impl Into<String>) -> Self {
        self.config.thread_name = name.into();
        self
    }

    /// The tokio runtime that `async` jobs are spawned on.
    #[cfg(feature = "tokio")]
    pub fn tokio_handle(mut self, handle: tokio::runtime::Handle) -> Self {
        self.runtime = Some(handle);
        self
    }

    /// Checks the settings and starts the driver and the workers.
    ///
    /// # Errors
    /// [`BuildError::Invalid`] for a setting out of range, [`BuildError::Spawn`]
    /// if a thread could not be started.
    pub fn build(self) -> Result<Scheduler, BuildError> {
        self.config.validate()?;
        Scheduler::start(self)
    }
}

fn check<T: PartialOrd + std::fmt::Debug>(setting: &'static str, value: T, min: T, max: T) -> Result<(), BuildError> {
    if value < min || value > max {
        return Err(BuildError::Invalid { setting, message: format!("{value:?} is not within {min:?} ..= {max:?}") });
    }
    Ok(())
}

impl Config {
    fn validate(&self) -> Result<(), BuildError> {
        check("workers", self.workers, 1, Builder::MAX_WORKERS)?;
        check("queue_capacity", self.queue_capacity, 1, Builder::MAX_QUEUE_CAPACITY)?;
        check("tick", self.tick, Builder::MIN_TICK, Builder::MAX_TICK)?;
        check("max_pending", self.max_pending, 1, Wheel::<()>::MAX_ENTRIES)?;
        check("max_backlog", self.max_backlog, 1, usize::MAX)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn out_of_range_settings_are_named() {
        let error = Builder::new().workers(0).build().unwrap_err();
        assert!(error.to_string().contains("`workers`"), "{error}");
        let error = Builder::new().tick(Duration::from_nanos(10)).build().unwrap_err();
        assert!(error.to_string().contains("`tick`"), "{error}");
        let error = Builder::new().queue_capacity(0).build().unwrap_err();
        assert!(matches!(error, BuildError::Invalid { setting: "queue_capacity", .. }));
        let error = Builder::new().max_pending(0).build().unwrap_err();
        assert!(matches!(error, BuildError::Invalid { setting: "max_pending", .. }));
    }
}
