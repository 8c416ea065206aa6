use std::fmt;
use std::time::Duration;

/// Why [`Scheduler::schedule`](crate::Scheduler::schedule) and its siblings
/// refused a job. The job is dropped, not run.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ScheduleError {
    /// The scheduler is shutting down or has shut down.
    Shutdown,
    /// `max_pending` jobs are pending already; cancel some or raise the limit
    /// with [`Builder::max_pending`](crate::Builder::max_pending).
    Full {
        /// The limit that was reached.
        max_pending: usize,
    },
    /// Under [`OverloadPolicy::Reject`](crate::OverloadPolicy::Reject): this
    /// many jobs are already due and waiting for a worker. Retry later.
    Overloaded {
        /// The limit that was reached.
        max_backlog: usize,
    },
    /// The delay is longer than [`Scheduler::MAX_DELAY`](crate::Scheduler::MAX_DELAY).
    DelayTooLong {
        /// The longest delay accepted.
        max: Duration,
    },
    /// A repeating job's period is shorter than the scheduler's tick.
    PeriodTooShort {
        /// The shortest period accepted: one tick.
        min: Duration,
    },
    /// A calendar job's expression has no occurrence after now (`0 0 30 2 *`).
    NeverFires,
    /// An `async` job was given, but the builder had no tokio runtime handle.
    #[cfg(feature = "tokio")]
    NoRuntime,
}

impl fmt::Display for ScheduleError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ScheduleError::Shutdown => f.write_str("the scheduler is shut down"),
            ScheduleError::Full { max_pending } => {
                write!(f, "the scheduler holds its maximum of {max_pending} pending jobs")
            }
            ScheduleError::Overloaded { max_backlog } => {
                write!(f, "overloaded: {max_backlog} due jobs are already waiting for a worker")
            }
            ScheduleError::DelayTooLong { max } => write!(f, "the delay is longer than the maximum of {max:?}"),
            ScheduleError::PeriodTooShort { min } => write!(f, "the period is shorter than one tick ({min:?})"),
            ScheduleError::NeverFires => f.write_str("the cron expression has no occurrence after now"),
            #[cfg(feature = "tokio")]
            ScheduleError::NoRuntime => f.write_str("no tokio runtime handle was given to the builder"),
        }
    }
}

impl std::error::Error for ScheduleError {}

/// Why [`Builder::build`](crate::Builder::build) failed.
#[derive(Debug)]
#[non_exhaustive]
pub enum BuildError {
    /// A setting is outside its allowed range.
    Invalid {
        /// The builder method whose value was refused.
        setting: &'static str,
        /// What the allowed range is.
        message: String,
    },
    /// The operating system refused to start a thread.
    Spawn(std::io::Error),
}

impl fmt::Display for BuildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BuildError::Invalid { setting, message } => write!(f, "invalid `{setting}`: {message}"),
            BuildError::Spawn(error) => write!(f, "could not start a scheduler thread: {error}"),
        }
    }
}

impl std::error::Error for BuildError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            BuildError::Spawn(error) => Some(error),
            BuildError::Invalid { .. } => None,
        }
    }
}
