//! Why the store failed: kept apart from [`QueueError`], which is what a
//! client is told.

use std::error::Error;
use std::fmt;

use hourglass_queue::{Failure, QueueError};

/// Why the store failed: kept apart from [`QueueError`], which is what a
/// client is told. A failure below the store (redb's, the file system's) is
/// kept as the [`source`](Error::source).
///
/// # Example
/// ```
/// use std::error::Error;
/// use hourglass_embedded::StoreError;
/// use hourglass_queue::Failure;
///
/// let io = std::io::Error::other("the device is gone");
/// let error = StoreError::Database(Failure::new("cannot write the batch", io));
/// assert_eq!(error.to_string(), "database error: cannot write the batch: the device is gone");
/// assert_eq!(error.source().unwrap().to_string(), "the device is gone");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum StoreError {
    /// The underlying database failed: what was being done, and why.
    Database(Failure),
    /// The device (or the user's quota) is full: nothing was written.
    Full(Failure),
    /// A record could not be decoded: the data directory is damaged. The
    /// server refuses to start rather than misread it.
    Corrupt {
        /// The task id of the record.
        id: u64,
        /// What was wrong.
        reason: String,
    },
    /// A snapshot does not hold a task a read asked it for: not damage, but
    /// a broken promise of the engine's (a snapshot holds every task the
    /// lock that took it let the request see).
    Missing {
        /// The task asked for.
        id: u64,
    },
    /// A schedule's record could not be decoded.
    CorruptSchedule {
        /// The schedule's name.
        name: String,
        /// What was wrong.
        reason: String,
    },
    /// A queue's settings could not be decoded.
    CorruptSettings {
        /// The queue's name.
        queue: String,
        /// What was wrong.
        reason: String,
    },
}

impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StoreError::Database(message) => write!(f, "database error: {message}"),
            StoreError::Full(message) => write!(f, "no space left: {message}"),
            StoreError::Corrupt { id, reason } => {
                write!(f, "corrupt record for task {id}: {reason}; the data directory is damaged")
            }
            StoreError::Missing { id } => write!(f, "task {id} is not in the store's snapshot (a bug)"),
            StoreError::CorruptSchedule { name, reason } => {
                write!(f, "corrupt record for schedule {name:?}: {reason}; the data directory is damaged")
            }
            StoreError::CorruptSettings { queue, reason } => {
                write!(f, "corrupt settings of queue {queue:?}: {reason}; the data directory is damaged")
            }
        }
    }
}

impl Error for StoreError {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        match self {
            StoreError::Database(failure) | StoreError::Full(failure) => failure.source(),
            StoreError::Corrupt { .. }
            | StoreError::Missing { .. }
            | StoreError::CorruptSchedule { .. }
            | StoreError::CorruptSettings { .. } => None,
        }
    }
}

/// A storage failure as a client sees it: the request changed nothing.
pub(crate) fn to_queue_error(error: &StoreError) -> QueueError {
    match error {
        StoreError::Full(_) => QueueError::DiskFull(Failure::new("the write failed", error.clone())),
        _ => QueueError::Storage(Failure::new("the store failed", error.clone())),
    }
}
