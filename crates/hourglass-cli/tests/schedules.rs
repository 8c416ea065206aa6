//! A schedule on the real server and the real clock: its occurrences arrive
//! on time, and a `kill -9` in the middle neither loses one (the `all`
//! misfire policy enqueues those missed while the server was down) nor
//! enqueues one twice. Real time: bounds are generous, figures printed.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use hourglass_client::wire::{ClaimRequest, Misfire, NewSchedule};
use hourglass_client::Client;
use hourglass_queue::{SystemWallClock, WallClock};
use serde_json::value::RawValue;

use crate::{client, serve};

const EVERY_MS: u64 = 100;
/// How long the server stays down: occurrences are missed meanwhile.
const DOWN_FOR: Duration = Duration::from_millis(500);

/// Claims and acks `ticks` until `until`; records each occurrence's task id,
/// and for a first delivery its occurrence and how late it was handed out
/// (µs). Returns whether the server answered throughout.
async fn consume(
    client: &Client,
    until: Instant,
    seen: &mut BTreeMap<u64, u64>,
    lateness_us: &mut Vec<(u64, u64)>,
) -> bool {
    let claim = ClaimRequest { max: Some(16), wait_ms: Some(200), lease_ms: Some(60_000), acks: None };
    while Instant::now() < until {
        let Ok(claimed) = client.claim("ticks", &claim).await else { return false };
        let received_us = SystemWallClock.now_us();
        for task in claimed.tasks {
            let (id, run_at_ms) = (task.id, task.run_at_ms);
            if let Some(&other) = seen.get(&run_at_ms) {
                assert_eq!(other, id, "the occurrence at {run_at_ms} was enqueued as task {other} and task {id}");
            } else if task.attempt == 1 {
                lateness_us.push((run_at_ms, received_us.saturating_sub(run_at_ms * 1_000)));
            }
            seen.insert(run_at_ms, id);
            if client.ack(id, task.lease).await.is_err() {
                return false;
            }
        }
    }
    true
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_schedule_fires_on_time_and_a_kill_9_loses_and_doubles_no_occurrence() {
    let data = tempfile::tempdir().unwrap();
    let mut server = serve().data(data.path()).start();
    let timeout = Duration::from_secs(10);
    let client = client(&server, timeout);
    let payload = RawValue::from_string(r#"{"tick":true}"#.to_owned()).unwrap();
    let schedule = NewSchedule::every("ticks", EVERY_MS, payload).misfire(Misfire::All);
    assert!(client.put_schedule("ticks", &schedule).await.unwrap().created);

    let (mut seen, mut lateness_us) = (BTreeMap::new(), Vec::new());
    assert!(consume(&client, Instant::now() + Duration::from_millis(1_500), &mut seen, &mut lateness_us).await);
    server.kill();
    let killed_ms = SystemWallClock.now_ms();
    // Down for a while, on purpose: the occurrences meanwhile are missed.
    tokio::time::sleep(DOWN_FOR).await;
    server.restart();
    let restarted_ms = SystemWallClock.now_ms();
    let client = crate::client(&server, timeout);
    assert!(consume(&client, Instant::now() + Duration::from_millis(1_500), &mut seen, &mut lateness_us).await);
    server.kill();

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
