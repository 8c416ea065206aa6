//! `/metrics` in the Prometheus text exposition format.

use std::fmt::Write;

use axum::extract::State;
use axum::http::header;
use axum::response::IntoResponse;

use crate::AppState;

pub(crate) async fn metrics(State(app): State<AppState>) -> impl IntoResponse {
    let totals = app.backend.totals().await;
    let mut out = String::new();
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
    let queues = app.backend.queues().await;
    out.push_str("# HELP hourglass_tasks Tasks held, by queue and state.\n# TYPE hourglass_tasks gauge\n");
    for q in &queues {
        for (state, count) in [("scheduled", q.scheduled), ("due", q.due), ("leased", q.leased), ("dead", q.dead)] {
            let _ = writeln!(out, "hourglass_tasks{{queue=\"{}\",state=\"{state}\"}} {count}", q.name);
        }
    }
    out.push_str(
        "# HELP hourglass_claim_lateness_ms From due time to delivery, by queue.\n# TYPE hourglass_claim_lateness_ms summary\n",
    );
    for q in &queues {
        let l = q.lateness;
        for (quantile, value) in [("0.5", l.p50), ("0.99", l.p99), ("1", l.max)] {
            let _ =
                writeln!(out, "hourglass_claim_lateness_ms{{queue=\"{}\",quantile=\"{quantile}\"}} {value}", q.name);
        }
        let _ = writeln!(out, "hourglass_claim_lateness_ms_count{{queue=\"{}\"}} {}", q.name, l.samples);
    }
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], out)
}
