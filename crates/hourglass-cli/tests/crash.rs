//! The real server, killed with SIGKILL at random moments under load, then
//! restarted, over and over. Afterwards:
//! - every enqueue that got a 2xx was delivered (before a kill, or after);
//! - nothing was delivered that was never enqueued;
//! - nothing was delivered again after its ack got a 2xx.
//!
//! Real processes and real time: rounds are few, bounds generous, and the
//! figures are printed.

use std::collections::HashSet;
use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rand::Rng;
use serde_json::{json, Value};
use tokio::sync::Mutex;

const ROUNDS: usize = 6;
const PRODUCERS: usize = 4;
const CONSUMERS: usize = 2;
/// How long the server must take at most to answer after a start.
const READY_WITHIN: Duration = Duration::from_secs(20);

#[derive(Default)]
struct Ledger {
    /// Sequence numbers whose enqueue was attempted.
    sent: HashSet<u64>,
    /// ... and answered with a 2xx: these must never be lost.
    enqueued: HashSet<u64>,
    delivered: HashSet<u64>,
    deliveries: u64,
    /// Acks answered with a 2xx: these must never come back.
    acked: HashSet<u64>,
    violations: Vec<String>,
}

pub(crate) fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

pub(crate) fn start(data: &std::path::Path, port: u16) -> Child {
    Command::new(env!("CARGO_BIN_EXE_hourglass"))
        .args(["serve", "--listen", &format!("127.0.0.1:{port}"), "--data"])
        .arg(data)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start the server")
}

/// `hourglass serve --listen 127.0.0.1:0` with `args`; returns it and the
/// address it printed on the line that starts with `label` (`http`,
/// `beanstalk`).
pub(crate) fn serve_printing(args: &[&std::ffi::OsStr], label: &str) -> (Child, String) {
    use std::io::{BufRead, BufReader};
    let mut child = Command::new(env!("CARGO_BIN_EXE_hourglass"))
        .args(["serve", "--listen", "127.0.0.1:0"])
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start hourglass");
    let mut lines = BufReader::new(child.stdout.take().expect("stdout piped")).lines();
    let prefix = format!("{label} ");
    let address = loop {
        let line = lines.next().expect("hourglass printed its addresses").expect("a line");
        if let Some(address) = line.strip_prefix(&prefix) {
            break address.to_owned();
        }
    };
    (child, address)
}

