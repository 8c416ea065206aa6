use std::error::Error;
use std::fmt;
use std::sync::Arc;

/// Why the engine refused a request. Each variant has a stable [`code`](QueueError::code)
/// that the HTTP API shows clients.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum QueueError {
    /// A field is missing, malformed or out of range; the message says which.
    Invalid(String),
    /// The payload is larger than the configured limit.
    PayloadTooLarge {
        /// The payload's size.
        bytes: usize,
        /// The limit.
        max: usize,
    },
    /// No task with that id (never made, done, or cancelled).
    NotFound(u64),
    /// No schedule with that name.
    ScheduleNotFound(String),
    /// The engine holds its maximum number of schedules.
    TooManySchedules {
        /// The limit.
        max: usize,
    },
    /// The lease token is not the task's current one: the lease expired and the
    /// task was redelivered, or it was acked already. Nothing changed.
    StaleLease(u64),
    /// The task is not in a state that allows this (e.g. rescheduling a leased task).
    Conflict(String),
    /// The engine holds its maximum number of tasks.
    TooManyTasks {
        /// The limit.
        max: usize,
    },
    /// Admitting the tasks would take the engine past its memory budget.
    OverMemoryBudget {
        /// Bytes held now.
        held: u64,
        /// Bytes the request would add.
        adding: u64,
        /// The budget.
        max: u64,
    },
    /// Admitting the tasks would take the store past its disk budget.
    OverDiskBudget {
        /// Bytes stored now, as the store estimates them.
        stored: u64,
        /// Bytes the request would add.
        adding: u64,
        /// The budget.
        max: u64,
    },
    /// The disk is full: the write failed and the request changed nothing.
    DiskFull(Failure),
    /// The store failed; the request changed nothing, unless the failure
    /// says the answer was lost (then the change may or may not stand).
    Storage(Failure),
    /// The store cannot be reached (no connection to it): the failure says
    /// whether the request may have reached it before the connection was
    /// lost. The backend comes back by itself once the store answers.
    StoreUnavailable(Failure),
    /// The engine is shutting down.
    ShuttingDown,
    /// This backend does not offer the operation; the message says which does.
    Unsupported(String),
}

impl QueueError {
    /// A short, stable, machine-readable code.
    pub fn code(&self) -> &'static str {
        match self {
            QueueError::Invalid(_) => "invalid",
            QueueError::PayloadTooLarge { .. } => "payload_too_large",
            QueueError::NotFound(_) | QueueError::ScheduleNotFound(_) => "not_found",
            QueueError::TooManySchedules { .. } => "too_many_schedules",
            QueueError::StaleLease(_) => "stale_lease",
            QueueError::Conflict(_) => "conflict",
            QueueError::TooManyTasks { .. } => "too_many_tasks",
            QueueError::OverMemoryBudget { .. } => "over_memory_budget",
            QueueError::OverDiskBudget { .. } => "over_disk_budget",
            QueueError::DiskFull(_) => "disk_full",
            QueueError::Storage(_) => "storage",
            QueueError::StoreUnavailable(_) => "store_unavailable",
            QueueError::ShuttingDown => "shutting_down",
            QueueError::Unsupported(_) => "unsupported",
        }
    }
}

impl fmt::Display for QueueError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            QueueError::Invalid(message) => f.write_str(message),
            QueueError::PayloadTooLarge { bytes, max } => {
                write!(f, "payload is {bytes} bytes, over the limit of {max}")
            }
            QueueError::NotFound(id) => write!(f, "no task {id}"),
            QueueError::ScheduleNotFound(name) => write!(f, "no schedule {name:?}"),
            QueueError::TooManySchedules { max } => write!(f, "the server holds its maximum of {max} schedules"),
            QueueError::StaleLease(id) => write!(f, "the lease on task {id} is not current"),
            QueueError::Conflict(message) => f.write_str(message),
            QueueError::TooManyTasks { max } => write!(f, "the server holds its maximum of {max} tasks"),
            QueueError::OverMemoryBudget { held, adding, max } => write!(
                f,
                "the server holds {held} bytes of tasks in memory; {adding} more would pass its memory budget of {max}"
            ),
            QueueError::OverDiskBudget { stored, adding, max } => {
                write!(f, "the store holds {stored} bytes of tasks; {adding} more would pass its disk budget of {max}")
            }
            QueueError::DiskFull(message) => write!(f, "the disk is full, nothing was changed: {message}"),
            QueueError::Storage(message) => write!(f, "storage failed: {message}"),
            QueueError::StoreUnavailable(message) => write!(f, "the store cannot be reached: {message}"),
            QueueError::ShuttingDown => f.write_str("the server is shutting down"),
            QueueError::Unsupported(what) => write!(f, "not supported: {what}"),
        }
    }
}

impl Error for QueueError {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        match self {
            QueueError::DiskFull(failure) | QueueError::Storage(failure) | QueueError::StoreUnavailable(failure) => {
                failure.source()
            }
            _ => None,
        }
    }
}

/// A failure below a backend (its database, the disk, Redis), with the
/// error that caused it as its [`source`](Error::source). Shared, so that a
/// [`QueueError`] stays cheap to clone; two are equal when they read the same.
#[derive(Clone)]
pub struct Failure {
    what: Arc<str>,
    cause: Option<Arc<dyn Error + Send + Sync>>,
}

impl Failure {
    /// `what` failed because of `cause`: shown as `what: cause`.
    pub fn new(what: impl Into<Arc<str>>, cause: impl Error + Send + Sync + 'static) -> Failure {
        Failure { what: what.into(), cause: Some(Arc::new(cause)) }
    }

    /// A failure with nothing below it, such as an answer that makes no sense.
    pub fn msg(what: impl Into<Arc<str>>) -> Failure {
        Failure { what: what.into(), cause: None }
    }

    /// The error that caused it.
    pub fn source(&self) -> Option<&(dyn Error + 'static)> {
        self.cause.as_deref().map(|cause| cause as &(dyn Error + 'static))
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.cause {
            Some(cause) => write!(f, "{}: {cause}", self.what),
            None => f.write_str(&self.what),
        }
    }
}

impl fmt::Debug for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Failure").field("what", &self.what).field("cause", &self.cause).finish()
    }
}

impl PartialEq for Failure {
    fn eq(&self, other: &Failure) -> bool {
        self.to_string() == other.to_string()
    }
}

impl Eq for Failure {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failure_keeps_its_cause() {
        let io = std::io::Error::other("the device is gone");
        let error = QueueError::Storage(Failure::new("cannot write the task", io));
        assert_eq!(error.to_string(), "storage failed: cannot write the task: the device is gone");
        assert_eq!(error.source().map(ToString::to_string).as_deref(), Some("the device is gone"));
        assert_eq!(error.clone(), error);
        assert!(QueueError::Storage(Failure::msg("odd")).source().is_none());
    }
}
