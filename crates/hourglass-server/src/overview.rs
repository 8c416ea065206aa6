//! `GET /v1/overview`: what the dashboard shows on its first page, in one
//! request: every queue with its counts, lateness and rates, the totals, the
//! last fifteen minutes, and the nodes where several share the store. And
//! the task that samples the queues once a second.

use std::sync::Arc;
use std::time::{Duration, Instant};

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
/// How often the server samples a backend that keeps its own history
/// ([`Stats::keeps_history`](hourglass_queue::Stats::keeps_history)) while
/// no dashboard reads it: its samples give only the queues' rates (over
/// the span between two samples), and an idle cluster is read this often,
/// not every [`SAMPLE_EVERY`], on every node.
pub(crate) const SAMPLE_UNWATCHED_EVERY: Duration = Duration::from_secs(10);
/// A dashboard watches for this long after its last overview.
pub(crate) const WATCHED_FOR: Duration = Duration::from_secs(60);
const _: () = assert!(SAMPLE_EVERY.as_millis() < SAMPLE_UNWATCHED_EVERY.as_millis());

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
    /// When an overview was last asked for.
    watched_at: Mutex<Option<Instant>>,
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
    *app.dashboard.watched_at.lock() = Some(Instant::now());
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

/// Samples every queue once a [`SAMPLE_EVERY`] (a backend that keeps its
/// own history, once a [`SAMPLE_UNWATCHED_EVERY`] while no dashboard
/// watches), for as long as the server runs; each sample is also the
/// overviews' latest reading.
pub(crate) async fn sample(backend: Arc<dyn Backend>, dashboard: Arc<Dashboard>) {
    let mut every = tokio::time::interval(SAMPLE_EVERY);
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut sampled_at: Option<Instant> = None;
    loop {
        every.tick().await;
        let now = Instant::now();
        let watched_at = *dashboard.watched_at.lock();
        let Some(sampling) = sampling(backend.keeps_history(), watched_at, sampled_at, now) else { continue };
        sampled_at = Some(now);
        let queues = match sampling {
            Sampling::Watched => dashboard.read(&*backend, Duration::ZERO).await.0,
            // The rates alone are wanted: the queues, not the totals.
            Sampling::Unwatched => Arc::new(backend.queues().await),
        };
        dashboard.history.lock().record(SystemWallClock.now_ms(), &queues);
    }
}

/// What a sample reads.
#[derive(Debug, PartialEq, Eq)]
enum Sampling {
    /// The queues and the totals, as an overview shares them.
    Watched,
    /// The queues alone, for their rates.
    Unwatched,
}

/// Whether the sampler samples at `now`, and what: each tick, unless the
/// backend keeps its own history and no overview was asked for within
/// [`WATCHED_FOR`]; then once a [`SAMPLE_UNWATCHED_EVERY`].
fn sampling(
    keeps_history: bool,
    watched_at: Option<Instant>,
    sampled_at: Option<Instant>,
    now: Instant,
) -> Option<Sampling> {
    let watched = watched_at.is_some_and(|at| now.saturating_duration_since(at) < WATCHED_FOR);
    if !keeps_history || watched {
        return Some(Sampling::Watched);
    }
    let due = sampled_at.is_none_or(|at| now.saturating_duration_since(at) >= SAMPLE_UNWATCHED_EVERY);
    due.then_some(Sampling::Unwatched)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unwatched_cluster_is_sampled_every_ten_seconds_and_a_watched_one_every_tick() {
        let start = Instant::now();
        let at = |s: u64| start + Duration::from_secs(s);
        // A backend whose server keeps the history: every tick, watched or not.
        assert_eq!(sampling(false, None, Some(at(0)), at(1)), Some(Sampling::Watched));
        // Keeps its own, unwatched: the first tick, then ten seconds on.
        assert_eq!(sampling(true, None, None, at(0)), Some(Sampling::Unwatched));
        assert_eq!(sampling(true, None, Some(at(0)), at(9)), None);
        assert_eq!(sampling(true, None, Some(at(0)), at(10)), Some(Sampling::Unwatched));
        // An overview a moment ago: every tick, for a minute.
        assert_eq!(sampling(true, Some(at(5)), Some(at(5)), at(6)), Some(Sampling::Watched));
        assert_eq!(sampling(true, Some(at(5)), Some(at(64)), at(64)), Some(Sampling::Watched));
        assert_eq!(sampling(true, Some(at(5)), Some(at(64)), at(65)), None);
        assert_eq!(sampling(true, Some(at(5)), Some(at(64)), at(74)), Some(Sampling::Unwatched));
    }
}
