//! What a consumer does with a delivery: ack it (alone or with others),
//! nack it, or extend its lease; and the answers.

use serde::{Deserialize, Serialize};

use crate::error::ErrorDetail;
use crate::text::Lease;

/// The body of `POST /v1/tasks/{id}/ack`, `/nack` and `/extend`: the
/// delivery's lease, and what the operation takes besides. An ack takes
/// only `lease`; a nack also `delay_ms` and `reason`; an extend `lease_ms`.
///
/// `lease` is the text of a [`Lease`]: the server reads it, so that a wrong
/// one is a 400 `invalid` that says what a lease looks like.
///
/// ```
/// use hourglass_wire::{Lease, LeaseRequest};
///
/// let extend = LeaseRequest::extend(Lease(1), 60_000);
/// assert_eq!(serde_json::to_string(&extend).unwrap(), r#"{"lease":"0000000000000001","lease_ms":60000}"#);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct LeaseRequest {
    /// The delivery's lease, as the claim gave it.
    pub lease: String,
    /// A nack's delay before the next delivery (the retry backoff if left out).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub delay_ms: Option<u64>,
    /// An extend's new lease, from now.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lease_ms: Option<u64>,
    /// A nack's reason: what went wrong (the task's `last_error`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

impl LeaseRequest {
    /// An ack of the delivery `lease`.
    pub fn ack(lease: Lease) -> LeaseRequest {
        LeaseRequest { lease: lease.to_string(), delay_ms: None, lease_ms: None, reason: None }
    }

    /// A nack of the delivery `lease`: delivered again after `delay_ms` (the
    /// retry backoff if `None`), or dead if out of attempts.
    pub fn nack(lease: Lease, delay_ms: Option<u64>, reason: Option<String>) -> LeaseRequest {
        LeaseRequest { delay_ms, reason, ..LeaseRequest::ack(lease) }
    }

    /// The delivery `lease` extended to `lease_ms` from now.
    pub fn extend(lease: Lease, lease_ms: u64) -> LeaseRequest {
        LeaseRequest { lease_ms: Some(lease_ms), ..LeaseRequest::ack(lease) }
    }
}

/// The answer to an ack. Its keys are in alphabetical order, as the server
/// has always sent them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Acked {
    /// Always true.
    pub acked: bool,
    /// The task acked.
    pub id: u64,
}

/// The answer to an extend.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Extended {
    /// The task.
    pub id: u64,
    /// When the lease now ends, Unix ms.
    pub lease_until_ms: u64,
}

/// `POST /v1/acks`: acks of several deliveries in one request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct Acks {
    /// The acks, answered in this order.
    pub acks: Vec<Ack>,
}

/// One ack of [`Acks`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct Ack {
    /// The task.
    pub id: u64,
    /// The text of its delivery's [`Lease`].
    pub lease: String,
}

impl Ack {
    /// An ack of task `id`'s delivery `lease`.
    pub fn new(id: u64, lease: Lease) -> Ack {
        Ack { id, lease: lease.to_string() }
    }
}

/// The answer to [`Acks`]: each ack's own result, in order. One that fails
/// (a stale lease, say) fails alone.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct AckResults {
    /// One a request's ack, in order.
    pub results: Vec<AckResult>,
}

/// One ack's result. Its keys are in alphabetical order, as the server has
/// always sent them: `{"acked": true, "id"}` or `{"error": {...}, "id"}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(untagged)]
pub enum AckResult {
    /// Acked.
    Acked(Acked),
    /// Not acked, and why.
    Failed {
        /// The error, as a request that failed would show it.
        error: ErrorDetail,
        /// The task.
        id: u64,
    },
}

impl AckResult {
    /// The task this result is about.
    pub fn id(&self) -> u64 {
        match self {
            AckResult::Acked(acked) => acked.id,
            AckResult::Failed { id, .. } => *id,
        }
    }
}
