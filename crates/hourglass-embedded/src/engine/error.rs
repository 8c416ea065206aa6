//! Why the engine could not open: the setup's error, kept apart from a
//! request's ([`QueueError`](hourglass_queue::QueueError)) and from the
//! store's ([`StoreError`]), which it may hold as its source.

use std::fmt;

use crate::store::StoreError;

/// Why the engine could not open. Nothing was changed in the store.
#[derive(Debug)]
#[non_exhaustive]
pub enum OpenError {
    /// The store could not be read.
    Unreadable(StoreError),
    /// A stored record does not decode: the data is damaged, and the engine
    /// refuses to start rather than guess. The error names the record.
    Corrupt(StoreError),
    /// The store holds tasks or pauses of more queues than the engine
    /// allows ([`QUEUES_MAX`](hourglass_queue::limits::QUEUES_MAX)).
    TooManyQueues {
        /// The most queues the engine holds.
        max: usize,
    },
    /// The writer thread could not be started.
    Writer(std::io::Error),
}

impl From<StoreError> for OpenError {
    fn from(error: StoreError) -> OpenError {
        match error {
            StoreError::Corrupt { .. } | StoreError::CorruptSchedule { .. } => OpenError::Corrupt(error),
            _ => OpenError::Unreadable(error),
        }
    }
}

impl fmt::Display for OpenError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OpenError::Unreadable(error) => write!(f, "cannot read the store: {error}"),
            OpenError::Corrupt(error) => write!(f, "refusing to start on a damaged store: {error}"),
            OpenError::TooManyQueues { max } => {
                write!(f, "the store holds more queues than the engine's limit of {max}")
            }
            OpenError::Writer(error) => write!(f, "cannot start the writer thread: {error}"),
        }
    }
}

impl std::error::Error for OpenError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            OpenError::Unreadable(error) | OpenError::Corrupt(error) => Some(error),
            OpenError::Writer(error) => Some(error),
            OpenError::TooManyQueues { .. } => None,
        }
    }
}
