//! Why the store failed: kept apart from [`QueueError`], which is what a
//! client is told.

use std::fmt;

use hourglass_queue::{Failure, QueueError};

/// Why the store failed: kept apart from [`QueueError`], which is what a
/// client is told.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum StoreError {
    /// The underlying database failed.
    Database(String),
    /// The device (or the user's quota) is full: nothing was written.
    Full(String),
    /// A record could not be decoded: the data directory is damaged. The
    /// server refuses to start rather than misread it.
    Corrupt {
        /// The task id of the record.
        id: u64,
        /// What was wrong.
        reason: String,
    },
    /// A schedule's record could not be decoded.
    CorruptSchedule {
        /// The schedule's name.
        name: String,
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
                write!(f, "corrupt record for task {id}: {reason}; the data directory is damaged, refusing to start")
            }
            StoreError::CorruptSchedule { name, reason } => write!(
                f,
                "corrupt record for schedule {name:?}: {reason}; the data directory is damaged, refusing to start"
            ),
        }
    }
}

impl std::error::Error for StoreError {}

/// A storage failure as a client sees it: the request changed nothing.
pub(crate) fn to_queue_error(error: &StoreError) -> QueueError {
    match error {
        StoreError::Full(_) => QueueError::DiskFull(Failure::new("the write failed", error.clone())),
        _ => QueueError::Storage(Failure::new("the store failed", error.clone())),
    }
}
