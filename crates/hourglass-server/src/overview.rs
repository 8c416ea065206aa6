//! `GET /v1/overview`: what the dashboard shows on its first page, in one
//! request: every queue with its counts, lateness and rates, the totals, and
//! the last fifteen minutes. And the task that samples them once a second.

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::extract::State;
use hourglass_queue::{Backend, QueueStats, SystemWallClock, Totals, WallClock};
use hourglass_wire as w;
use parking_lot::Mutex;

use crate::access::Caller;
use crate::error::ApiError;
use crate::extract::{Json, Query};
use crate::history::{self, History, SAMPLE_EVERY};
use crate::wire;
use crate::AppState;

/// How old a reading of the queues an overview may show. Readings are
/// shared: however many dashboards are open, the backend is read at most
/// this often for them (at 1,000 queues a reading is about 3 ms of work).
pub(crate) const FRESH_FOR: Duration = Duration::from_millis(500);

/// Every queue's stats and the totals, as read at `at`.
struct Reading {
    at: Instant,
    queues: Arc<Vec<QueueStats>>,
    totals: Totals,
}

/// What the dashboard keeps in the server: the last fifteen minutes, and
/// the latest reading of the queues.
#[derive(Default)]
pub(crate) struct Dashboard {
    history: Mutex<History>,
    latest: Mutex<Option<Reading>>,
    /// The chart of a backend that keeps the history (several nodes), as
    /// last read, and when: read for overviews only, at most once a
    /// [`FRESH_FOR`].
    kept: Mutex<Option<(Instant, Arc<Vec<w::Point>>)>>,
}

impl Dashboard {
    /// The latest reading if it is at most `fresh_for` old, else a new one.
    async fn read(&self, backend: &dyn Backend, fresh_for: Duration) -> (Arc<Vec<QueueStats>>, Totals) {
        if let Some(reading) = self.latest.lock().as_ref().filter(|r| r.at.elapsed() <= fresh_for) {
            return (reading.queues.clone(), reading.totals);
        }
        let queues = Arc::new(backend.queues().await);
        let totals = backend.totals().await;
        *self.latest.lock() = Some(Reading { at: Instant::now(), queues: queues.clone(), totals });
        (queues, totals)
    }
}

impl Dashboard {
    /// The chart: the backend's seconds if it keeps them, else this server's.
    async fn chart(&self, backend: &dyn Backend) -> Vec<w::Point> {
        if let Some((_, points)) = self.kept.lock().as_ref().filter(|(at, _)| at.elapsed() <= FRESH_FOR) {
            return points.to_vec();
        }
        match backend.history().await {
            Some(seconds) => {
                let points: Arc<Vec<w::Point>> = Arc::new(seconds.iter().map(history::point).collect());
                *self.kept.lock() = Some((Instant::now(), points.clone()));
                points.to_vec()
            }
            None => self.history.lock().points(),
        }
    }
}

/// A token that does not read every queue sees those it reads, their sums
/// as totals, and no history (which adds up every queue).
///
/// `?fresh=true` reads the queues now rather than sharing the latest reading:
/// for a command that must see what it just did (`hourglass stats`). The
/// time shown is this machine's clock, whatever clock the backend reads.
#[utoipa::path(get, path = "/v1/overview", tag = "queues", params(w::OverviewQuery),
    responses((status = 200, description = "What the dashboard shows.", body = w::Overview)))]
pub(crate) async fn overview(
    State(app): State<AppState>,
    Caller(grant): Caller,
    Query(query): Query<w::OverviewQuery>,
) -> Result<Json<w::Overview>, ApiError> {
    let fresh_for = if query.fresh == Some(true) { Duration::ZERO } else { FRESH_FOR };
    let (queues, totals) = app.dashboard.read(&*app.backend, fresh_for).await;
    // The chart adds up every queue: for those who read them all.
    let chart = if grant.reads_everything() { app.dashboard.chart(&*app.backend).await } else { Vec::new() };
    let history = app.dashboard.history.lock();
    Ok(Json(w::Overview {
        now_ms: SystemWallClock.now_ms(),
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
