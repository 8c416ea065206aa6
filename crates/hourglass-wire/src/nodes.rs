//! `GET /v1/nodes`: the nodes that share the store, where several do (the
//! Redis backend), with the shards each holds and its latest heartbeat.

use serde::{Deserialize, Serialize};

/// The answer to `GET /v1/nodes`.
///
/// `nodes` is `null` for a backend that runs in one process (the embedded
/// one): there are no other nodes, and no shards to hold. That is an answer
/// (200), not an error, so that a client shows "one process" rather than
/// a failure.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Nodes {
    /// The server's clock, Unix ms: each node's `heartbeat_age_ms` is
    /// measured against it.
    pub now_ms: u64,
    /// Every node, by name; `null` where one process holds everything.
    pub nodes: Option<Vec<Node>>,
}

/// One node of those that share the store.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Node {
    /// Its name, as in its shard leases.
    pub name: String,
    /// Whether it is the node that answered.
    pub this: bool,
    /// Its latest heartbeat, Unix ms, by the store's clock. A node is alive
    /// while its heartbeat is younger than a shard lease.
    pub heartbeat_ms: u64,
    /// How long ago that was: the answering server's clock (`now_ms`) less
    /// `heartbeat_ms`, 0 if the store's clock is ahead. A difference between
    /// the two clocks is in it.
    pub heartbeat_age_ms: u64,
    /// The shards it holds, ascending; none while it holds none (a node
    /// joining, or one whose leases others took).
    pub shards: Vec<u16>,
}
