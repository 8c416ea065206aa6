//! What the queue hands back: a value with its key and deadline.

use tokio::time::Instant;

use crate::Key;

/// A value taken from a [`DelayQueue`](super::DelayQueue), by
/// [`poll_expired`](super::DelayQueue::poll_expired) once due, or by
/// [`remove`](super::DelayQueue::remove).
#[derive(Debug)]
pub struct Expired<T> {
    pub(crate) data: T,
    pub(crate) deadline: Instant,
    pub(crate) key: Key,
}

impl<T> Expired<T> {
    /// The value.
    pub fn get_ref(&self) -> &T {
        &self.data
    }

    /// The value, mutably.
    pub fn get_mut(&mut self) -> &mut T {
        &mut self.data
    }

    /// The value, taken.
    pub fn into_inner(self) -> T {
        self.data
    }

    /// When the value was due, rounded up to the queue's millisecond.
    pub fn deadline(&self) -> Instant {
        self.deadline
    }

    /// The key the value had; it is stale now.
    pub fn key(&self) -> Key {
        self.key
    }
}
