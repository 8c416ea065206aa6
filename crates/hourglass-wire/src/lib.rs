//! The JSON of hourglass's HTTP API, in one place: the body of every request
//! and of every answer, each type both [`Serialize`](serde::Serialize) and
//! [`Deserialize`](serde::Deserialize), and the text forms of leases,
//! cursors, states and schedule policies ([`text`]). The server answers
//! with these types and reads requests into them; clients (the
//! `hourglass-client` crate, the CLI) send and read the same types, so the
//! format is spelled once.
//!
//! ```
//! use hourglass_wire::{ClaimedTask, Lease, LeaseRequest, NewTask};
//! use serde_json::value::to_raw_value;
//!
//! // What a producer sends to POST /v1/queues/{queue}/tasks ...
//! let task = NewTask { delay_ms: Some(1_000), ..NewTask::new(to_raw_value(&"hello").unwrap()) };
//! assert_eq!(serde_json::to_string(&task).unwrap(), r#"{"payload":"hello","delay_ms":1000}"#);
//!
//! // ... what a consumer reads from a claim, and the ack it sends back.
//! let claimed: ClaimedTask = serde_json::from_str(
//!     r#"{"attempt":1,"id":7,"lease":"00000000000000ff","lease_until_ms":30000,"payload":"hello","queue":"q","run_at_ms":1000}"#,
//! )
//! .unwrap();
//! assert_eq!(claimed.lease, Lease(255));
//! assert_eq!(serde_json::to_string(&LeaseRequest::ack(claimed.lease)).unwrap(), r#"{"lease":"00000000000000ff"}"#);
//! ```
//!
//! # The format
//! - Requests are strict: an unknown field is refused (`deny_unknown_fields`).
//!   Answers are read leniently, so that a client keeps working when a
//!   server adds a field.
//! - Optional fields of answers are left out when they do not apply, except
//!   the few shown as `null` (a queue's `oldest_due_ms`, the budgets in
//!   [`Totals`], a [`Point`]'s lateness, [`Nodes`]' `nodes` where one
//!   process holds everything).
//! - Payloads are bytes: JSON passed through as the text it is
//!   ([`RawValue`](serde_json::value::RawValue)) in `payload`, any other
//!   bytes in `payload_base64` ([`payload`] has the rule).
//! - Times are Unix milliseconds (`_ms`), durations milliseconds too.
//! - A text form a request carries (a lease, a state, a cursor, a policy) is
//!   a plain string in the request type, read by the server with [`text`]'s
//!   parse functions: a wrong one is the request's 400 `invalid`, with a
//!   message that says what is expected.
#![deny(missing_docs)]
#![forbid(unsafe_code)]

mod claim;
mod delivery;
mod error;
mod health;
mod listing;
mod nodes;
#[cfg(feature = "openapi")]
mod openapi;
mod overview;
pub mod payload;
mod queue;
mod schedule;
mod settings;
mod task;
pub mod text;

pub use claim::{ClaimRequest, Claimed, ClaimedTask};
pub use delivery::{Ack, AckResult, AckResults, Acked, Acks, Extended, LeaseRequest};
pub use error::{ErrorBody, ErrorDetail};
pub use health::{Health, Whoami};
pub use listing::{ListQuery, TaskPage};
pub use nodes::{Node, Nodes};
pub use overview::{Overview, OverviewQuery, OverviewQueue, Point, Rates};
pub use queue::{DeletedDead, Lateness, Queue, Queues, Totals};
pub use schedule::{NewSchedule, Run, Schedule, SchedulePage, SchedulesQuery};
pub use settings::{HttpTarget, PushTarget, QueueSettings};
pub use task::{Enqueued, EnqueuedBatch, NewTask, NewTasks, Reschedule, Task};
pub use text::{Cursor, DeadReason, Lease, Misfire, Overlap, ParseError, State};
