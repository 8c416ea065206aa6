//! Handing out payloads kept apart from memory.
//!
//! A payload of at most [`PAYLOAD_INLINE_MAX`](hourglass_queue::limits::PAYLOAD_INLINE_MAX)
//! bytes is kept in its task's slot and copied under the lock. A larger one
//! lives only in the store: the request notes it under the lock, takes a
//! [`Snapshot`] of the store there too, and reads it from the snapshot once
//! the lock is released. The snapshot holds every task the lock let the
//! request see: a task is filed only once its enqueue is applied, and a
//! delete of it is applied only after the lock is let go, so whatever is
//! applied meanwhile, the payload is there to read.

use crate::store::{Snapshot, Store, StoreError};
use hourglass_queue::{Payload, QueueError};

/// The payloads an answer still has to read.
pub(crate) struct Reads {
    /// (position in the answer, task id).
    wanted: Vec<(usize, u64)>,
    snapshot: Option<Box<dyn Snapshot>>,
}

impl Reads {
    pub(crate) fn new() -> Reads {
        Reads { wanted: Vec::new(), snapshot: None }
    }

    /// The payload of task `id` for item `at` of an answer: a copy of `held`
    /// if it is kept in memory, else empty until [`read`](Reads::read).
    pub(crate) fn payload(&mut self, held: Option<&[u8]>, id: u64, at: usize) -> Payload {
        match held {
            Some(payload) => payload.into(),
            None => {
                self.wanted.push((at, id));
                Payload::default()
            }
        }
    }

    /// Under the lock that found the tasks: a snapshot that holds them, if
    /// any payload is to be read.
    pub(crate) fn snapshot(&mut self, store: &dyn Store) -> Result<(), QueueError> {
        if !self.wanted.is_empty() && self.snapshot.is_none() {
            self.snapshot = Some(store.snapshot().map_err(|error| crate::store::to_queue_error(&error))?);
        }
        Ok(())
    }

    /// After the lock: reads each payload noted, and hands it to `put` with
    /// its position in the answer.
    ///
    /// # Errors
    /// The store's, a payload found damaged among them.
    pub(crate) fn read(self, put: impl FnMut(usize, Payload)) -> Result<(), QueueError> {
        match self.read_sound(put)?.into_iter().next() {
            Some(damaged) => Err(damaged.queue_error()),
            None => Ok(()),
        }
    }

    /// [`read`](Reads::read), but a payload found damaged is not an error:
    /// it is left out of `put` and returned, for a claim to make its task
    /// dead rather than hand it out.
    ///
    /// # Errors
    /// The store's, but for damage.
    pub(crate) fn read_sound(self, mut put: impl FnMut(usize, Payload)) -> Result<Vec<Damaged>, QueueError> {
        let Some(mut snapshot) = self.snapshot else {
            debug_assert!(self.wanted.is_empty(), "payloads to read without a snapshot");
            return Ok(Vec::new());
        };
        let mut damaged = Vec::new();
        for (at, id) in self.wanted {
            match snapshot.payload(id) {
                Ok(payload) => put(at, payload),
                Err(StoreError::Corrupt { reason, .. }) => damaged.push(Damaged { at, id, reason }),
                Err(error) => return Err(crate::store::to_queue_error(&error)),
            }
        }
        Ok(damaged)
    }
}

/// A payload found damaged as it was read.
pub(crate) struct Damaged {
    /// Its position in the answer.
    pub(crate) at: usize,
    /// Its task.
    pub(crate) id: u64,
    /// What was found.
    pub(crate) reason: String,
}

impl Damaged {
    /// The damage as the store reported it.
    pub(crate) fn error(&self) -> StoreError {
        StoreError::Corrupt { id: self.id, reason: self.reason.clone() }
    }

    /// The damage as a request that cannot go on reports it.
    pub(crate) fn queue_error(&self) -> QueueError {
        crate::store::to_queue_error(&self.error())
    }
}
