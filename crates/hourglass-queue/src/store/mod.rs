//! Durable storage of one node's tasks, behind a trait: the embedded backend
//! writes through it, in order, from one writer thread.

mod committer;
pub(crate) mod record;
mod redb_store;

pub use committer::Fsync;
pub(crate) use committer::{Committer, Reply, Settler};
pub use redb_store::RedbStore;

use crate::error::StoreError;
use crate::model::Task;

/// One change to the stored tasks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mutation {
    /// A new task and its payload.
    Insert {
        /// The task.
        task: Task,
        /// Its payload, stored once: later changes never rewrite it.
        payload: Box<str>,
    },
    /// A changed task: its record only, the payload stays as stored.
    Update(Task),
    /// Remove the task with this id and its payload (absent is fine).
    Delete(u64),
    /// Ids below this have been handed out: never hand them out again. The
    /// store keeps the largest it was given.
    NextId(u64),
}

/// A place tasks survive restarts in. Implementations apply a batch
/// atomically: after a crash, either all of a batch is there or none of it.
pub trait Store: Send + Sync + 'static {
    /// Calls `visit` with every stored task and its payload, in id order, and
    /// returns the largest [`Mutation::NextId`] stored (0 if none).
    ///
    /// # Errors
    /// [`StoreError::Corrupt`] for a record that does not decode; the caller
    /// must refuse to start rather than guess.
    fn load(&self, visit: &mut dyn FnMut(Task, Box<str>)) -> Result<u64, StoreError>;

    /// Applies `batch` atomically, in order. With `durable`, it is on stable
    /// storage (fsync) when this returns; without, it may be lost by a crash
    /// or a power loss until the next durable apply or [`sync`](Store::sync).
    ///
    /// # Errors
    /// [`StoreError::Database`] if nothing could be written.
    fn apply(&self, batch: &[Mutation], durable: bool) -> Result<(), StoreError>;

    /// Makes everything applied so far durable.
    ///
    /// # Errors
    /// [`StoreError::Database`].
    fn sync(&self) -> Result<(), StoreError>;
}
