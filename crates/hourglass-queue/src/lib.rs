//! The durable delay queue behind `hourglass serve`: tasks that survive
//! crashes, delivered at least once under leases, fired on time by an
//! in-memory [`hourglass::Wheel`] instead of polling the database.
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use std::sync::Arc;
//! use hourglass_queue::{Engine, NewTask, Options, RedbStore, RunAt, SystemWallClock};
//!
//! let store = RedbStore::open("./hourglass-data".as_ref())?;
//! let engine = Engine::open(Box::new(store), Options::default(), Arc::new(SystemWallClock))?;
//! let _timers = engine.start_timers()?;
//! let payload = serde_json::value::RawValue::from_string(r#"{"order":42}"#.into())?;
//! let new = NewTask { payload, run_at: RunAt::Delay(30 * 60 * 1000), key: None, max_attempts: None, every_ms: None };
//! engine.enqueue("orders", new).await?;
//! for task in engine.claim("orders", 10, 30_000, 1_000).await? {
//!     engine.ack(task.id, &task.lease).await?;
//! }
//! # Ok(()) }
//! ```
#![deny(missing_docs)]

mod clock;
mod engine;
mod error;
pub mod limits;
mod model;
mod store;
mod tasks;

pub use clock::{ManualWallClock, SystemWallClock, WallClock};
pub use engine::{Claimed, Engine, Enqueued, LatenessMs, Options, QueueStats, Totals, QUEUES_MAX};
pub use error::{QueueError, StoreError};
pub use limits::Limits;
pub use model::{NewTask, RunAt, Task, TaskState, TaskView};
pub use store::{Committer, Fsync, Mutation, RedbStore, Store, Wait};
