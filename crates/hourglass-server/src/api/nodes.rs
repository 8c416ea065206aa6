//! `GET /v1/nodes`: the nodes that share the store, where several do (the
//! Redis backend), with the shards each holds and its latest heartbeat.

use axum::extract::State;
use hourglass_queue::{SystemWallClock, WallClock};
use hourglass_wire as w;

use crate::extract::Json;
use crate::overview::FRESH_FOR;
use crate::{wire, AppState};

/// The nodes that share the store: each one's name, whether it is the one
/// answering, its latest heartbeat and the shards it holds. `nodes` is
/// `null` for a backend that runs in one process (the embedded one).
///
/// The reading is shared with the dashboard's overview: at most half a
/// second old. Heartbeats are by the store's clock, their ages against this
/// server's (`now_ms`).
#[utoipa::path(get, path = "/v1/nodes", tag = "service",
    responses((status = 200, description = "The nodes, or `null` for one process.", body = w::Nodes)))]
pub(crate) async fn nodes(State(app): State<AppState>) -> Json<w::Nodes> {
    let nodes = app.dashboard.nodes(&*app.backend, FRESH_FOR).await;
    let now_ms = SystemWallClock.now_ms();
    Json(w::Nodes { now_ms, nodes: nodes.map(|nodes| wire::nodes(&nodes, now_ms)) })
}
