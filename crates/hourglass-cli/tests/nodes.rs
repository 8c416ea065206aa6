//! Three `hourglass serve` nodes on one Redis (started here on a free port,
//! `appendonly yes`, `appendfsync always`), under load from producers and
//! consumers on every node, while each round does one of: `kill -9` of a node
//! (then a new one), SIGSTOP of a node past its shard lease (then SIGCONT),
//! `kill -9` of Redis (then a restart on its append-only file). A ledger
//! checks that every acknowledged enqueue is delivered, that nothing is
//! delivered after its ack was acknowledged, and that a task delivered again
//! came back through an expired lease (its attempt went up); the duplicates
//! are counted and printed.
//!
//! Real processes and real time: rounds are few, bounds generous, and the
//! figures are printed.

use std::collections::{HashMap, HashSet};
use std::ffi::OsStr;
use std::process::{Child, Command};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rand::Rng;
use serde_json::{json, Value};
use tokio::sync::Mutex;

use crate::crash::{serve_printing, wait_ready};
use hourglass_test_support::redis::Server;

const NODES: usize = 3;
/// Short, so that rounds are short: a stopped or killed node's shards move
/// within it.
const SHARD_LEASE_MS: u64 = 1_000;
/// Consumers' leases: a task held by a node that stopped comes back after it.
const LEASE_MS: u64 = 3_000;
const PRODUCERS: u64 = 3;

/// `hourglass serve --store URL`; returns it and its base URL.
fn start_node(store: &str) -> (Child, String) {
    let lease = SHARD_LEASE_MS.to_string();
    let args: Vec<&OsStr> = ["--store", store, "--shard-lease-ms", &lease].map(OsStr::new).to_vec();
    let (child, address) = serve_printing(&args, "http");
    (child, format!("http://{address}"))
}

fn signal(child: &Child, signal: &str) {
    let status = Command::new("kill").args([signal, &child.id().to_string()]).status().unwrap();
    assert!(status.success(), "kill {signal}");
}

#[derive(Default)]
struct Ledger {
    sent: HashSet<u64>,
    /// Enqueues answered with a 2xx: never to be lost.
    enqueued: HashSet<u64>,
    /// Each task's deliveries and the highest attempt seen.
    delivered: HashMap<u64, (u32, u64)>,
    deliveries: u64,
    /// Acks answered with a 2xx: never to come back.
    acked: HashSet<u64>,
    violations: Vec<String>,
}

async fn produce(
    http: reqwest::Client,
    bases: Arc<Vec<Mutex<String>>>,
    ledger: Arc<Mutex<Ledger>>,
    first: u64,
    stop: Instant,
) {
    let mut seq = first;
    while Instant::now() < stop {
        let base = bases[(seq / PRODUCERS) as usize % bases.len()].lock().await.clone();
        ledger.lock().await.sent.insert(seq);
        let delay_ms = rand::rng().random_range(0..300);
        let body = json!({ "payload": { "seq": seq }, "delay_ms": delay_ms });
        if let Ok(r) = http.post(format!("{base}/v1/queues/nodes/tasks")).json(&body).send().await {
            if r.status().is_success() {
                ledger.lock().await.enqueued.insert(seq);
            }
        }
        seq += PRODUCERS;
    }
}