pub(crate) async fn wait_ready(http: &reqwest::Client, base: &str) {
    let started = Instant::now();
    while started.elapsed() < READY_WITHIN {
        if http.get(format!("{base}/healthz")).send().await.is_ok_and(|r| r.status().is_success()) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("the server did not answer within {READY_WITHIN:?}");
}

async fn produce(http: reqwest::Client, base: String, ledger: Arc<Mutex<Ledger>>, first: u64, stop: Instant) {
    let mut seq = first;
    while Instant::now() < stop {
        ledger.lock().await.sent.insert(seq);
        let delay_ms = rand::rng().random_range(0..50);
        let body = json!({ "payload": { "seq": seq }, "delay_ms": delay_ms });
        let response = http.post(format!("{base}/v1/queues/crash/tasks")).json(&body).send().await;
        match response {
            Ok(r) if r.status().is_success() => {
                ledger.lock().await.enqueued.insert(seq);
            }
            Ok(_) | Err(_) => return, // the server is gone: this round is over
        }
        seq += PRODUCERS as u64;
    }
}

/// Claims and acks until `stop`, or until the server is gone; returns whether
/// the last claim came back empty.
async fn consume(http: &reqwest::Client, base: &str, ledger: &Mutex<Ledger>, stop: Instant) -> bool {
    let mut empty = false;
    while Instant::now() < stop {
        let claim = json!({ "max": 16, "wait_ms": 50, "lease_ms": 60_000 });
        let Ok(response) = http.post(format!("{base}/v1/queues/crash/claim")).json(&claim).send().await else {
            return empty;
        };
        let Ok(claimed) = response.json::<Value>().await else { return empty };
        let tasks = claimed["tasks"].as_array().cloned().unwrap_or_default();
        empty = tasks.is_empty();
        for task in tasks {
            let seq = task["payload"]["seq"].as_u64().expect("a seq");
            {
                let mut ledger = ledger.lock().await;
                ledger.deliveries += 1;
                if !ledger.sent.contains(&seq) {
                    ledger.violations.push(format!("delivered {seq}, which was never sent"));
                }
                if ledger.acked.contains(&seq) {
                    ledger.violations.push(format!("delivered {seq} again after its ack was acknowledged"));
                }
                ledger.delivered.insert(seq);
            }
            let id = task["id"].as_u64().unwrap();
            let ack = json!({ "lease": task["lease"] });
            match http.post(format!("{base}/v1/tasks/{id}/ack")).json(&ack).send().await {
                Ok(r) if r.status().is_success() => {
                    ledger.lock().await.acked.insert(seq);
                }
                _ => return false,
            }
        }
    }
    empty
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_under_load_loses_no_acknowledged_write() {
    let dir = tempfile::tempdir().unwrap();
    let http = reqwest::Client::builder().timeout(Duration::from_secs(10)).build().unwrap();
    let ledger = Arc::new(Mutex::new(Ledger::default()));
    let mut next_seq = 0;
    for round in 0..ROUNDS {
        let port = free_port();
        let base = format!("http://127.0.0.1:{port}");
        let mut server = start(dir.path(), port);
        wait_ready(&http, &base).await;
        let run_for = Duration::from_millis(rand::rng().random_range(100..600));
        let stop = Instant::now() + run_for + Duration::from_secs(5);
        let mut load = Vec::new();
        for p in 0..PRODUCERS {
            load.push(tokio::spawn(produce(http.clone(), base.clone(), ledger.clone(), next_seq + p as u64, stop)));
        }
        for _ in 0..CONSUMERS {
            let (http, base, ledger) = (http.clone(), base.clone(), ledger.clone());
            load.push(tokio::spawn(async move {
                consume(&http, &base, &ledger, stop).await;
            }));
        }
        tokio::time::sleep(run_for).await;
        server.kill().expect("SIGKILL the server");
        server.wait().unwrap();
        for task in load {
            task.await.unwrap();
        }
        next_seq += 1_000_000;
        let l = ledger.lock().await;
        println!(
            "crash: round {round} killed after {run_for:?}: {} enqueued, {} delivered so far",
            l.enqueued.len(),
            l.delivered.len()
        );
    }

    // One last start: everything acknowledged and not yet acked must come out.
    let port = free_port();
    let base = format!("http://127.0.0.1:{port}");
    let mut server = start(dir.path(), port);
    let restarted = Instant::now();
    wait_ready(&http, &base).await;
    let ready_in = restarted.elapsed();
    let drain_until = Instant::now() + Duration::from_secs(30);
    while !consume(&http, &base, &ledger, Instant::now() + Duration::from_millis(500)).await
        && Instant::now() < drain_until
    {}
    server.kill().unwrap();
    server.wait().unwrap();

    let ledger = ledger.lock().await;
    let lost: Vec<_> = ledger.enqueued.difference(&ledger.delivered).take(10).collect();
    println!(
        "crash: {ROUNDS} kills; {} sent, {} acknowledged, {} delivered ({} deliveries), {} acked; last restart ready in {ready_in:?}",
        ledger.sent.len(),
        ledger.enqueued.len(),
        ledger.delivered.len(),
        ledger.deliveries,
        ledger.acked.len()
    );
    assert!(ledger.violations.is_empty(), "{:?}", &ledger.violations[..ledger.violations.len().min(10)]);
    assert!(lost.is_empty(), "acknowledged enqueues never delivered: {lost:?}");
    assert!(ledger.enqueued.len() > 100, "the load was too light to mean anything");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_stops_cleanly_with_exit_0_and_keeps_acknowledged_writes() {
    let dir = tempfile::tempdir().unwrap();
    let http = reqwest::Client::builder().timeout(Duration::from_secs(10)).build().unwrap();
    let port = free_port();
    let base = format!("http://127.0.0.1:{port}");
    let mut server = start(dir.path(), port);
    wait_ready(&http, &base).await;
    let mut ids = Vec::new();
    for seq in 0..20 {
        let body = json!({ "payload": { "seq": seq }, "delay_ms": 3_600_000 });
        let created: Value =
            http.post(format!("{base}/v1/queues/term/tasks")).json(&body).send().await.unwrap().json().await.unwrap();
        ids.push(created["id"].as_u64().unwrap());
    }
    // A consumer is waiting when the signal comes: it must get its answer, not a reset.
    let waiting = tokio::spawn({
        let (http, base) = (http.clone(), base.clone());
        async move { http.post(format!("{base}/v1/queues/empty/claim")).json(&json!({ "wait_ms": 30_000 })).send().await }
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    let signalled = Instant::now();
    let status = Command::new("kill").args(["-TERM", &server.id().to_string()]).status().unwrap();
    assert!(status.success());
    let answer = waiting.await.unwrap().expect("the waiting claim was answered");
    assert!(answer.status().is_success());
    let exit = tokio::task::spawn_blocking(move || server.wait().unwrap()).await.unwrap();
    println!("sigterm: exited {exit:?} {:?} after the signal", signalled.elapsed());
    assert!(exit.success(), "exit status {exit:?}");

    let port = free_port();
    let base = format!("http://127.0.0.1:{port}");
    let mut server = start(dir.path(), port);
    wait_ready(&http, &base).await;
    for id in ids {
        let response = http.get(format!("{base}/v1/tasks/{id}")).send().await.unwrap();
        assert!(response.status().is_success(), "task {id} lost after a clean stop");
    }
    server.kill().unwrap();
    server.wait().unwrap();
}
