//! Schedules: what a backend that runs them offers.

use async_trait::async_trait;

use crate::error::QueueError;
use crate::schedule::{NewSchedule, ScheduleInfo};

/// One page of the schedules, by name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchedulePage {
    /// The schedules, in name order.
    pub schedules: Vec<ScheduleInfo>,
    /// The name to list after for the next page; `None` when this one is the last.
    pub next: Option<Box<str>>,
}

/// Named rules that enqueue a task at each occurrence (see
/// [`Schedule`](crate::Schedule)).
#[async_trait]
pub trait Schedules: Send + Sync {
    /// Creates or replaces the schedule `name`; returns it as stored, and
    /// whether it is new. A replaced schedule starts again from now: its
    /// next occurrence is the first after now, and after the last one the
    /// version it replaces ran (which may have run one since the request
    /// came in).
    ///
    /// # Errors
    /// [`QueueError::Invalid`] (a bad name, expression or time zone, or a
    /// rule that never fires), [`QueueError::PayloadTooLarge`],
    /// [`QueueError::TooManySchedules`], [`QueueError::OverMemoryBudget`],
    /// [`QueueError::Storage`].
    async fn put_schedule(&self, name: &str, new: NewSchedule) -> Result<(ScheduleInfo, bool), QueueError>;

    /// Pauses (`true`) or resumes the schedule `name`. A paused schedule
    /// enqueues nothing; resumed, the occurrences it missed meanwhile go to
    /// its misfire policy. Pausing a paused one, or resuming a running one,
    /// changes nothing.
    ///
    /// # Errors
    /// [`QueueError::ScheduleNotFound`], [`QueueError::Storage`].
    async fn pause_schedule(&self, name: &str, paused: bool) -> Result<ScheduleInfo, QueueError>;

    /// The schedule `name` with its next occurrences.
    ///
    /// # Errors
    /// [`QueueError::ScheduleNotFound`], [`QueueError::Invalid`] for a malformed name.
    async fn schedule(&self, name: &str) -> Result<ScheduleInfo, QueueError>;

    /// A page of the schedules, in name order, after `after`.
    ///
    /// # Errors
    /// [`QueueError::Invalid`] for a limit out of 1 to
    /// [`SCHEDULE_LIST_MAX`](crate::limits::SCHEDULE_LIST_MAX).
    async fn schedules(&self, after: Option<&str>, limit: usize) -> Result<SchedulePage, QueueError>;

    /// Deletes the schedule `name`; tasks it enqueued stay.
    ///
    /// # Errors
    /// [`QueueError::ScheduleNotFound`], [`QueueError::Storage`].
    async fn delete_schedule(&self, name: &str) -> Result<(), QueueError>;
}
