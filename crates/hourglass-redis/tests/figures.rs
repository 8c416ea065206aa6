//! Every node shows the cluster's figures: the counts and counters read
//! through each of three nodes agree once the load stops, and each node's
//! own work shows at once.

use std::sync::Arc;
use std::time::Duration;

use hourglass_queue::prelude::*;
use hourglass_queue::{Nack, NewTask, QueueStats, RunAt, Totals};
use hourglass_redis::RedisBackend;
use hourglass_test_support::redis::{Cluster, Server};

use crate::{calls_in, node, until};

/// Tasks each node enqueues into each queue.
const EACH: usize = 40;
const QUEUES: [&str; 2] = ["figures-a", "figures-b"];

fn by_name(mut queues: Vec<QueueStats>) -> Vec<QueueStats> {
    queues.retain(|q| QUEUES.contains(&&*q.name));
    queues.sort_by(|a, b| a.name.cmp(&b.name));
    queues
}

async fn figures_agree(url: &str, what: &str, commandstats: impl Fn() -> String) {
    let nodes: Vec<Arc<RedisBackend>> = vec![node(url, 2_000).await, node(url, 2_000).await, node(url, 2_000).await];
    // Each holds its share (6, 5 and 5), not a moment of a rebalance.
    until("three nodes share the shards", Duration::from_secs(30), || {
        let mut held: Vec<usize> = nodes.iter().map(|n| n.held_shards().len()).collect();
        held.sort();
        held == [5, 5, 6]
    })
    .await;

    // Each node enqueues into both queues: half due now, half in an hour.
    let mut later = Vec::new();
    for n in &nodes {
        for queue in QUEUES {
            let batch = (0..EACH).map(|at| NewTask::new("{}", RunAt::Delay(if at % 2 == 0 { 0 } else { 3_600_000 })));
            let enqueued = n.enqueue_batch(queue, batch.collect()).await.unwrap();
            later.push(enqueued[1].id);
        }
    }
    // Its own work shows at once on the node that did it.
    let first = by_name(nodes[0].queues().await);
    assert!(first.iter().all(|q| q.enqueued >= EACH as u64), "{first:?}");

    // The next node claims what is due; the one after acks most, nacks one
    // into the dead, and cancels one scheduled task of each queue.
    let mut acked = 0;
    for (at, queue) in QUEUES.iter().enumerate() {
        let due = nodes.len() * EACH / 2;
        let mut claimed = Vec::new();
        while claimed.len() < due {
            claimed.extend(nodes[1].claim(queue, due - claimed.len(), 60_000, 2_000).await.unwrap());
        }
        let (last, rest) = claimed.split_last().unwrap();
        let acks: Vec<_> = rest.iter().map(|c| (c.id, c.lease)).collect();
        assert!(nodes[2].ack_batch(&acks).await.unwrap().iter().all(Result::is_ok));
        acked += acks.len() as u64;
        nodes[2].nack(last.id, last.lease, Nack { dead: true, ..Nack::default() }).await.unwrap();
        nodes[0].cancel(later[at]).await.unwrap();
    }

    // The load stops; each node's next heartbeat carries what it counted.
    let before_ms = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as u64;
    // Twice round: each node's second heartbeat reads the others' first, so
    // every node's reading of how fresh the counters are dates from these
    // beats, not from a background one a loaded machine held up.
    for _ in 0..2 {
        for n in &nodes {
            n.beat().await.unwrap();
        }
    }
    let mut readings: Vec<(Vec<QueueStats>, Totals)> = Vec::new();
    for n in &nodes {
        readings.push((by_name(n.queues().await), n.totals().await));
    }
    let (queues, totals) = &readings[0];
    println!("{what}: totals through the first node: {totals:?}");
    for (at, (other_queues, other_totals)) in readings.iter().enumerate().skip(1) {
        assert_eq!(other_queues, queues, "{what}: node {at} counts the queues as node 0 does");
        let fresh = |t: &Totals| Totals { counters_as_of_ms: None, ..*t };
        assert_eq!(fresh(other_totals), fresh(totals), "{what}: node {at} totals as node 0's");
    }
    let enqueued = (nodes.len() * EACH) as u64;
    for q in queues {
        assert_eq!((q.enqueued, q.delivered, q.acked), (enqueued, enqueued / 2, enqueued / 2 - 1), "{what}: {q:?}");
        assert_eq!((q.scheduled, q.due, q.leased, q.dead), (enqueued as usize / 2 - 1, 0, 0, 1), "{what}: {q:?}");
        assert_eq!(q.lateness.samples, enqueued / 2, "{what}: every delivery's lateness is counted");
    }
    assert_eq!(totals.enqueued, 2 * enqueued);
    assert_eq!(totals.delivered, enqueued);
    assert_eq!(totals.acked, acked);
    assert_eq!((totals.nacked, totals.died, totals.cancelled), (2, 2, 2));
    for (_, totals) in &readings {
        let as_of = totals.counters_as_of_ms.expect("several nodes say how fresh their counters are");
        assert!(as_of + 1_000 >= before_ms, "{what}: counters as of {as_of}, the heartbeats were after {before_ms}");
    }

    // Each node shows the three, with every shard held by one of them (a
    // shard whose lease a loaded machine let run out is taken again within a
    // renewal period: poll).
    for (at, n) in nodes.iter().enumerate() {
        let started = std::time::Instant::now();
        let view = loop {
            let view = n.nodes().await.expect("a node of several");
            let mut shards: Vec<u16> = view.iter().flat_map(|v| v.shards.clone()).collect();
            shards.sort();
            if shards == (0..16).collect::<Vec<u16>>() {
                break view;
            }
            assert!(started.elapsed() < Duration::from_secs(30), "{what}: not every shard held: {view:?}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        assert_eq!(view.len(), 3, "{what}: {view:?}");
        assert_eq!(view.iter().filter(|v| v.this).count(), 1);
        assert_eq!(view.iter().find(|v| v.this).unwrap().name, n.node(), "node {at} is the one answering");
        assert!(view.iter().all(|v| v.heartbeat_ms + 2_000 >= before_ms));
    }

    // Every node draws the same fifteen minutes, from the same seconds. The
    // second under way is left out until it ends: poll past it.
    let summed = |seconds: &[hourglass_queue::Second]| {
        let sum = |of: fn(&hourglass_queue::Second) -> u64| seconds.iter().map(of).sum::<u64>();
        (sum(|s| s.enqueued), sum(|s| s.delivered), sum(|s| s.acked), sum(|s| s.lateness[17]))
    };
    let started = std::time::Instant::now();
    let history = loop {
        let history = nodes[0].history().await.expect("a backend that keeps the history");
        if summed(&history) == (totals.enqueued, totals.delivered, totals.acked, totals.delivered) {
            break history;
        }
        assert!(started.elapsed() < Duration::from_secs(10), "{what}: history sums to {:?}", summed(&history));
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(history.len(), 900, "{what}: fifteen minutes");
    assert!(history.windows(2).all(|w| w[1].at_ms == w[0].at_ms + 1_000), "{what}: a second each");
    for n in &nodes[1..] {
        let other = n.history().await.unwrap();
        let overlap: Vec<_> = other.iter().filter(|s| s.at_ms >= history[0].at_ms).collect();
        let mine: Vec<_> = history.iter().filter(|s| s.at_ms <= other.last().unwrap().at_ms).collect();
        assert_eq!(overlap, mine, "{what}: every node draws the same seconds");
    }

    // An idle cluster's figures are read from Redis once: a heartbeat that
    // carries nothing leaves their version, and the sums read are used again.
    for n in &nodes {
        n.beat().await.unwrap();
    }
    let first = nodes[1].totals().await;
    let before = calls_in(&commandstats(), "hgetall");
    for n in &nodes {
        n.beat().await.unwrap();
    }
    let again = nodes[1].totals().await;
    assert_eq!(
        calls_in(&commandstats(), "hgetall"),
        before,
        "{what}: the figures were read again, though nothing changed"
    );
    assert_eq!(Totals { counters_as_of_ms: None, ..again }, Totals { counters_as_of_ms: None, ..first });
    assert!(again.counters_as_of_ms >= first.counters_as_of_ms, "{what}: as fresh as the latest heartbeats");

    // A clean stop adds what the node counted since its last heartbeat.
    nodes[0].enqueue(QUEUES[0], NewTask::new("{}", RunAt::Delay(3_600_000))).await.unwrap();
    nodes[0].shutdown().await;
    nodes[0].close();
    // Seen by the next heartbeat of another node, which brings the new version.
    nodes[1].beat().await.unwrap();
    let after = by_name(nodes[1].queues().await);
    assert_eq!(after[0].enqueued, enqueued + 1, "{what}: the stopped node's last enqueue is counted");
    for n in &nodes[1..] {
        n.close();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_nodes_show_the_same_figures_on_one_redis() {
    let Some(server) = Server::start() else { return };
    figures_agree(&server.url(), "one redis", || server.cli(&["INFO", "commandstats"])).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_nodes_show_the_same_figures_on_a_cluster() {
    let Some(cluster) = Cluster::start() else { return };
    let commandstats = || cluster.masters.iter().map(|m| m.cli(&["INFO", "commandstats"])).collect::<Vec<_>>();
    // Summed over the masters.
    let sum = move || {
        let calls: u64 = commandstats().iter().map(|info| calls_in(info, "hgetall")).sum();
        format!("cmdstat_hgetall:calls={calls},")
    };
    figures_agree(&cluster.url(), "cluster", sum).await;
}

/// Deaths the shards' fire finds are counted: a task out of attempts when
/// its lease runs out, and one whose expiry passed while a nack's delay held
/// it back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deaths_the_fire_finds_are_counted() {
    let Some(server) = Server::start() else { return };
    let node = crate::sole_node(&server.url()).await;
    let once = NewTask { max_attempts: Some(1), ..NewTask::new("{}", RunAt::Delay(0)) };
    node.enqueue("deaths", once).await.unwrap();
    assert_eq!(node.claim("deaths", 1, 100, 2_000).await.unwrap().len(), 1, "claimed, never acked");
    let expiring = NewTask { expires: Some(RunAt::Delay(300)), ..NewTask::new("{}", RunAt::Delay(0)) };
    node.enqueue("deaths", expiring).await.unwrap();
    let claimed = node.claim("deaths", 1, 60_000, 2_000).await.unwrap();
    node.nack(claimed[0].id, claimed[0].lease, Nack { delay_ms: Some(600), ..Nack::default() }).await.unwrap();

    let started = std::time::Instant::now();
    let totals = loop {
        node.beat().await.unwrap();
        let totals = node.totals().await;
        if totals.died == 2 {
            break totals;
        }
        assert!(started.elapsed() < Duration::from_secs(20), "both dead by now: {totals:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!((totals.lease_expired, totals.expired, totals.nacked), (1, 1, 1), "{totals:?}");
    let queue = node.queue("deaths").await.unwrap();
    assert_eq!(queue.dead, 2, "{queue:?}");
    node.close();
}
