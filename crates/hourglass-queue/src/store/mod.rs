//! Durable storage of tasks, behind a trait so that the next backend (Redis)
//! slots in beside the embedded one.

mod committer;
pub(crate) mod record;
mod redb_store;

pub use committer::{Committer, Fsync, Wait};
pub use redb_store::RedbStore;

use crate::error::StoreError;
use crate::model::Task;

/// One change to the stored tasks.
#[derive(Debug, Clone)]
pub enum Mutation {
    /// Insert or replace the task.
    Put(Task),
    /// Remove the task with this id (absent is fine).
    Delete(u64),
    /// Ids below this have been handed out: never hand them out again. The
    /// store keeps the largest it was given.
    NextId(u64),
}

/// A place tasks survive restarts in. Implementations apply a batch
/// atomically: after a crash, either all of a batch is there or none of it.
pub trait Store: Send + Sync + 'static {
    /// Calls `visit` with every stored task, in id order, and returns the
    /// largest [`Mutation::NextId`] stored (0 if none).
    ///
    /// # Errors
    /// [`StoreError::Corrupt`] for a record that does not decode; the caller
    /// must refuse to start rather than guess.
    fn load(&self, visit: &mut dyn FnMut(Task)) -> Result<u64, StoreError>;

    /// Applies `batch` atomically. With `durable`, it is on stable storage
    /// (fsync) when this returns; without, it may be lost by a crash or a power
    /// loss until the next durable apply or [`sync`](Store::sync).
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
