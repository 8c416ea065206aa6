//! A claim hands out every due task it has room for, however they are spread
//! over the shards, on one Redis and on a Cluster.

use std::collections::HashMap;

use hourglass_queue::kit::one_claim_takes_every_due;
use hourglass_queue::prelude::*;
use hourglass_queue::{NewTask, RunAt};
use hourglass_redis::{RedisBackend, CLAIM_SHARE_FILLED, CLAIM_SHARE_MIN, SHARDS_DEFAULT};
use hourglass_test_support::redis::{Cluster, Server};

use crate::{claim_scripts, node, reset_stats, sole_node, until};

/// Far enough ahead that a placed task is not due while others are placed.
const LATER_MS: u64 = 3_600_000;

/// Due tasks of `queue`, `count` on each shard of `spread`: tasks are
/// enqueued for later, those that land on a shard that has its count are
/// cancelled, and the rest are made due. Their ids.
async fn place(b: &RedisBackend, queue: &str, spread: &Spread) -> Vec<u64> {
    let mut wanted: HashMap<u64, usize> = spread.iter().map(|&(shard, count)| (u64::from(shard), count)).collect();
    let mut placed = Vec::new();
    while wanted.values().any(|&count| count > 0) {
        let id = b.enqueue(queue, NewTask::new("{}", RunAt::Delay(LATER_MS))).await.unwrap().id;
        match wanted.get_mut(&(id % 1_024)) {
            Some(count) if *count > 0 => {
                *count -= 1;
                placed.push(id);
            }
            _ => b.cancel(id).await.unwrap(),
        }
    }
    for id in &placed {
        b.reschedule(*id, RunAt::Delay(0)).await.unwrap();
    }
    placed
}

/// Due tasks on each shard named: `(shard, count)`.
type Spread = Vec<(u16, usize)>;

/// Each spread, then one claim with room for every task of it.
async fn every_spread(b: &RedisBackend) {
    let every = |count| (0..SHARDS_DEFAULT).map(move |shard| (shard, count));
    let uneven: Spread = every(1).map(|(shard, count)| (shard, if shard == 5 { 100 } else { count })).collect();
    let spreads: [(&str, Spread, &[usize]); 5] = [
        ("one shard", vec![(3, 40)], &[40, 64, 1_000]),
        ("two shards", vec![(0, 30), (15, 1)], &[31, 50]),
        ("one shard full, the others one each", uneven, &[115, 120]),
        ("three on every shard", every(3).collect(), &[48, 64]),
        ("one or two on every shard", every(1).chain([(2, 1), (9, 1), (11, 1), (12, 1)]).collect(), &[20, 50]),
    ];
    for (at, (what, spread, maxes)) in spreads.into_iter().enumerate() {
        let queue = format!("spread-{at}");
        let due = place(b, &queue, &spread).await;
        for &max in maxes {
            println!("{what}: {} due, a claim of {max}", due.len());
            one_claim_takes_every_due(b, &queue, &due, max).await;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_takes_every_due_task_in_any_spread_on_one_redis() {
    let Some(server) = Server::start() else { return };
    let backend = sole_node(&server.url()).await;
    every_spread(&backend).await;
    backend.close();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_takes_every_due_task_in_any_spread_on_a_cluster() {
    let Some(cluster) = Cluster::start() else { return };
    let backend = sole_node(&cluster.url()).await;
    every_spread(&backend).await;
    backend.close();
}

/// After a claim whose first round got all it asked of every shard, as in
/// a burst, the next asks fewer shards for more each: one script for a claim
/// of [`CLAIM_SHARE_FILLED`], not one for each [`CLAIM_SHARE_MIN`].
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_first_round_filled_a_claim_asks_fewer_shards_for_more() {
    let Some(server) = Server::start() else { return };
    let b = sole_node(&server.url()).await;
    let queue = "filled";
    let each = CLAIM_SHARE_FILLED + CLAIM_SHARE_MIN;
    place(&b, queue, &(0..SHARDS_DEFAULT).map(|shard| (shard, each)).collect()).await;
    // Redis knows the claim script (one sent first is sent again whole).
    assert!(b.claim("none", CLAIM_SHARE_FILLED, 30_000, 0).await.unwrap().is_empty());
    let mut scripts = Vec::new();
    for _ in 0..3 {
        reset_stats(&[&server]);
        let claimed = b.claim(queue, CLAIM_SHARE_FILLED, 30_000, 0).await.unwrap();
        assert_eq!(claimed.len(), CLAIM_SHARE_FILLED);
        scripts.push(claim_scripts(&[&server]));
    }
    let first = CLAIM_SHARE_FILLED / CLAIM_SHARE_MIN;
    assert_eq!(scripts, [first, 1, 1], "{first} shards asked at first, then one");
    b.close();
}

/// A claim that leaves a shard with no due task of its queue says so, and
/// another node's claims then ask that shard no more until a hint says it
/// has due tasks again (most claim scripts that found nothing asked a shard
/// another node's claim had drained first: `BENCHMARKS.md`).
async fn a_drained_shard_is_asked_by_no_other_node(url: &str) {
    let a = sole_node(url).await;
    let b = node(url, 2_000).await;
    until("the other node hears the channel", WITHIN, || b.listening()).await;
    let queue = "drained";
    assert!(b.claim(queue, 1, 30_000, 0).await.unwrap().is_empty());
    assert!(b.shards_maybe_due(queue).is_empty(), "every shard looked at, none has due tasks");
    for round in 0..2 {
        let id = a.enqueue(queue, NewTask::new("{}", RunAt::Delay(0))).await.unwrap().id;
        let shard = a.shard_of(id).unwrap();
        until("the hint reaches the other node", WITHIN, || b.shards_maybe_due(queue) == [shard]).await;
        let claimed = a.claim(queue, 10, 30_000, 0).await.unwrap();
        assert_eq!(claimed.iter().map(|task| task.id).collect::<Vec<_>>(), [id], "round {round}");
        until("the drain reaches the other node", WITHIN, || b.shards_maybe_due(queue).is_empty()).await;
        a.ack(id, claimed[0].lease).await.unwrap();
    }
    a.close();
    b.close();
}

const WITHIN: std::time::Duration = std::time::Duration::from_secs(10);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drained_shard_is_asked_by_no_other_node_on_one_redis() {
    let Some(server) = Server::start() else { return };
    a_drained_shard_is_asked_by_no_other_node(&server.url()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drained_shard_is_asked_by_no_other_node_on_a_cluster() {
    let Some(cluster) = Cluster::start() else { return };
    a_drained_shard_is_asked_by_no_other_node(&cluster.url()).await;
}
