//! The cluster's figures through every node: three `hourglass serve` nodes
//! on one Redis, tasks enqueued through two of them, claimed through the
//! third and acked through the second. Once the load stops, the overview
//! read through each node (totals, the queue's counts, counters and
//! lateness, and the fifteen-minute chart) is the same, and exact.
//!
//! Real processes and real time: the nodes add their counts to Redis with
//! their heartbeats (a third of the shard lease), so the check polls, within
//! a generous bound, and prints how long agreement took.

use std::time::{Duration, Instant};

use hourglass_client::wire::{Ack, Acks, ClaimRequest, NewTasks, Overview};
use hourglass_client::Client;
use hourglass_queue::WallClock;
use hourglass_test_support::hourglass::Hourglass;
use hourglass_test_support::redis::Server;

use crate::{serve, Seq};

const QUEUE: &str = "figures";
/// Tasks each producing node enqueues due now, and as many an hour away.
const EACH: u64 = 150;
const SHARD_LEASE_MS: u64 = 1_000;
const WAIT: Duration = Duration::from_secs(30);

fn start_node(store: &str) -> Hourglass {
    serve().args(["--store", store, "--shard-lease-ms", &SHARD_LEASE_MS.to_string()]).start()
}

/// What must be the same through every node: the totals' counters, the
/// queue as listed (its rates left out: each node samples them itself), and
/// the chart's sums.
fn figures(overview: &Overview) -> serde_json::Value {
    let mut totals = serde_json::to_value(overview.totals).unwrap();
    totals.as_object_mut().unwrap().remove("counters_as_of_ms");
    let queue = overview.queues.iter().find(|q| q.queue.name == QUEUE).map(|q| serde_json::to_value(&q.queue).unwrap());
    let sum = |of: fn(&hourglass_client::wire::Point) -> f64| overview.history.iter().map(of).sum::<f64>();
    let chart = [sum(|p| p.enqueued), sum(|p| p.delivered), sum(|p| p.acked)];
    serde_json::json!({ "totals": totals, "queue": queue, "chart": chart })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_node_shows_the_clusters_figures() {
    let Some(redis) = Server::start() else { return };
    let store = redis.url();
    let nodes: Vec<Hourglass> = (0..3).map(|_| start_node(&store)).collect();
    let clients: Vec<Client> = nodes.iter().map(|n| crate::client(n, Duration::from_secs(10))).collect();

    let mut seq = 0;
    for client in &clients[..2] {
        for delay_ms in [0, 3_600_000] {
            let tasks = (0..EACH)
                .map(|_| {
                    seq += 1;
                    Seq::task(seq, delay_ms)
                })
                .collect();
            client.enqueue_batch(QUEUE, &NewTasks { tasks }).await.unwrap();
        }
    }
    let due = 2 * EACH;
    let mut delivered = 0;
    let claim = ClaimRequest { max: Some(64), wait_ms: Some(1_000), lease_ms: Some(60_000), acks: None };
    let started = Instant::now();
    while delivered < due {
        assert!(started.elapsed() < WAIT, "claimed {delivered} of {due}");
        let claimed = clients[2].claim(QUEUE, &claim).await.unwrap();
        delivered += claimed.tasks.len() as u64;
        let acks = claimed.tasks.iter().map(|t| Ack::new(t.id, t.lease)).collect();
        clients[1].ack_batch(&Acks { acks }).await.unwrap();
    }

    // The load has stopped: every node's next heartbeat carries its counts.
    let stopped = Instant::now();
    let stopped_ms = hourglass_queue::SystemWallClock.now_ms();
    let mut last = Vec::new();
    let agreed = hourglass_test_support::holds_within_async(WAIT, async || {
        last = Vec::new();
        for client in &clients {
            last.push(figures(&client.overview(true).await.unwrap()));
        }
        let expect = serde_json::json!([(4 * EACH) as f64, due as f64, due as f64]);
        last.iter().all(|f| *f == last[0] && f["chart"] == expect)
    })
    .await;
    assert!(agreed, "the nodes do not agree: {last:#?}");
    println!("three nodes showed the same figures {:?} after the load stopped: {}", stopped.elapsed(), last[0]);
    let totals = &last[0]["totals"];
    assert_eq!((totals["enqueued"].as_u64(), totals["delivered"].as_u64()), (Some(4 * EACH), Some(due)));
    assert_eq!(totals["acked"].as_u64(), Some(due));
    let queue = &last[0]["queue"];
    assert_eq!(
        (queue["scheduled"].as_u64(), queue["due"].as_u64(), queue["leased"].as_u64()),
        (Some(2 * EACH), Some(0), Some(0))
    );
    assert_eq!(queue["lateness"]["samples"].as_u64(), Some(due), "every delivery's lateness, through every node");

    // Each node says how fresh the counters are, and shows the three nodes
    // with every shard held by one of them.
    for client in &clients {
        let overview = client.overview(true).await.unwrap();
        let as_of = overview.totals.counters_as_of_ms.expect("several nodes say how fresh their counters are");
        // Every node has heartbeaten since the load stopped (they agree):
        // their counts up to then are in (the store's clock, here the same
        // machine's, give or take the nodes' estimate of it).
        assert!(as_of + 50 >= stopped_ms, "counters as of {as_of}, the load stopped at {stopped_ms}");
        assert!(as_of <= overview.now_ms + 50, "counters as of {as_of}, now {}", overview.now_ms);
        let nodes = client.nodes().await.unwrap().nodes.expect("nodes on Redis");
        assert_eq!(nodes.len(), 3, "{nodes:?}");
        assert_eq!(nodes.iter().filter(|n| n.this).count(), 1, "{nodes:?}");
        let held: usize = nodes.iter().map(|n| n.shards.len()).sum();
        assert!(held <= 16, "no shard held twice: {nodes:?}");
    }
}
