//! Tasks: what a client sends to enqueue or move one, and how the API shows
//! one (`GET /v1/tasks/{id}`, listings, and the answers of nack, retry and
//! reschedule).

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use crate::settings::HttpTarget;
use crate::text::{DeadReason, State};

/// `POST /v1/queues/{queue}/tasks`: a task to enqueue. Every field may be
/// left out (the payload is then `null`); the server's defaults and limits
/// apply.
///
/// ```
/// use hourglass_wire::NewTask;
/// use serde_json::value::to_raw_value;
///
/// let task = NewTask { delay_ms: Some(30_000), ..NewTask::new(to_raw_value(&[1, 2]).unwrap()) };
/// assert_eq!(serde_json::to_string(&task).unwrap(), r#"{"payload":[1,2],"delay_ms":30000}"#);
/// ```
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct NewTask {
    /// Any JSON, passed through as it is; `null` if left out (or
    /// `payload_base64` given).
    #[serde(default = "null")]
    #[cfg_attr(feature = "openapi", schema(value_type = Value))]
    pub payload: Box<RawValue>,
    /// The payload as bytes, standard base64 with padding, in place of
    /// `payload`: for a payload that is not JSON.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub payload_base64: Option<String>,
    /// Due this long from now (0 if neither this nor `run_at_ms` is given).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub delay_ms: Option<u64>,
    /// Due at this time, Unix ms; not with `delay_ms`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run_at_ms: Option<u64>,
    /// An idempotency key: while a task with this key lives in the queue,
    /// enqueuing it again returns that task (200, not 201).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// Deliveries before it dies; 0 for no limit.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_attempts: Option<u32>,
    /// Lower first among tasks due together.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub priority: Option<u32>,
    /// The lease of each delivery when the claim does not say.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lease_ms: Option<u64>,
    /// Runs again this long after each ack: a recurring task.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub every_ms: Option<u64>,
    /// Dies if not delivered by this time, Unix ms.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expires_at_ms: Option<u64>,
    /// Dies if not delivered within this long from now; not with `expires_at_ms`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expires_after_ms: Option<u64>,
    /// A target of its own: the task is delivered by push, as this request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http: Option<HttpTarget>,
}

impl NewTask {
    /// A task whose payload is `bytes` (sent as `payload_base64`), due now,
    /// everything else the server's default.
    ///
    /// ```
    /// use hourglass_wire::NewTask;
    ///
    /// let task = NewTask::bytes(&[0xff, 0x00]);
    /// assert_eq!(serde_json::to_string(&task).unwrap(), r#"{"payload":null,"payload_base64":"/wA="}"#);
    /// ```
    pub fn bytes(bytes: &[u8]) -> NewTask {
        NewTask { payload_base64: Some(crate::payload::encode(bytes)), ..NewTask::new(null()) }
    }

    /// A task with `payload`, due now, everything else the server's default.
    pub fn new(payload: Box<RawValue>) -> NewTask {
        NewTask {
            payload,
            payload_base64: None,
            delay_ms: None,
            run_at_ms: None,
            key: None,
            max_attempts: None,
            priority: None,
            lease_ms: None,
            every_ms: None,
            expires_at_ms: None,
            expires_after_ms: None,
            http: None,
        }
    }
}

/// `POST /v1/queues/{queue}/tasks/batch`: tasks enqueued together, all or
/// none.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct NewTasks {
    /// The tasks, in order.
    pub tasks: Vec<NewTask>,
}

/// `PATCH /v1/tasks/{id}`: a new due time for a task that is not leased.
/// One of the two is required.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct Reschedule {
    /// Due this long from now.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub delay_ms: Option<u64>,
    /// Due at this time, Unix ms.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run_at_ms: Option<u64>,
}

/// The answer to an enqueue: 201 when the task is new, 200 when its key
/// named a live task already (then that task's id).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Enqueued {
    /// The task's id.
    pub id: u64,
    /// When it is due, Unix ms.
    pub run_at_ms: u64,
}

/// The answer to a batch: one [`Enqueued`] a task, in order. Its keys are in
/// alphabetical order, as the server has always sent them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct EnqueuedBatch {
    /// How many are new (the others' keys named live tasks).
    pub created: u64,
    /// Each task's answer, in the order sent.
    pub tasks: Vec<Enqueued>,
}

/// A task as the API shows it. Fields that do not apply are left out.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Task {
    /// Its id, unique in the server.
    pub id: u64,
    /// Its queue.
    pub queue: String,
    /// Its state now.
    pub state: State,
    /// Its payload as it was enqueued, if its bytes are JSON text (then exactly as sent); absent
    /// otherwise, and `payload_base64` given.
    #[serde(default, deserialize_with = "crate::payload::shown", skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<Value>))]
    pub payload: Option<Box<RawValue>>,
    /// The payload's bytes in standard base64, if they are not JSON text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub payload_base64: Option<String>,
    /// When it is (or was) due, Unix ms.
    pub run_at_ms: u64,
    /// Deliveries so far.
    pub attempt: u32,
    /// Deliveries before it dies; 0 for no limit.
    pub max_attempts: u32,
    /// Lower first among tasks due together.
    pub priority: u32,
    /// The task's own lease, if it has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lease_ms: Option<u32>,
    /// Its idempotency key.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// Its period, for a recurring task.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub every_ms: Option<u64>,
    /// When its lease ends, Unix ms, while leased.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lease_until_ms: Option<u64>,
    /// When it dies if not delivered, Unix ms.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expires_at_ms: Option<u64>,
    /// For a dead task: why.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dead_reason: Option<DeadReason>,
    /// Why its latest delivery failed: a nack's reason, `lease expired`, or
    /// for a push delivery what the receiver answered (`HTTP 500: ...`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    /// Its own push target, if it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http: Option<HttpTarget>,
    /// When it was enqueued, Unix ms.
    pub created_ms: u64,
}

/// A payload left out: `null`.
pub(crate) fn null() -> Box<RawValue> {
    RawValue::from_string("null".to_owned()).expect("null is JSON")
}
