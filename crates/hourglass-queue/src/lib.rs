//! The contract of hourglass's durable queue: tasks and their states, the
//! backend traits every store implements, the checks on what clients send,
//! the limits, the errors, and a conformance kit (feature `kit`) that every
//! backend's tests run.
//!
//! The backends live in crates of their own: `hourglass-embedded` (one node,
//! its tasks on its own disk) and `hourglass-redis` (any number of nodes on
//! one Redis or a Redis Cluster). The HTTP server and the CLI know only this
//! crate's [`Backend`].
//!
//! Schedules (a cron expression in a time zone, or a period) enqueue an
//! ordinary task at each occurrence, exactly once across restarts, with
//! stated misfire and overlap policies: see [`Schedule`].
//!
//! ```no_run
//! # async fn demo(backend: &dyn hourglass_queue::Backend) -> Result<(), hourglass_queue::QueueError> {
//! use hourglass_queue::{NewTask, RunAt};
//!
//! backend.enqueue("orders", NewTask::new(r#"{"order":42}"#, RunAt::Delay(30 * 60 * 1000))).await?;
//! for task in backend.claim("orders", 10, 30_000, 1_000).await? {
//!     backend.ack(task.id, task.lease).await?;
//! }
//! # Ok(()) }
//! ```
#![deny(missing_docs)]

mod arrival;
mod backend;
mod closed;
mod error;
#[cfg(feature = "kit")]
pub mod kit;
pub mod lateness;
pub mod limits;
pub mod long_poll;
mod model;
mod payload;
pub mod retry;
mod schedule;
mod settings;
mod stats;
mod target;
pub mod token_bucket;
pub mod validate;

pub use arrival::Arrival;
pub use backend::{
    Backend, Claim, Cursor, Expect, ListRequest, Page, QueueAdmin, SchedulePage, Schedules, Stats, Tasks,
};
pub use closed::Closed;
pub use error::{Failure, QueueError};
pub use hourglass::{ManualWallClock, SystemWallClock, WallClock};
pub use limits::Limits;
pub use model::{
    paused_at, Claimed, DeadReason, Enqueued, Lease, Nack, NewTask, Pause, RunAt, Status, Task, TaskInfo, TaskState,
};
pub use payload::Payload;
pub use schedule::{
    check as check_schedule, check_off_runtime as check_schedule_off_runtime, occurrence_key, occurrence_of, Due,
    Misfire, NewSchedule, Overlap, Rule, Schedule, ScheduleInfo, Timetable, UPCOMING,
};
pub use settings::{Flow, QueueSettings};
pub use stats::{
    LatenessMs, NodeStats, QueueStats, StorageStats, Totals, BATCH_BUCKETS, COMMIT_BUCKETS_US, LATENESS_BUCKETS_US,
};
pub use target::{Delivery, HttpMethod, HttpTarget, PushTarget};
pub use token_bucket::TokenBucket;

/// The backend traits, for code that calls a backend's methods, and what
/// their methods take: `use hourglass_queue::prelude::*;`.
pub mod prelude {
    pub use crate::{Backend, Expect, QueueAdmin, Schedules, Stats, Tasks};
}
