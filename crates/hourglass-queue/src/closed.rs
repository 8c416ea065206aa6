//! Whether a backend was closed: the one check every request makes first.

use std::sync::atomic::{AtomicBool, Ordering};

use crate::error::QueueError;

/// A backend's open or closed state. Closing is for good.
#[derive(Debug, Default)]
pub struct Closed(AtomicBool);

impl Closed {
    /// Closes; `true` the first time.
    pub fn close(&self) -> bool {
        !self.0.swap(true, Ordering::SeqCst)
    }

    /// Whether [`close`](Closed::close) was called.
    pub fn is_closed(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }

    /// `Ok` while open; [`QueueError::ShuttingDown`] once closed.
    ///
    /// # Errors
    /// [`QueueError::ShuttingDown`].
    pub fn check(&self) -> Result<(), QueueError> {
        if self.is_closed() {
            Err(QueueError::ShuttingDown)
        } else {
            Ok(())
        }
    }
}
