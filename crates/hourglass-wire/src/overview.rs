//! `GET /v1/overview`: what the dashboard shows on its first page, in one
//! request.

use serde::{Deserialize, Serialize};

use crate::nodes::Node;
use crate::queue::{Queue, Totals};

/// The query of `GET /v1/overview`: `?fresh=true` reads the queues now
/// rather than sharing the latest reading (at most half a second old), for a
/// client that must see what it just did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema, utoipa::IntoParams))]
#[cfg_attr(feature = "openapi", into_params(parameter_in = Query))]
#[serde(deny_unknown_fields)]
pub struct OverviewQuery {
    /// Read the queues now.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fresh: Option<bool>,
}

/// Every queue with its counts, lateness and rates, the totals, and the
/// last fifteen minutes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Overview {
    /// The server's clock, Unix ms: the page shows due times relative to it.
    pub now_ms: u64,
    /// The dashboard must not offer changes.
    pub read_only_ui: bool,
    /// Every queue, by name.
    pub queues: Vec<OverviewQueue>,
    /// The server's totals; for a token that does not read every queue,
    /// the sums of the queues it reads (see `server_wide`).
    pub totals: Totals,
    /// Whether `totals` and `history` are the whole server's: false for a
    /// token that does not read every queue, which is shown its queues'
    /// sums and no history (the history adds up every queue).
    #[serde(default)]
    pub server_wide: bool,
    /// One point a sample, oldest first, up to fifteen minutes.
    pub history: Vec<Point>,
    /// Seconds between points.
    pub sample_every_s: u64,
    /// The nodes that share the store, as `GET /v1/nodes` shows them (their
    /// heartbeats' ages against `now_ms`). Absent where one process holds
    /// everything, and for a token that does not read every queue.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nodes: Option<Vec<Node>>,
}

/// A queue in the overview: its counts, and its rates.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct OverviewQueue {
    /// Its counts, as `GET /v1/queues/{queue}` shows them.
    #[serde(flatten)]
    pub queue: Queue,
    /// Per second, over the latest sample.
    pub rates: Rates,
    /// What the request's token may do in it, of `read`, `enqueue`,
    /// `consume` and `manage` (`admin` holds all four): the dashboard
    /// offers only those actions.
    #[serde(default)]
    pub can: Vec<String>,
}

/// Rates per second.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Rates {
    /// Tasks enqueued a second.
    pub enqueued: f64,
    /// Deliveries a second.
    pub delivered: f64,
    /// Acks a second.
    pub acked: f64,
}

/// One sample of the whole server: rates per second, and lateness of the
/// deliveries since the sample before, in milliseconds (`null` when there
/// were none).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Point {
    /// When it was taken, Unix ms.
    pub at_ms: u64,
    /// Tasks enqueued a second.
    pub enqueued: f64,
    /// Deliveries a second.
    pub delivered: f64,
    /// Acks a second.
    pub acked: f64,
    /// The median lateness.
    pub lateness_p50_ms: Option<f64>,
    /// The 99th percentile of lateness.
    pub lateness_p99_ms: Option<f64>,
}
