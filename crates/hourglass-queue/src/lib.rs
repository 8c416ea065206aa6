//! The durable delay queue behind `hourglass serve`: tasks that survive
//! crashes, delivered at least once under leases, fired on time by an
//! in-memory [`hourglass::Wheel`] instead of polling a database.
//!
//! Schedules (a cron expression in a time zone, or a period) enqueue an
//! ordinary task at each occurrence, exactly once across restarts, with
//! stated misfire and overlap policies: see [`Schedule`].
//!
//! The server and the CLI speak to a [`Backend`]: the queue's operations,
//! with the contract every backend keeps. [`Engine`] is the embedded one, on
//! this node's disk through a [`Store`].
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use std::sync::Arc;
//! use hourglass_queue::{Backend, Engine, NewTask, Options, RedbStore, RunAt, SystemWallClock};
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

mod backend;
mod engine;
mod error;
mod lateness;
pub mod limits;
mod model;
#[cfg(feature = "redis")]
pub mod redis;
mod retry;
mod schedule;
mod stats;
mod store;
mod validate;

pub use backend::{Backend, Cursor, ListRequest, Page, SchedulePage};
pub use engine::{Engine, Options};
pub use error::{QueueError, StoreError};
pub use hourglass::{ManualWallClock, SystemWallClock, WallClock};
pub use limits::Limits;
pub use model::{Claimed, Enqueued, Lease, Nack, NewTask, Pause, RunAt, Status, Task, TaskInfo, TaskState};
pub use schedule::{occurrence_key, Misfire, NewSchedule, Overlap, Rule, Schedule, ScheduleInfo, UPCOMING};
pub use stats::{LatenessMs, QueueStats, StorageStats, Totals, BATCH_BUCKETS, COMMIT_BUCKETS_US, LATENESS_BUCKETS_US};
pub use store::{Fsync, Loaded, Mutation, PausedQueue, RedbStore, Snapshot, Store};
