//! What the scheduler stores per job.

use std::fmt;
use std::num::NonZeroU64;
use std::sync::atomic::AtomicBool;

use parking_lot::Mutex;

use crate::repeat::MissedRuns;
use crate::wheel::Key;

/// Names a scheduled job, for [`cancel`](crate::Scheduler::cancel) and
/// [`reschedule`](crate::Scheduler::reschedule).
///
/// Ids are never reused while any copy of them could still be held: once its job
/// has run or been cancelled, an id stays stale forever (see [`Key`]). Zero is
/// never an id.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TaskId(NonZeroU64);

impl TaskId {
    pub(crate) fn from_key(key: Key) -> TaskId {
        // The raw key is offset by one so that id 0 never exists, like seed 003's.
        TaskId(NonZeroU64::new(key.into_raw().wrapping_add(1)).unwrap_or(NonZeroU64::MAX))
    }

    pub(crate) fn key(self) -> Key {
        Key::from_raw(self.0.get().wrapping_sub(1))
    }

    /// The id as a number, for logs and maps.
    pub fn as_u64(self) -> u64 {
        self.0.get()
    }
}

impl fmt::Debug for TaskId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "TaskId({})", self.0)
    }
}

impl fmt::Display for TaskId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

/// A job in the wheel.
pub(crate) struct Task {
    /// When the job is due, in nanoseconds since the scheduler's origin. Exact,
    /// unlike the wheel's tick, so lateness and repeats do not drift.
    pub(crate) due_ns: u64,
    pub(crate) job: Job,
}

pub(crate) type OnceFn = Box<dyn FnOnce() + Send + 'static>;

pub(crate) enum Job {
    Once(OnceFn),
    Every(std::sync::Arc<Repeat>),
    /// A calendar job, due at its occurrence `at_ms` (Unix ms) on the wall clock.
    #[cfg(feature = "cron")]
    Calendar {
        calendar: std::sync::Arc<Calendar>,
        at_ms: u64,
    },
    #[cfg(feature = "tokio")]
    Async(std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send + 'static>>),
}

/// A repeating job; shared between its wheel entry and the run in progress.
pub(crate) struct Repeat {
    pub(crate) period_ns: u64,
    pub(crate) missed: MissedRuns,
    /// Set while a run is queued or running: a repeating job never overlaps itself.
    pub(crate) running: AtomicBool,
    pub(crate) job: Mutex<Box<dyn FnMut() + Send + 'static>>,
}

/// A calendar job; shared between its wheel entry and the run in progress.
#[cfg(feature = "cron")]
pub(crate) struct Calendar {
    pub(crate) cron: crate::calendar::Cron,
    /// Set while a run is queued or running: a calendar job never overlaps itself.
    pub(crate) running: AtomicBool,
    pub(crate) job: Mutex<Box<dyn FnMut() + Send + 'static>>,
}

/// A due job on its way to a worker.
pub(crate) struct Run {
    pub(crate) due_ns: u64,
    pub(crate) job: Job,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn task_ids_round_trip_and_are_never_zero() {
        for raw in [0, 1, 42, u64::MAX - 1] {
            let key = Key::from_raw(raw);
            let id = TaskId::from_key(key);
            assert_ne!(id.as_u64(), 0);
            assert_eq!(id.key(), key);
        }
    }
}
