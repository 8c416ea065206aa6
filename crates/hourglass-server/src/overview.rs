//! `GET /v1/overview`: what the dashboard shows on its first page, in one
//! request: every queue with its counts, lateness and rates, the totals, and
//! the last fifteen minutes. And the task that samples them once a second.

use std::sync::Arc;

use axum::extract::State;
use axum::Json;
use hourglass_queue::Backend;
use parking_lot::Mutex;
use serde::Serialize;

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

pub(crate) async fn overview(State(app): State<AppState>) -> Json<Overview> {
    let queues = app.backend.queues().await;
    let totals = app.backend.totals().await;
    let history = app.history.lock();
    Json(Overview {
        now_ms: now_ms(),
        read_only_ui: app.read_only_ui,
        queues: queues
            .into_iter()
            .map(|q| OverviewQueue { rates: history.rates(&q.name), queue: QueueBody::from(q) })
            .collect(),
        totals: TotalsBody::from(totals),
        history: history.points(),
        sample_every_s: SAMPLE_EVERY.as_secs(),
    })
}

/// Samples every queue once a [`SAMPLE_EVERY`], for as long as the server runs.
pub(crate) async fn sample(backend: Arc<dyn Backend>, history: Arc<Mutex<History>>) {
    let mut every = tokio::time::interval(SAMPLE_EVERY);
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        every.tick().await;
        let queues = backend.queues().await;
        history.lock().record(now_ms(), &queues);
    }
}