/// Claims and acks on node `at` until `stop`; returns whether its last
/// claim came back empty.
async fn consume(
    http: &reqwest::Client,
    bases: &[Mutex<String>],
    at: usize,
    ledger: &Mutex<Ledger>,
    stop: Instant,
) -> bool {
    let mut empty = false;
    while Instant::now() < stop {
        let base = bases[at].lock().await.clone();
        let claim = json!({ "max": 16, "wait_ms": 200, "lease_ms": LEASE_MS });
        let Ok(response) = http.post(format!("{base}/v1/queues/nodes/claim")).json(&claim).send().await else {
            continue;
        };
        let Ok(claimed) = response.json::<Value>().await else { continue };
        let tasks = claimed["tasks"].as_array().cloned().unwrap_or_default();
        empty = tasks.is_empty();
        for task in tasks {
            let seq = task["payload"]["seq"].as_u64().expect("a seq");
            let attempt = task["attempt"].as_u64().unwrap() as u32;
            {
                let mut l = ledger.lock().await;
                l.deliveries += 1;
                if !l.sent.contains(&seq) {
                    l.violations.push(format!("delivered {seq}, which was never sent"));
                }
                if l.acked.contains(&seq) {
                    l.violations.push(format!("delivered {seq} again after its ack was acknowledged"));
                }
                let (highest, times) = l.delivered.get(&seq).copied().unwrap_or((0, 0));
                if times > 0 && attempt <= highest {
                    let message = format!("{seq} delivered again at attempt {attempt}, not through an expired lease");
                    l.violations.push(message);
                }
                l.delivered.insert(seq, (highest.max(attempt), times + 1));
            }
            let id = task["id"].as_u64().unwrap();
            let ack = json!({ "lease": task["lease"] });
            if let Ok(r) = http.post(format!("{base}/v1/tasks/{id}/ack")).json(&ack).send().await {
                if r.status().is_success() {
                    ledger.lock().await.acked.insert(seq);
                }
            }
        }
    }
    empty
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_nodes_lose_nothing_through_kills_stops_and_a_redis_restart() {
    let Some(mut redis) = Server::start() else { return };
    let store = redis.url();
    let http = reqwest::Client::builder().timeout(Duration::from_secs(5)).build().unwrap();
    let mut nodes = Vec::new();
    let mut bases = Vec::new();
    for _ in 0..NODES {
        let (child, base) = start_node(&store);
        wait_ready(&http, &base).await;
        nodes.push(child);
        bases.push(Mutex::new(base));
    }
    let bases = Arc::new(bases);
    let ledger = Arc::new(Mutex::new(Ledger::default()));
    let rounds = ["kill -9 a node", "SIGSTOP a node past its lease", "kill -9 redis", "kill -9 a node"];
    for (round, what) in rounds.iter().enumerate() {
        let stop = Instant::now() + Duration::from_secs(4);
        let mut load = Vec::new();
        for p in 0..PRODUCERS {
            let first = round as u64 * 1_000_000_000 + p;
            load.push(tokio::spawn(produce(http.clone(), bases.clone(), ledger.clone(), first, stop)));
        }
        for at in 0..NODES {
            let (http, bases, ledger) = (http.clone(), bases.clone(), ledger.clone());
            load.push(tokio::spawn(async move {
                consume(&http, &bases, at, &ledger, stop).await;
            }));
        }
        tokio::time::sleep(Duration::from_millis(800)).await;
        let victim = rand::rng().random_range(0..NODES);
        match *what {
            "kill -9 a node" => {
                nodes[victim].kill().unwrap();
                nodes[victim].wait().unwrap();
                let (child, base) = start_node(&store);
                wait_ready(&http, &base).await;
                nodes[victim] = child;
                *bases[victim].lock().await = base;
            }
            "SIGSTOP a node past its lease" => {
                signal(&nodes[victim], "-STOP");
                tokio::time::sleep(Duration::from_millis(3 * SHARD_LEASE_MS)).await;
                signal(&nodes[victim], "-CONT");
            }
            _ => redis.kill_and_restart(),
        }
        for task in load {
            task.await.unwrap();
        }
        let l = ledger.lock().await;
        println!(
            "nodes: round {round} ({what}, node {victim}): {} enqueued, {} delivered so far",
            l.enqueued.len(),
            l.delivered.len()
        );
    }
    // Drain through every node: what was acknowledged and not acked comes out.
    let drain_until = Instant::now() + Duration::from_secs(60);
    loop {
        let mut all_empty = true;
        for at in 0..NODES {
            all_empty &= consume(&http, &bases, at, &ledger, Instant::now() + Duration::from_millis(300)).await;
        }
        let l = ledger.lock().await;
        if (all_empty && l.enqueued.iter().all(|seq| l.delivered.contains_key(seq))) || Instant::now() > drain_until {
            break;
        }
    }
    for node in &mut nodes {
        node.kill().unwrap();
        node.wait().unwrap();
    }
    let l = ledger.lock().await;
    let lost: Vec<_> = l.enqueued.iter().filter(|seq| !l.delivered.contains_key(seq)).take(10).collect();
    let again = l.delivered.values().filter(|(_, n)| *n > 1).count();
    println!(
        "nodes: {} sent, {} acknowledged, {} delivered ({} deliveries; {again} tasks more than once, each after its lease ran out), {} acked",
        l.sent.len(),
        l.enqueued.len(),
        l.delivered.len(),
        l.deliveries,
        l.acked.len()
    );
    assert!(l.violations.is_empty(), "{:?}", &l.violations[..l.violations.len().min(10)]);
    assert!(lost.is_empty(), "acknowledged enqueues never delivered: {lost:?}");
    assert!(l.enqueued.len() > 100, "the load was too light to mean anything");
}
