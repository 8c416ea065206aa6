//! Claims: asking for due tasks, and the deliveries handed out.

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use crate::delivery::{Ack, AckResult};
use crate::text::Lease;

/// `POST /v1/queues/{queue}/claim`: up to `max` due tasks, each leased for
/// `lease_ms`, waiting up to `wait_ms` for one if none is due; and, with
/// it, the `acks` of earlier deliveries (a consumer's previous batch),
/// saving the request of a `POST /v1/acks`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct ClaimRequest {
    /// Tasks at most (1 if left out).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max: Option<usize>,
    /// Each delivery's lease (the task's own, else the server's default, if
    /// left out).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lease_ms: Option<u64>,
    /// How long to wait for a task when none is due (0 if left out).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wait_ms: Option<u64>,
    /// Acks applied with the claim, first, each as alone (up to the same
    /// limit as [`Acks`](crate::Acks)), answered in [`Claimed::acks`]; all
    /// checked before anything is done.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub acks: Option<Vec<Ack>>,
}

/// A task handed out by a claim: ack it, nack it or extend its lease with
/// `lease` before `lease_until_ms`, or it is delivered again.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ClaimedTask {
    // The fields in alphabetical order: the order the server has always sent
    // them in.
    /// Which delivery this is, from 1.
    pub attempt: u32,
    /// The task's id.
    pub id: u64,
    /// This delivery's token.
    pub lease: Lease,
    /// When the lease ends, Unix ms.
    pub lease_until_ms: u64,
    /// Its payload, if its bytes are JSON text (then exactly as sent); absent
    /// otherwise, and `payload_base64` given.
    #[serde(default, deserialize_with = "crate::payload::shown", skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<Value>))]
    pub payload: Option<Box<RawValue>>,
    /// The payload's bytes in standard base64, if they are not JSON text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub payload_base64: Option<String>,
    /// Its queue.
    pub queue: String,
    /// When the task was due, Unix ms.
    pub run_at_ms: u64,
}

/// The answer to a claim: the deliveries, perhaps none, and the results of
/// the acks the claim carried, if it carried any.
///
/// Its keys, and each task's, are in alphabetical order, as the server has
/// always sent them; each payload is the text enqueued, as
/// `GET /v1/tasks/{id}` shows it.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Claimed {
    /// One result an ack of the request's `acks`, in order, as
    /// [`AckResults`](crate::AckResults) has them; absent if it had none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub acks: Option<Vec<AckResult>>,
    /// The deliveries, in claim order.
    pub tasks: Vec<ClaimedTask>,
}
