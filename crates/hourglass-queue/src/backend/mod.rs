//! The seam every backend implements, cut by capability: [`Tasks`] (tasks
//! and claims), [`Schedules`], [`QueueAdmin`] (pausing a queue, deleting its
//! dead) and [`Stats`]; a [`Backend`] is all of them but schedules, which it
//! offers through [`Backend::as_schedules`] when it runs them.
//!
//! The HTTP server, the beanstalkd front and the CLI use nothing else, so a
//! backend whose data several nodes share slots in without either changing.
//! What a backend lacks is visible in its type (a backend without schedules
//! does not implement [`Schedules`]), not discovered at run time.
//!
//! What the contract asks of an implementation, so that the server can stay
//! the same over one node's disk or a store shared by many (the conformance
//! kit, feature `kit`, checks it):
//! - **Ids come from the backend**, unique and never reused, not from a node's
//!   memory.
//! - **A lease fences out a stale holder**: every claim makes a new
//!   [`Lease`](crate::Lease); ack, nack and extend with any other one fail
//!   with [`QueueError::StaleLease`](crate::QueueError::StaleLease) and change
//!   nothing.
//! - **Long-poll wake-ups come from the backend**: a claim with a `wait_ms`
//!   returns as soon as a task of the queue is due, whichever node made it due.
//! - **A 2xx is durable**: an operation returns `Ok` only once its change is as
//!   durable as the backend's mode promises, and no other request sees the
//!   change before that. A failed write leaves no trace.
//! - **Bounded**: listings return at most [`LIST_MAX`](crate::limits::LIST_MAX)
//!   tasks a page, claims at most [`CLAIM_MAX`](crate::limits::CLAIM_MAX).

mod admin;
mod schedules;
mod stats;
mod tasks;

pub use admin::QueueAdmin;
pub use schedules::{Expect, SchedulePage, Schedules};
pub use stats::Stats;
pub use tasks::{Claim, Cursor, ListRequest, Page, Tasks};

/// A whole backend: tasks and claims, queue administration and counts, and
/// schedules if it runs them.
pub trait Backend: Tasks + QueueAdmin + Stats {
    /// The backend's schedules; `None` for a backend that does not run them
    /// (the server answers their routes with 501 `unsupported`).
    fn as_schedules(&self) -> Option<&dyn Schedules> {
        None
    }

    /// Why the store cannot be reached now (its address and the error), if
    /// it cannot: requests then fail with
    /// [`QueueError::StoreUnavailable`](crate::QueueError::StoreUnavailable)
    /// until it answers again. `None` for a store that is always at hand (a
    /// node's own disk).
    fn store_unavailable(&self) -> Option<String> {
        None
    }

    /// Stops handing out tasks and accepting writes, and wakes every waiting
    /// claim. Writes already accepted still complete.
    fn close(&self);
}
