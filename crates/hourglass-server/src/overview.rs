//! `GET /v1/overview`: what the dashboard shows on its first page, in one
//! request: every queue with its counts, lateness and rates, the totals, the
//! last fifteen minutes, and the nodes where several share the store. And
//! the task that samples the queues once a second.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::State;
use hourglass_queue::{Backend, NodeStats, QueueStats, SystemWallClock, Totals, WallClock};
use hourglass_wire as w;
use parking_lot::Mutex;

use crate::access::Caller;
use crate::error::ApiError;
use crate::extract::{Json, Query};
use crate::history::{self, History, SAMPLE_EVERY};
use crate::latest::Latest;
use crate::wire;
use crate::AppState;

/// How old a reading of the queues (or of the nodes) an overview may show.
/// Readings are shared: however many dashboards are open, the backend is
/// read at most this often for them (at 1,000 queues a reading is about 3 ms
/// of work; the nodes, on Redis, one read a shard).
pub(crate) const FRESH_FOR: Duration = Duration::from_millis(500);

/// What the dashboard keeps in the server: the last fifteen minutes, the
/// latest reading of the queues and totals, and of the nodes.
#[derive(Default)]
pub(crate) struct Dashboard {
    history: Mutex<History>,
    latest: Latest<(Arc<Vec<QueueStats>>, Totals)>,
    nodes: Latest<Option<Arc<Vec<NodeStats>>>>,
    /// The chart of a backend that keeps the history (several nodes): read
    /// for overviews only, not by the sampler.
    kept: Latest<Option<Arc<Vec<w::Point>>>>,
}

impl Dashboard {
    /// Every queue's stats and the totals: the latest reading if it is at
    /// most `fresh_for` old, else a new one.
    async fn read(&self, backend: &dyn Backend, fresh_for: Duration) -> (Arc<Vec<QueueStats>>, Totals) {
        self.latest.get(fresh_for, || async { (Arc::new(backend.queues().await), backend.totals().await) }).await
    }

    /// The nodes that share the store (`None` for a backend in one
    /// process), as [`Dashboard::read`] reads the queues. Read only when
    /// asked, not by the sampler: on Redis a reading costs one read a shard.
    pub(crate) async fn nodes(&self, backend: &dyn Backend, fresh_for: Duration) -> Option<Arc<Vec<NodeStats>>> {
        self.nodes.get(fresh_for, || async { backend.nodes().await.map(Arc::new) }).await
    }

    /// The chart: the backend's seconds if it keeps them (every node of
    /// several draws the same), else this server's.
    async fn chart(&self, backend: &dyn Backend, fresh_for: Duration) -> Vec<w::Point> {
        let kept = self
            .kept
            .get(fresh_for, || async {
                backend.history().await.map(|seconds| Arc::new(seconds.iter().map(history::point).collect()))
            })
            .await;
        match kept {
            Some(points) => points.to_vec(),
            None => self.history.lock().points(),
        }
    }
}

/// A token that does not read every queue sees those it reads, their sums
/// as totals, and no history (which adds up every queue) nor nodes (whose
/// shards hold every queue).
///
/// `?fresh=true` reads the queues (and the nodes) now rather than sharing
/// the latest reading: for a command that must see what it just did
/// (`hourglass stats`). The time shown is this machine's clock, whatever
/// clock the backend reads; the nodes' heartbeats' ages are against it.
#[utoipa::path(get, path = "/v1/overview", tag = "queues", params(w::OverviewQuery),
    responses((status = 200, description = "What the dashboard shows.", body = w::Overview)))]
pub(crate) async fn overview(
    State(app): State<AppState>,
    Caller(grant): Caller,
    Query(query): Query<w::OverviewQuery>,
) -> Result<Json<w::Overview>, ApiError> {
    let fresh_for = if query.fresh == Some(true) { Duration::ZERO } else { FRESH_FOR };
    let (queues, totals) = app.dashboard.read(&*app.backend, fresh_for).await;
    let nodes = if grant.reads_everything() { app.dashboard.nodes(&*app.backend, fresh_for).await } else { None };
    // The chart adds up every queue: for those who read them all.
    let chart = if grant.reads_everything() { app.dashboard.chart(&*app.backend, fresh_for).await } else { Vec::new() };
    let now_ms = SystemWallClock.now_ms();
    let history = app.dashboard.history.lock();
    Ok(Json(w::Overview {
        now_ms,
        read_only_ui: app.read_only_ui,
        queues: grant
            .readable(&queues)
            .map(|q| w::OverviewQueue {
                rates: history.rates(&q.name),
                can: grant.permissions_in(&q.name).iter().map(|p| p.as_str().to_owned()).collect(),
                queue: grant.queue(wire::queue(q.clone())),
            })
            .collect(),
        totals: wire::totals(grant.totals(totals, &queues)),
        server_wide: grant.reads_everything(),
        history: chart,
        sample_every_s: SAMPLE_EVERY.as_secs(),
        nodes: nodes.map(|nodes| wire::nodes(&nodes, now_ms)),
    }))
}

/// Samples every queue once a [`SAMPLE_EVERY`], for as long as the server
/// runs; each sample is also the overviews' latest reading.
pub(crate) async fn sample(backend: Arc<dyn Backend>, dashboard: Arc<Dashboard>) {
    let mut every = tokio::time::interval(SAMPLE_EVERY);
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        every.tick().await;
        let (queues, _) = dashboard.read(&*backend, Duration::ZERO).await;
        dashboard.history.lock().record(SystemWallClock.now_ms(), &queues);
    }
}
