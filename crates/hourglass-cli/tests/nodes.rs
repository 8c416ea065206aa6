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
use std::sync::Arc;
use std::time::{Duration, Instant};

use hourglass_client::wire::ClaimRequest;
use hourglass_client::Client;
use hourglass_test_support::holds_within_async;
use hourglass_test_support::hourglass::Hourglass;
use hourglass_test_support::redis::Server;
use rand::Rng;
use tokio::sync::Mutex;

use crate::{serve, Seq};

const NODES: usize = 3;
/// Short, so that rounds are short: a stopped or killed node's shards move
/// within it.
const SHARD_LEASE_MS: u64 = 1_000;
/// Consumers' leases: a task held by a node that stopped comes back after it.
const LEASE_MS: u64 = 3_000;
const PRODUCERS: u64 = 3;
/// A request that takes longer has met a node that is gone or stopped.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);
/// How long the nodes may take to hand out what they hold, at the end.
const DRAIN_WITHIN: Duration = Duration::from_secs(60);

/// `hourglass serve --store URL`.
fn start_node(store: &str) -> Hourglass {
    serve().args(["--store", store, "--shard-lease-ms", &SHARD_LEASE_MS.to_string()]).start()
}

/// Each node's client, replaced when the node is.
type Clients = Arc<Vec<Mutex<Client>>>;

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

async fn produce(clients: Clients, ledger: Arc<Mutex<Ledger>>, first: u64, stop: Instant) {
    let mut seq = first;
    while Instant::now() < stop {
        let client = clients[(seq / PRODUCERS) as usize % clients.len()].lock().await.clone();
        ledger.lock().await.sent.insert(seq);
        let delay_ms = rand::rng().random_range(0..300);
        if client.enqueue("nodes", &Seq::task(seq, delay_ms)).await.is_ok() {
            ledger.lock().await.enqueued.insert(seq);
        }
        seq += PRODUCERS;
    }
}

/// Claims and acks on node `at` until `stop`; returns whether its last
/// claim came back empty.
async fn consume(clients: &[Mutex<Client>], at: usize, ledger: &Mutex<Ledger>, stop: Instant) -> bool {
    let mut empty = false;
    let claim = ClaimRequest { max: Some(16), wait_ms: Some(200), lease_ms: Some(LEASE_MS), acks: None };
    while Instant::now() < stop {
        let client = clients[at].lock().await.clone();
        let Ok(claimed) = client.claim("nodes", &claim).await else { continue };
        empty = claimed.tasks.is_empty();
        for task in claimed.tasks {
            let seq = Seq::of(task.payload.as_deref().expect("a JSON payload"));
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
                if times > 0 && task.attempt <= highest {
                    let message =
                        format!("{seq} delivered again at attempt {}, not through an expired lease", task.attempt);
                    l.violations.push(message);
                }
                l.delivered.insert(seq, (highest.max(task.attempt), times + 1));
            }
            if client.ack(task.id, task.lease).await.is_ok() {
                ledger.lock().await.acked.insert(seq);
            }
        }
    }
    empty
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_nodes_lose_nothing_through_kills_stops_and_a_redis_restart() {
    let Some(mut redis) = Server::start() else { return };
    let store = redis.url();
    let mut nodes: Vec<Hourglass> = (0..NODES).map(|_| start_node(&store)).collect();
    let clients: Clients =
        Arc::new(nodes.iter().map(|node| Mutex::new(crate::client(node, REQUEST_TIMEOUT))).collect());
    let ledger = Arc::new(Mutex::new(Ledger::default()));
    let rounds = ["kill -9 a node", "SIGSTOP a node past its lease", "kill -9 redis", "kill -9 a node"];
    for (round, what) in rounds.iter().enumerate() {
        let stop = Instant::now() + Duration::from_secs(4);
        let mut load = Vec::new();
        for p in 0..PRODUCERS {
            let first = round as u64 * 1_000_000_000 + p;
            load.push(tokio::spawn(produce(clients.clone(), ledger.clone(), first, stop)));
        }
        for at in 0..NODES {
            let (clients, ledger) = (clients.clone(), ledger.clone());
            load.push(tokio::spawn(async move {
                consume(&clients, at, &ledger, stop).await;
            }));
        }
        // The load runs a while before the round's blow.
        tokio::time::sleep(Duration::from_millis(800)).await;
        let victim = rand::rng().random_range(0..NODES);
        match *what {
            "kill -9 a node" => {
                // A new process, on a port of its own: the others run on meanwhile.
                tokio::task::block_in_place(|| nodes[victim].restart());
                *clients[victim].lock().await = crate::client(&nodes[victim], REQUEST_TIMEOUT);
            }
            "SIGSTOP a node past its lease" => {
                nodes[victim].signal("STOP");
                tokio::time::sleep(Duration::from_millis(3 * SHARD_LEASE_MS)).await;
                nodes[victim].signal("CONT");
            }
            _ => tokio::task::block_in_place(|| redis.kill_and_restart()),
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
    let drained = holds_within_async(DRAIN_WITHIN, async || {
        let mut all_empty = true;
        for at in 0..NODES {
            all_empty &= consume(&clients, at, &ledger, Instant::now() + Duration::from_millis(300)).await;
        }
        let l = ledger.lock().await;
        all_empty && l.enqueued.iter().all(|seq| l.delivered.contains_key(seq))
    })
    .await;
    for node in &mut nodes {
        node.kill();
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
    assert!(drained, "the nodes still handed out tasks after {DRAIN_WITHIN:?}");
    assert!(l.enqueued.len() > 100, "the load was too light to mean anything");
}
