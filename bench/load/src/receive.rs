//! `receive`: the other end of push delivery. An HTTP server that answers
//! every request with 200 and records, for each, how long after its due
//! time it arrived (`Hourglass-Due-At`, Unix ms, as hourglass sends it and
//! as the BullMQ processor of `bench/bullmq` copies it), and when. It ends
//! after `--tasks` requests, or once none has come for [`IDLE_END`], with
//! one line: lateness p50, p99, max, and requests a second from the first
//! arrival to the last.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use hdrhistogram::Histogram;
use tokio::net::TcpListener;
use tokio::sync::Notify;

use crate::args::LoadArgs;
use crate::report::{histogram, ms, now_us};

/// With requests received, none for this long ends the run.
const IDLE_END: Duration = Duration::from_secs(20);

#[derive(Default)]
struct Arrivals {
    count: AtomicU64,
    first_us: AtomicU64,
    last_us: AtomicU64,
    /// Requests without a due time, not counted otherwise.
    undated: AtomicU64,
    lateness: Mutex<Option<Histogram<u64>>>,
    changed: Notify,
}

async fn arrive(State(arrivals): State<Arc<Arrivals>>, headers: HeaderMap) -> StatusCode {
    let now = now_us();
    let due_ms = headers.get("hourglass-due-at").and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
    let Some(due_ms) = due_ms else {
        // Not a delivery (a check that the receiver is up, say): not counted.
        arrivals.undated.fetch_add(1, Relaxed);
        return StatusCode::OK;
    };
    let late = now.saturating_sub(due_ms * 1_000).max(1);
    arrivals.lateness.lock().unwrap().get_or_insert_with(histogram).saturating_record(late);
    let _ = arrivals.first_us.compare_exchange(0, now, Relaxed, Relaxed);
    arrivals.last_us.fetch_max(now, Relaxed);
    arrivals.count.fetch_add(1, Relaxed);
    arrivals.changed.notify_one();
    StatusCode::OK
}

/// Receives until `args.tasks` requests have come (or none for a while).
pub async fn receive(args: &LoadArgs) -> anyhow::Result<()> {
    let listener = TcpListener::bind(&args.listen).await?;
    let arrivals = Arc::new(Arrivals::default());
    let app = axum::Router::new().fallback(arrive).with_state(arrivals.clone());
    tokio::spawn(async move { axum::serve(listener, app).await });
    eprintln!("receiving on http://{}/", args.listen);
    loop {
        let count = arrivals.count.load(Relaxed);
        if count >= args.tasks {
            break;
        }
        let idle = tokio::time::timeout(IDLE_END, arrivals.changed.notified()).await.is_err();
        if idle && count > 0 && arrivals.count.load(Relaxed) == count {
            break;
        }
    }
    let count = arrivals.count.load(Relaxed);
    let span_s = (arrivals.last_us.load(Relaxed) - arrivals.first_us.load(Relaxed)) as f64 / 1e6;
    let lateness = arrivals.lateness.lock().unwrap().take().unwrap_or_else(histogram);
    println!(
        "receive: {count} of {} requests (and {} without a due time), {:.0}/s from the first to the last: \
         lateness from due time to arrival p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms",
        args.tasks,
        arrivals.undated.load(Relaxed),
        count.saturating_sub(1) as f64 / span_s.max(1e-6),
        ms(lateness.value_at_quantile(0.5)),
        ms(lateness.value_at_quantile(0.99)),
        ms(lateness.max()),
    );
    Ok(())
}
