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

/// Which schedule a change is meant for, checked in the same step as the
/// change. A server that checks a caller's rights on a schedule's queue
/// before changing it passes the queue it saw: a schedule deleted and made
/// again meanwhile in another queue, one the caller may not touch, is then
/// not changed in its stead.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Expect<'a> {
    /// Whichever is there (for a put: or none).
    #[default]
    Any,
    /// None of the name: a put that creates.
    Absent,
    /// One of the name, enqueueing into this queue.
    InQueue(&'a str),
}

impl Expect<'_> {
    /// `Ok` if `found`, the queue of the schedule `name` there now (`None`
    /// if there is none), is what was expected.
    ///
    /// # Errors
    /// [`QueueError::ScheduleNotFound`] if one was expected and there is
    /// none; [`QueueError::Conflict`] if there is one and it is not the one
    /// expected.
    pub fn check(self, name: &str, found: Option<&str>) -> Result<(), QueueError> {
        match (self, found) {
            (Expect::Any, _) | (Expect::Absent, None) => Ok(()),
            (Expect::InQueue(queue), Some(found)) if queue == found => Ok(()),
            (Expect::InQueue(_), None) => Err(QueueError::ScheduleNotFound(name.to_owned())),
            (Expect::Absent | Expect::InQueue(_), Some(_)) => Err(QueueError::Conflict(format!(
                "schedule {name:?} changed while the request was checked: send it again"
            ))),
        }
    }
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
    /// [`QueueError::Storage`]; what [`Expect::check`] returns if the
    /// schedule there is not the one `expect` names.
    async fn put_schedule(
        &self,
        name: &str,
        new: NewSchedule,
        expect: Expect<'_>,
    ) -> Result<(ScheduleInfo, bool), QueueError>;

    /// Pauses (`true`) or resumes the schedule `name`. A paused schedule
    /// enqueues nothing; resumed, the occurrences it missed meanwhile go to
    /// its misfire policy. Pausing a paused one, or resuming a running one,
    /// changes nothing.
    ///
    /// # Errors
    /// [`QueueError::ScheduleNotFound`], [`QueueError::Storage`], and as
    /// [`Expect::check`].
    async fn pause_schedule(&self, name: &str, paused: bool, expect: Expect<'_>) -> Result<ScheduleInfo, QueueError>;

    /// The schedule `name` with its next occurrences.
    ///
    /// # Errors
    /// [`QueueError::ScheduleNotFound`], [`QueueError::Invalid`] for a malformed name.
    async fn schedule(&self, name: &str) -> Result<ScheduleInfo, QueueError>;

    /// A page of the schedules of the queues `shown` accepts, in name
    /// order, after `after`: up to `limit` of them, and `next` the last if
    /// more of them follow. A server lists a scoped token's schedules so,
    /// filtered where they are kept: no page of every schedule is read for
    /// it, and no cursor names another queue's.
    ///
    /// # Errors
    /// [`QueueError::Invalid`] for a limit out of 1 to
    /// [`SCHEDULE_LIST_MAX`](crate::limits::SCHEDULE_LIST_MAX).
    async fn schedules_where(
        &self,
        after: Option<&str>,
        limit: usize,
        shown: &(dyn for<'q> Fn(&'q str) -> bool + Sync),
    ) -> Result<SchedulePage, QueueError>;

    /// A page of every queue's schedules, as [`Schedules::schedules_where`].
    ///
    /// # Errors
    /// As [`Schedules::schedules_where`].
    async fn schedules(&self, after: Option<&str>, limit: usize) -> Result<SchedulePage, QueueError> {
        self.schedules_where(after, limit, &|_| true).await
    }

    /// Deletes the schedule `name`; tasks it enqueued stay.
    ///
    /// # Errors
    /// [`QueueError::ScheduleNotFound`], [`QueueError::Storage`], and as
    /// [`Expect::check`].
    async fn delete_schedule(&self, name: &str, expect: Expect<'_>) -> Result<(), QueueError>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_change_goes_ahead_only_on_the_schedule_it_expects() {
        let changed =
            |result: Result<(), QueueError>| matches!(result, Err(QueueError::Conflict(m)) if m.contains("\"s\""));
        assert_eq!(Expect::Any.check("s", None), Ok(()));
        assert_eq!(Expect::Any.check("s", Some("q")), Ok(()));
        assert_eq!(Expect::Absent.check("s", None), Ok(()));
        assert!(changed(Expect::Absent.check("s", Some("q"))), "made meanwhile");
        assert_eq!(Expect::InQueue("q").check("s", Some("q")), Ok(()));
        assert!(changed(Expect::InQueue("q").check("s", Some("other"))), "made again in another queue");
        assert_eq!(Expect::InQueue("q").check("s", None), Err(QueueError::ScheduleNotFound("s".into())));
    }
}
