//! Tasks and their states.

use std::sync::Arc;

use serde::Serialize;

/// A task: deliver `payload` to whoever claims queue `queue`, at `run_at_ms`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Task {
    /// Unique, made by the server, never reused.
    pub id: u64,
    /// The queue's name.
    pub queue: Arc<str>,
    /// The payload, as JSON text (validated on the way in).
    pub payload: Arc<str>,
    /// When it is due, in milliseconds since the Unix epoch.
    pub run_at_ms: u64,
    /// Deliveries so far of the current run.
    pub attempt: u32,
    /// Deliveries allowed before the task is dead.
    pub max_attempts: u32,
    /// The client's idempotency key, unique among the queue's live tasks.
    pub key: Option<Box<str>>,
    /// For a repeating task, its period.
    pub every_ms: Option<u64>,
    /// Where it is in its life.
    pub state: TaskState,
    /// When it was enqueued, in milliseconds since the Unix epoch.
    pub created_ms: u64,
}

/// The states of a task. "Due" is not a state of its own: a scheduled task whose
/// `run_at_ms` has passed is due, and waits in its queue for a claim.
///
/// ```text
/// scheduled --due--> (due) --claim--> leased --ack--> done (removed)
///     ^                                 |  \--nack or lease expiry, attempts left--> scheduled (backoff)
///     |                                 \----nack or lease expiry, none left--> dead
///     +--------------retry------------------------------------------------------ dead
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TaskState {
    /// Waiting for `run_at_ms`, or due and waiting for a claim.
    Scheduled,
    /// Handed to a consumer until `until_ms`, under a lease `token`.
    Leased {
        /// The token the consumer must show to ack, nack or extend.
        token: u64,
        /// When the lease expires and the task is redelivered.
        until_ms: u64,
    },
    /// Out of attempts: kept, listable, retryable or deletable.
    Dead,
}

impl TaskState {
    /// The state's name as the API shows it.
    pub fn name(self, due: bool) -> &'static str {
        match self {
            TaskState::Scheduled if due => "due",
            TaskState::Scheduled => "scheduled",
            TaskState::Leased { .. } => "leased",
            TaskState::Dead => "dead",
        }
    }
}

/// When a new task is due.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunAt {
    /// This many milliseconds from now.
    Delay(u64),
    /// At this Unix time in milliseconds (a time past is due at once).
    At(u64),
}

/// What a client asks to enqueue; checked by the engine.
#[derive(Debug, Clone)]
pub struct NewTask {
    /// The payload: JSON, checked by the type.
    pub payload: Box<serde_json::value::RawValue>,
    /// When it is due.
    pub run_at: RunAt,
    /// Optional idempotency key.
    pub key: Option<String>,
    /// Optional attempt limit.
    pub max_attempts: Option<u32>,
    /// Optional repeat period.
    pub every_ms: Option<u64>,
}

/// A task as the API shows it.
#[derive(Debug, Clone, Serialize)]
pub struct TaskView {
    /// See [`Task::id`].
    pub id: u64,
    /// See [`Task::queue`].
    pub queue: String,
    /// `scheduled`, `due`, `leased` or `dead`.
    pub state: &'static str,
    /// The payload.
    pub payload: Box<serde_json::value::RawValue>,
    /// See [`Task::run_at_ms`].
    pub run_at_ms: u64,
    /// See [`Task::attempt`].
    pub attempt: u32,
    /// See [`Task::max_attempts`].
    pub max_attempts: u32,
    /// See [`Task::key`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// See [`Task::every_ms`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub every_ms: Option<u64>,
    /// When the current lease ends, if leased.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lease_until_ms: Option<u64>,
    /// See [`Task::created_ms`].
    pub created_ms: u64,
}

impl Task {
    /// The task as the API shows it at `now_ms`.
    pub fn view(&self, now_ms: u64) -> TaskView {
        let lease_until_ms = match self.state {
            TaskState::Leased { until_ms, .. } => Some(until_ms),
            _ => None,
        };
        TaskView {
            id: self.id,
            queue: self.queue.to_string(),
            state: self.state.name(self.run_at_ms <= now_ms),
            payload: raw_json(&self.payload),
            run_at_ms: self.run_at_ms,
            attempt: self.attempt,
            max_attempts: self.max_attempts,
            key: self.key.as_deref().map(str::to_owned),
            every_ms: self.every_ms,
            lease_until_ms,
            created_ms: self.created_ms,
        }
    }
}

/// Payloads are checked to be JSON when they come in, so this cannot fail for
/// a stored one; a damaged one is shown as `null` rather than breaking a listing.
pub(crate) fn raw_json(text: &str) -> Box<serde_json::value::RawValue> {
    serde_json::value::RawValue::from_string(text.to_owned())
        .unwrap_or_else(|_| serde_json::value::RawValue::from_string("null".to_owned()).expect("null is JSON"))
}
