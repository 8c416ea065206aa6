//! `kill -9` mid-deliveries, through the real binary and a real receiver:
//! every task whose enqueue was answered with a 2xx reaches the receiver at
//! least once, after a restart (the embedded store) or through the nodes
//! left (three nodes on Redis, the one killed holding deliveries). Tasks
//! held by the process killed come back when their leases (the push
//! timeout plus a margin) end.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::sync::{Arc, Mutex};

use hourglass_client::Client;
use hourglass_test_support::hourglass::Hourglass;
use hourglass_test_support::receiver::Receiver;
use hourglass_test_support::redis::Server;
use hourglass_test_support::within_async;

use crate::push_flow::{on_redis, push_to, WAIT};
use crate::{client, serve, Seq};

/// A short timeout: a task held by a killed process comes back soon.
const TIMEOUT_MS: u32 = 1_000;
/// Tasks pushed before the kill.
const BEFORE_KILL: usize = 40;

/// Enqueues one task at a time through `clients` (in turn) until `stop`;
/// the ids of those answered with a 2xx go to `acked`.
fn produce(clients: Vec<Client>, acked: Arc<Mutex<HashSet<u64>>>, stop: Arc<AtomicBool>) {
    tokio::spawn(async move {
        let mut seq = 0;
        while !stop.load(SeqCst) {
            let client = &clients[seq as usize % clients.len()];
            if let Ok(done) = client.enqueue("hooks", &Seq::task(seq, 0)).await {
                acked.lock().unwrap().insert(done.value.id);
            }
            seq += 1;
        }
    });
}

/// Requests the node holds unanswered, as its `/metrics` says.
async fn pushes_in_flight(node: &Hourglass) -> u64 {
    let metrics = client(node, WAIT).metrics().await.unwrap_or_default();
    let line = metrics.lines().find_map(|l| l.strip_prefix("hourglass_push_in_flight "));
    line.and_then(|n| n.parse().ok()).unwrap_or(0)
}

/// Waits until the receiver has every task of `acked`; prints the repeats.
async fn every_acked_received(receiver: &Receiver, acked: &Mutex<HashSet<u64>>) {
    let acked = acked.lock().unwrap().clone();
    within_async(WAIT, "every acknowledged task received", async || receiver.task_ids().is_superset(&acked)).await;
    let repeats = receiver.requests() - receiver.task_ids().len();
    println!("{} tasks acknowledged, all received; {repeats} received more than once", acked.len());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_mid_deliveries_then_every_acknowledged_task_is_pushed_after_restart() {
    let receiver = Receiver::start().await;
    let data = tempfile::tempdir().unwrap();
    let mut server = serve().data(data.path()).args(["--push-allow", &receiver.host_port()]).start();
    client(&server, WAIT).put_settings("hooks", &push_to(receiver.url("/busy"), TIMEOUT_MS)).await.unwrap();
    let acked = Arc::new(Mutex::new(HashSet::new()));
    let stop = Arc::new(AtomicBool::new(false));
    produce(vec![client(&server, WAIT)], acked.clone(), stop.clone());

    within_async(WAIT, "deliveries under way, some held", async || {
        receiver.requests() >= BEFORE_KILL && receiver.in_flight() > 0
    })
    .await;
    server.kill();
    stop.store(true, SeqCst);
    server.restart();
    every_acked_received(&receiver, &acked).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_of_a_delivering_node_of_three_on_redis_loses_no_acknowledged_task() {
    let Some(redis) = Server::start() else { return };
    let receiver = Receiver::start().await;
    let store = redis.url();
    let args = ["--store", &store, "--shard-lease-ms", "1000", "--push-allow", &receiver.host_port()];
    let mut nodes = on_redis(&args).await;
    client(&nodes[0], WAIT).put_settings("hooks", &push_to(receiver.url("/busy"), TIMEOUT_MS)).await.unwrap();
    let acked = Arc::new(Mutex::new(HashSet::new()));
    let stop = Arc::new(AtomicBool::new(false));
    // Producers on the two nodes that stay.
    produce(vec![client(&nodes[1], WAIT), client(&nodes[2], WAIT)], acked.clone(), stop.clone());

    within_async(WAIT, "deliveries under way", async || receiver.requests() >= BEFORE_KILL).await;
    let mut delivering = None;
    within_async(WAIT, "a node holding push requests", async || {
        for (at, node) in nodes.iter().enumerate() {
            if pushes_in_flight(node).await > 0 {
                delivering = Some(at);
                return true;
            }
        }
        false
    })
    .await;
    let killed = delivering.unwrap();
    nodes[killed].kill();
    println!("killed node {killed} while it held push requests");
    // The survivors keep enqueueing for a while: the producers stop only
    // once the receiver has had more from them.
    let seen = receiver.requests();
    within_async(WAIT, "deliveries after the kill", async || receiver.requests() >= seen + BEFORE_KILL).await;
    stop.store(true, SeqCst);
    every_acked_received(&receiver, &acked).await;
}
