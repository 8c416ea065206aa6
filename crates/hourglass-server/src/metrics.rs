//! `/metrics` in the Prometheus text exposition format.

use std::fmt::Write;

use axum::extract::State;
use axum::http::header;
use axum::response::IntoResponse;

use hourglass_queue::{Totals, BATCH_BUCKETS, COMMIT_BUCKETS_US, LATENESS_BUCKETS_US};

use crate::access::Caller;
use crate::AppState;

/// Prometheus metrics: lateness histograms per queue, tasks per queue and
/// state, the store's commits. A token that does not read every queue gets
/// the series of the queues it reads, and none of the server's own.
#[utoipa::path(get, path = "/metrics", tag = "service",
    responses((status = 200, description = "Prometheus text.", body = String, content_type = "text/plain")))]
pub(crate) async fn metrics(State(app): State<AppState>, Caller(grant): Caller) -> impl IntoResponse {
    let mut out = String::new();
    let everything = grant.reads_everything();
    if everything {
        server_metrics(&mut out, app.backend.totals().await);
    }
    let all = app.backend.queues().await;
    let queues: Vec<_> = grant.readable(&all).collect();
    out.push_str("# HELP hourglass_tasks Tasks held, by queue and state.\n# TYPE hourglass_tasks gauge\n");
    for q in &queues {
        for (state, count) in [("scheduled", q.scheduled), ("due", q.due), ("leased", q.leased), ("dead", q.dead)] {
            let _ = writeln!(out, "hourglass_tasks{{queue=\"{}\",state=\"{state}\"}} {count}", q.name);
        }
    }
    out.push_str(
        "# HELP hourglass_delivery_lateness_seconds From due time to delivery, by queue.\n# TYPE hourglass_delivery_lateness_seconds histogram\n",
    );
    for q in &queues {
        let l = &q.lateness;
        let bounds = LATENESS_BUCKETS_US.iter().map(|&us| us as f64 / 1e6);
        histogram(&mut out, "hourglass_delivery_lateness_seconds", &q.name, bounds, &l.buckets, l.samples, l.sum / 1e3);
    }
    out.push_str("# HELP hourglass_queue_paused Whether the queue is paused (1) or not (0).\n# TYPE hourglass_queue_paused gauge\n");
    for q in &queues {
        let _ = writeln!(out, "hourglass_queue_paused{{queue=\"{}\"}} {}", q.name, u8::from(q.paused));
    }
    if !everything {
        return ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], out);
    }
    if let Some(storage) = app.backend.storage().await {
        out.push_str("# HELP hourglass_storage_commit_seconds Time each store commit took (fsync included when durable).\n# TYPE hourglass_storage_commit_seconds histogram\n");
        let bounds = COMMIT_BUCKETS_US.iter().map(|&us| us as f64 / 1e6);
        let sum = storage.commit_us_sum as f64 / 1e6;
        histogram(
            &mut out,
            "hourglass_storage_commit_seconds",
            "",
            bounds,
            &storage.commit_us_buckets,
            storage.commits,
            sum,
        );
        out.push_str("# HELP hourglass_storage_commit_changes Changes (mutations) each store commit carried.\n# TYPE hourglass_storage_commit_changes histogram\n");
        let bounds = BATCH_BUCKETS.iter().map(|&n| n as f64);
        let sum = storage.mutations as f64;
        histogram(
            &mut out,
            "hourglass_storage_commit_changes",
            "",
            bounds,
            &storage.batch_buckets,
            storage.commits,
            sum,
        );
        out.push_str("# HELP hourglass_storage_commits_failed_total Store commits that failed.\n# TYPE hourglass_storage_commits_failed_total counter\n");
        let _ = writeln!(out, "hourglass_storage_commits_failed_total {}", storage.failed);
    }
    if let Some(push) = &app.push_metrics {
        push_metrics(&mut out, &push.read());
    }
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], out)
}

