//! `GET /v1/overview`: what the dashboard shows on its first page, in one
//! request: every queue with its counts, lateness and rates, the totals, and
//! the last fifteen minutes. And the task that samples them once a second.

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use axum::Json;
use hourglass_queue::{Backend, QueueStats, Totals};
use parking_lot::Mutex;
use serde::{Deserialize, Serialize};

use crate::error::ApiError;
use crate::history::{History, Point, Rates, SAMPLE_EVERY};
use crate::wire::{QueueBody, TotalsBody};
use crate::AppState;

#[derive(Serialize)]
struct OverviewQueue {
    #[serde(flatten)]
    queue: QueueBody,
    /// Per second, over the latest sample.
    rates: Rates,
}

#[derive(Serialize)]
pub(crate) struct Overview {
    /// The server's clock, Unix ms: the page shows due times relative to it.
    now_ms: u64,
    /// The dashboard must not offer changes.
    read_only_ui: bool,
    queues: Vec<OverviewQueue>,
    totals: TotalsBody,
    /// One a second, oldest first, up to fifteen minutes.
    history: Vec<Point>,
    /// Seconds between points.
    sample_every_s: u64,
}

pub(crate) fn now_ms() -> u64 {
    u64::try_from(jiff::Timestamp::now().as_millisecond()).unwrap_or(0)
}

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

/// `?fresh=true` reads the queues now rather than sharing the latest reading:
/// for a command that must see what it just did (`hourglass stats`).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct OverviewQuery {
    fresh: Option<bool>,
}

pub(crate) async fn overview(
    State(app): State<AppState>,
    query: Result<Query<OverviewQuery>, QueryRejection>,
) -> Result<Json<Overview>, ApiError> {
    let Query(query) = query?;
    let fresh_for = if query.fresh == Some(true) { Duration::ZERO } else { FRESH_FOR };
    let (queues, totals) = app.dashboard.read(&*app.backend, fresh_for).await;
    let history = app.dashboard.history.lock();
    Ok(Json(Overview {
        now_ms: now_ms(),
        read_only_ui: app.read_only_ui,
        queues: queues
            .iter()
            .map(|q| OverviewQueue { rates: history.rates(&q.name), queue: QueueBody::from(q.clone()) })
            .collect(),
        totals: TotalsBody::from(totals),
        history: history.points(),
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
        dashboard.history.lock().record(now_ms(), &queues);
    }
}
