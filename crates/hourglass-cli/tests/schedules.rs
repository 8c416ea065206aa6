//! A schedule on the real server and the real clock: its occurrences arrive
//! on time, and a `kill -9` in the middle neither loses one (the `all`
//! misfire policy enqueues those missed while the server was down) nor
//! enqueues one twice. Real time: bounds are generous, figures printed.

use std::collections::BTreeMap;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::{json, Value};

use super::crash::{free_port, start, wait_ready};

const EVERY_MS: u64 = 100;

fn now_us() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_micros() as u64
}

/// Claims and acks `ticks` until `until`; records each occurrence's task id,
/// and for a first delivery its occurrence and how late it was handed out
/// (µs). Returns whether the server answered throughout.
async fn consume(
    http: &reqwest::Client,
    base: &str,
    until: Instant,
    seen: &mut BTreeMap<u64, u64>,
    lateness_us: &mut Vec<(u64, u64)>,
) -> bool {
    while Instant::now() < until {
        let claim = json!({ "max": 16, "wait_ms": 200, "lease_ms": 60_000 });
        let Ok(response) = http.post(format!("{base}/v1/queues/ticks/claim")).json(&claim).send().await else {
            return false;
        };
        let Ok(claimed) = response.json::<Value>().await else { return false };
        let received_us = now_us();
        for task in claimed["tasks"].as_array().cloned().unwrap_or_default() {
            let (id, run_at_ms) = (task["id"].as_u64().unwrap(), task["run_at_ms"].as_u64().unwrap());
            if let Some(&other) = seen.get(&run_at_ms) {
                assert_eq!(other, id, "the occurrence at {run_at_ms} was enqueued as task {other} and task {id}");
            } else if task["attempt"] == 1 {
                lateness_us.push((run_at_ms, received_us.saturating_sub(run_at_ms * 1_000)));
            }
            seen.insert(run_at_ms, id);
            let ack = json!({ "lease": task["lease"] });
            if http.post(format!("{base}/v1/tasks/{id}/ack")).json(&ack).send().await.is_err() {
                return false;
            }
        }
    }
    true
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_schedule_fires_on_time_and_a_kill_9_loses_and_doubles_no_occurrence() {
    let data = tempfile::tempdir().unwrap();
    let port = free_port();
    let base = format!("http://127.0.0.1:{port}");
    let http = reqwest::Client::new();
    let mut server = start(data.path(), port);
    wait_ready(&http, &base).await;
    let schedule = json!({ "queue": "ticks", "every_ms": EVERY_MS, "payload": {"tick": true}, "misfire": "all" });
    let response = http.put(format!("{base}/v1/schedules/ticks")).json(&schedule).send().await.unwrap();
    assert_eq!(response.status(), 201);

    let (mut seen, mut lateness_us) = (BTreeMap::new(), Vec::new());
    assert!(consume(&http, &base, Instant::now() + Duration::from_millis(1_500), &mut seen, &mut lateness_us).await);
    server.kill().unwrap();
    server.wait().unwrap();
    let killed_ms = now_us() / 1_000;
    tokio::time::sleep(Duration::from_millis(500)).await; // down: occurrences are missed
    let mut server = start(data.path(), port);
    wait_ready(&http, &base).await;
    let restarted_ms = now_us() / 1_000;
    assert!(consume(&http, &base, Instant::now() + Duration::from_millis(1_500), &mut seen, &mut lateness_us).await);
    server.kill().unwrap();
    server.wait().unwrap();

    // Every occurrence from the first to the last seen, once each: none lost.
    let (first, last) = (*seen.keys().next().unwrap(), *seen.keys().last().unwrap());
    let missing: Vec<u64> =
        (0..=(last - first) / EVERY_MS).map(|k| first + k * EVERY_MS).filter(|at| !seen.contains_key(at)).collect();
    assert!(missing.is_empty(), "occurrences never delivered: {missing:?}");
    // Occurrences due while the server was up, and those it caught up on.
    let (mut up, mut caught_up): (Vec<u64>, Vec<u64>) = (Vec::new(), Vec::new());
    for &(run_at_ms, late_us) in &lateness_us {
        let down = (killed_ms.saturating_sub(EVERY_MS)..restarted_ms).contains(&run_at_ms);
        if down { &mut caught_up } else { &mut up }.push(late_us);
    }
    up.sort_unstable();
    let ms = |us: u64| us as f64 / 1_000.0;
    let percentile = |p: f64| ms(up[((up.len() - 1) as f64 * p) as usize]);
    println!(
        "schedule every {EVERY_MS} ms: {} occurrences; while up, occurrence to claim p50 {:.2} ms, p99 {:.2} ms \
         ({} measured); down {} ms, {} caught up after the restart, the latest {:.1} ms late",
        seen.len(),
        percentile(0.5),
        percentile(0.99),
        up.len(),
        restarted_ms - killed_ms,
        caught_up.len(),
        ms(caught_up.iter().copied().max().unwrap_or(0)),
    );
    assert!(percentile(0.5) < 1_000.0, "the median occurrence is handed out within a second");
}