/// The server's own counters and gauges, from `totals`.
fn server_metrics(out: &mut String, totals: Totals) {
    // One unlabelled metric: `kind` is `counter` or `gauge`.
    let mut metric = |kind: &str, name: &str, help: &str, value: u64| {
        let _ =
            writeln!(out, "# HELP hourglass_{name} {help}\n# TYPE hourglass_{name} {kind}\nhourglass_{name} {value}");
    };
    let mut counter = |name: &str, help: &str, value: u64| metric("counter", name, help, value);
    counter("tasks_enqueued_total", "Tasks enqueued since start.", totals.enqueued);
    counter("tasks_delivered_total", "Deliveries by claims since start.", totals.delivered);
    counter("tasks_acked_total", "Acks since start.", totals.acked);
    counter("tasks_nacked_total", "Nacks since start.", totals.nacked);
    counter("leases_expired_total", "Leases that expired since start.", totals.lease_expired);
    counter("tasks_died_total", "Tasks that died (out of attempts, or expired) since start.", totals.died);
    counter("tasks_expired_total", "Tasks not delivered by their expiry since start.", totals.expired);
    counter("schedule_occurrences_total", "Tasks enqueued by schedules since start.", totals.occurrences_enqueued);
    counter(
        "schedule_occurrences_skipped_total",
        "Schedule occurrences skipped by misfire or overlap policies since start.",
        totals.occurrences_skipped,
    );
    counter("tasks_cancelled_total", "Tasks cancelled since start.", totals.cancelled);
    let mut gauge = |name: &str, help: &str, value: u64| metric("gauge", name, help, value);
    gauge("memory_bytes", "Bytes of tasks held in memory, as the memory budget counts them.", totals.memory_bytes);
    if let Some(max) = totals.memory_bytes_max {
        gauge("memory_budget_bytes", "The memory budget (--max-memory).", max);
    }
    gauge("disk_bytes", "Bytes of tasks in the store, as the disk budget counts them.", totals.disk_bytes);
    if let Some(max) = totals.disk_bytes_max {
        gauge("disk_budget_bytes", "The disk budget (--max-disk).", max);
    }
}

/// This node's push deliveries.
fn push_metrics(out: &mut String, push: &hourglass_push::PushCounts) {
    out.push_str("# HELP hourglass_push_deliveries_total Push deliveries by outcome since start.\n# TYPE hourglass_push_deliveries_total counter\n");
    for (kind, n) in push.outcomes {
        let _ = writeln!(out, "hourglass_push_deliveries_total{{outcome=\"{}\"}} {n}", kind.as_str());
    }
    for (kind, name, help, value) in [
        ("gauge", "push_in_flight", "Push requests in flight now.", push.in_flight),
        ("counter", "push_claims_failed_total", "Push claims that failed since start.", push.claim_errors),
        (
            "counter",
            "push_settles_failed_total",
            "Push outcomes not applied (their leases bring the tasks back).",
            push.settle_errors,
        ),
    ] {
        let _ =
            writeln!(out, "# HELP hourglass_{name} {help}\n# TYPE hourglass_{name} {kind}\nhourglass_{name} {value}");
    }
    out.push_str("# HELP hourglass_push_lateness_seconds From due time to push request sent.\n# TYPE hourglass_push_lateness_seconds histogram\n");
    let l = &push.lateness;
    let bounds = LATENESS_BUCKETS_US.iter().map(|&us| us as f64 / 1e6);
    histogram(out, "hourglass_push_lateness_seconds", "", bounds, &l.buckets, l.samples, l.sum / 1e3);
}

/// One histogram's series in the exposition format: a cumulative bucket per
/// bound, `+Inf` (every observation), the count and the sum. `queue` labels
/// it when not empty.
fn histogram(
    out: &mut String,
    name: &str,
    queue: &str,
    bounds: impl Iterator<Item = f64>,
    cumulative: &[u64],
    count: u64,
    sum: f64,
) {
    let label = if queue.is_empty() { String::new() } else { format!("queue=\"{queue}\",") };
    for (bound, n) in bounds.zip(cumulative) {
        let _ = writeln!(out, "{name}_bucket{{{label}le=\"{bound}\"}} {n}");
    }
    let _ = writeln!(out, "{name}_bucket{{{label}le=\"+Inf\"}} {count}");
    let braces = if queue.is_empty() { String::new() } else { format!("{{queue=\"{queue}\"}}") };
    let _ = writeln!(out, "{name}_count{braces} {count}\n{name}_sum{braces} {sum}");
}
