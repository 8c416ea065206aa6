//! hourglass's embedded backend: the durable delay queue of one node. Tasks
//! live in memory, timers in an [`hourglass::Wheel`], and every acknowledged
//! change in a [`Store`] on this node's disk ([`RedbStore`]), so they survive
//! crashes and restarts; nothing polls a database.
//!
//! [`Engine`] implements every trait of the contract, schedules included
//! (see [`hourglass_queue::Backend`]).
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use std::sync::Arc;
//! use hourglass_embedded::{Engine, Options, RedbStore};
//! use hourglass_queue::{NewTask, RunAt, SystemWallClock, Tasks};
//!
//! let store = RedbStore::open("./hourglass-data".as_ref())?;
//! let engine = Engine::open(Box::new(store), Options::default(), Arc::new(SystemWallClock))?;
//! let _timers = engine.start_timers()?;
//! engine.enqueue("orders", NewTask::new(r#"{"order":42}"#, RunAt::Delay(30 * 60 * 1000))).await?;
//! for task in engine.claim("orders", 10, 30_000, 1_000).await? {
//!     engine.ack(task.id, task.lease).await?;
//! }
//! # Ok(()) }
//! ```
#![deny(missing_docs)]

mod engine;
mod store;

pub use engine::{Engine, OpenError, Options};
/// The timer thread [`Engine::start_timers`] starts: the core crate's.
pub use hourglass::TimerThread;
pub use store::{
    Compacted, Directory, Fsync, Loaded, LogFile, Mutation, PausedQueue, Promotion, RedbStore, Snapshot, Store,
    StoreError, StoreFile, StoreFiles,
};

/// The redb store's compaction: its limits, named. How it works, and why a
/// crash in the middle of one loses nothing, is in [`RedbStore`]'s module
/// docs and in DESIGN.md.
pub mod compaction {
    pub use crate::store::{
        COMPACT_FILE_MIN_BYTES, COMPACT_RETRY_PAUSE, COPY_STEP_BYTES, COPY_STEP_ENTRIES, COPY_SUFFIX, DIRTY_KEYS_MAX,
        FILE_PER_LIVE_MAX, FINISH_DIRTY_BYTES, FINISH_DIRTY_MAX, SYNC_STEP_BYTES, SYNC_STEP_KEYS,
    };
}

/// The relaxed mode's log (`--fsync-every-ms`): where a batch that need not
/// be durable goes before its answer, and the bounds on what waits there for
/// a durable commit. How it works is in [`RedbStore`]'s module docs.
pub mod relaxed_log {
    pub use crate::store::{APPLY_BYTES, APPLY_MUTATIONS, LOG_BYTES_MAX, LOG_FILE_NAME};
}
