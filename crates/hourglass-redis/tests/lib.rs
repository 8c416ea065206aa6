//! The Redis backend against Redis servers the tests start (one Redis, and a
//! Cluster of three masters), and the contract's conformance kit against both.

mod claims;
mod enqueues;
mod figures;
mod flow;
mod handover;
mod leases;
mod outage;
mod schedules;
mod sweeps;

use std::sync::Arc;
use std::time::{Duration, Instant};

use hourglass_queue::prelude::*;
use hourglass_queue::{NewTask, QueueError, RunAt};
use hourglass_redis::{RedisBackend, RedisOptions};
use hourglass_test_support::redis::{Cluster, Server};

async fn node(url: &str, shard_lease_ms: u64) -> Arc<RedisBackend> {
    let mut options = RedisOptions::new(url.parse().unwrap());
    options.shard_lease_ms = shard_lease_ms;
    RedisBackend::connect(options).await.expect("connect to redis")
}

/// The only node of a service on `url`, once it holds every shard.
async fn sole_node(url: &str) -> Arc<RedisBackend> {
    holding_every_shard(url, 2_000, Duration::from_secs(20)).await
}

/// The first node of a service on `url`, with leases of `shard_lease_ms`,
/// once it holds every shard (within `within`).
async fn holding_every_shard(url: &str, shard_lease_ms: u64, within: Duration) -> Arc<RedisBackend> {
    let backend = node(url, shard_lease_ms).await;
    until("the node holds every shard", within, || backend.held_shards().len() == 16).await;
    backend
}

/// Two nodes of a service on `url`, `a` started first, once they share the
/// shards out; and how long that took after `b` started. Each step may take
/// 20 s, or a lease where that is longer.
async fn two_nodes(url: &str, shard_lease_ms: u64) -> (Arc<RedisBackend>, Arc<RedisBackend>, Duration) {
    let within = Duration::from_secs(20).max(Duration::from_millis(shard_lease_ms));
    let a = holding_every_shard(url, shard_lease_ms, within).await;
    let b = node(url, shard_lease_ms).await;
    let took =
        until("the shards are shared out", within, || a.held_shards().len() == 8 && b.held_shards().len() == 8).await;
    (a, b, took)
}

/// Waits (polling, within `timeout`) until `done` holds.
async fn until(what: &str, timeout: Duration, mut done: impl FnMut() -> bool) -> Duration {
    let started = Instant::now();
    while !done() {
        assert!(started.elapsed() < timeout, "{what}: not within {timeout:?}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    started.elapsed()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conformance_redis() {
    let Some(server) = Server::start() else { return };
    let backend = sole_node(&server.url()).await;
    hourglass_queue::kit::run(backend.clone(), "redis").await;
    // The sweep is a safety net for a lost hint, not what delivers.
    let fired = backend.fired();
    println!(
        "tasks and leases the shards' timers moved: {} at their deadline, {} by the sweep",
        fired.by_timer, fired.by_sweep
    );
    // One move by the sweep is allowed: a hint that reaches a shard just
    // after its sweep's alarm rang leaves the sweep to move its task.
    assert!(fired.by_timer > 0 && fired.by_sweep <= 1 + fired.by_timer / 10, "{fired:?}");
    backend.close();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conformance_cluster_of_three_masters() {
    let Some(cluster) = Cluster::start() else { return };
    let backend = sole_node(&cluster.url()).await;
    hourglass_queue::kit::run(backend.clone(), "cluster").await;
    // One queue's tasks are on every master.
    let batch: Vec<NewTask> = (0..64).map(|_| NewTask::new("{}", RunAt::Delay(3_600_000))).collect();
    for task in batch {
        backend.enqueue("spread", task).await.unwrap();
    }
    for master in &cluster.masters {
        let keys = master.cli(&["--scan", "--pattern", "{hg:*}:s:spread"]);
        let held = keys.lines().filter(|line| !line.is_empty()).count();
        println!("master on port {} holds the scheduled set of queue spread in {held} shards", master.port);
        assert!(held > 0, "every master holds some of the queue");
    }
    backend.close();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conformance_push_and_flow_redis() {
    let Some(server) = Server::start() else { return };
    let backend = sole_node(&server.url()).await;
    hourglass_queue::kit::push::run(backend.clone(), "redis").await;
    backend.close();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conformance_push_and_flow_cluster_of_three_masters() {
    let Some(cluster) = Cluster::start() else { return };
    let backend = sole_node(&cluster.url()).await;
    hourglass_queue::kit::push::run(backend.clone(), "cluster").await;
    backend.close();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shards_are_shared_out_and_a_stale_holder_is_fenced() {
    let Some(server) = Server::start() else { return };
    let (a, b, took) = two_nodes(&server.url(), 600).await;
    println!("two nodes shared the 16 shards {took:?} after the second started");
    // b is killed: a takes its shards when their leases run out.
    b.crash();
    let took = until("a takes over", Duration::from_secs(20), || a.held_shards().len() == 16).await;
    println!("a took over the shards of a killed node in {took:?} (lease 600 ms)");
    let (shard, holder) = a.holders()[0].clone();
    // a's old holder of a shard is stale once the shard was let go and taken
    // again: its writes are refused.
    assert!(a.fire_as(shard, &holder).await.unwrap(), "the current holder may fire");
    server.cli(&["DEL", &format!("{{hg:{shard}}}:owner")]);
    let c = node(&server.url(), 600).await;
    until("c holds some shards", Duration::from_secs(20), || !c.held_shards().is_empty()).await;
    let new_holder = redis_get(&server, &format!("{{hg:{shard}}}:owner"));
    if new_holder != holder {
        assert!(!a.fire_as(shard, &holder).await.unwrap(), "a stale holder is refused");
        println!("stale holder {holder} refused; the shard is held by {new_holder}");
    }
    a.close();
    c.close();
}

/// The heartbeat holds all of a node's shards: an idle node renews nothing
/// shard by shard (it renewed every shard each quarter lease, three
/// commands each: 16 shards cost 96 of an idle cluster's 165 commands a
/// second).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_node_renews_no_shard_one_by_one() {
    let Some(server) = Server::start() else { return };
    // A long lease: the node's own heartbeats are 20 s apart; the test beats.
    let a = holding_every_shard(&server.url(), 60_000, Duration::from_secs(20)).await;
    let holders = a.holders();
    server.cli(&["CONFIG", "RESETSTAT"]);
    const BEATS: u64 = 20;
    let started = Instant::now();
    for _ in 0..BEATS {
        a.beat().await.unwrap();
    }
    let info = server.cli(&["INFO", "commandstats"]);
    let count = |command| calls_in(&info, command);
    println!(
        "{BEATS} heartbeats of a node holding 16 shards: {} scripts, {} ZADD, {} ZRANGE (sweeps among them), {} GET, \
         {} TIME",
        count("evalsha"),
        count("zadd"),
        count("zrange"),
        count("get"),
        count("time")
    );
    // Redis's clock is read once in ten seconds, at the most (once for the
    // test's beats, unless the machine is very slow).
    let times = 1 + started.elapsed().as_secs() / 10;
    assert!(count("time") <= times, "the heartbeats read Redis's clock at most {times} times: {info}");
    // Only those run the heartbeat's script: the others are a ZADD and a
    // ZRANGE, the node having nothing counted to add.
    assert!(count("evalsha") <= times, "a script only to read the clock: {info}");
    assert!(count("zrange") >= BEATS, "each beat reads who is alive: {info}");
    for command in ["get", "set", "pexpire"] {
        assert_eq!(count(command), 0, "no shard's holder is read or renewed: {info}");
    }
    assert!(count("zadd") >= BEATS, "each beat is in the membership: {info}");
    assert_eq!(a.holders(), holders, "it holds the same shards, as the same holders");
    a.close();
}

/// A fault can leave a live node named holder of a shard it does not hold (a
/// release whose reply was lost, Redis's data rolled back). The node whose
/// turn the shard is takes it once the holder kept it two leases, and the
/// shard's tasks are delivered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shard_named_for_a_live_node_that_does_not_hold_it_is_taken() {
    let Some(server) = Server::start() else { return };
    let (a, b, _) = two_nodes(&server.url(), 600).await;
    let (shard, _) = b.holders()[0];
    let orphan = format!("{}:999999", a.node());
    server.cli(&["SET", &format!("{{hg:{shard}}}:owner"), &orphan]);
    // Tasks due soon, eight of them in that shard: b finds itself fenced
    // when it fires them, and a does not hold the shard.
    let started = Instant::now();
    let (mut ids, mut in_shard) = (Vec::new(), 0);
    while in_shard < 8 {
        let id = a.enqueue("orphan", NewTask::new("{}", RunAt::Delay(100))).await.unwrap().id;
        in_shard += usize::from(a.shard_of(id) == Some(shard));
        ids.push(id);
        assert!(ids.len() < 2_000, "tasks land in every shard");
    }
    let mut got = Vec::new();
    while got.len() < ids.len() {
        let claimed = a.claim("orphan", 100, 30_000, 20_000).await.unwrap();
        assert!(!claimed.is_empty(), "every task is delivered: {} of {}", got.len(), ids.len());
        got.extend(claimed.iter().map(|c| c.id));
    }
    got.sort();
    ids.sort();
    assert_eq!(got, ids);
    let holder = redis_get(&server, &format!("{{hg:{shard}}}:owner"));
    println!(
        "shard {shard} named for live node a, which did not hold it: {} tasks delivered by {:?}, \
         the shard now held by {holder} (leases of 600 ms)",
        ids.len(),
        started.elapsed()
    );
    assert_ne!(holder, orphan);
    until("b holds the shard again", Duration::from_secs(20), || b.held_shards().contains(&shard)).await;
    a.close();
    b.close();
}

fn redis_get(server: &Server, key: &str) -> String {
    server.cli(&["GET", key]).trim().to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_node_s_due_tasks_fire_late_never_lost() {
    let Some(server) = Server::start() else { return };
    let (a, b, _) = two_nodes(&server.url(), 600).await;
    // Tasks on every shard, due soon; then b dies with half of them.
    let mut ids = Vec::new();
    for _ in 0..32 {
        ids.push(a.enqueue("failover", NewTask::new("{}", RunAt::Delay(200))).await.unwrap().id);
    }
    b.crash();
    let started = Instant::now();
    let mut got = Vec::new();
    while got.len() < ids.len() {
        let claimed = a.claim("failover", 100, 30_000, 20_000).await.unwrap();
        assert!(!claimed.is_empty(), "every task is delivered");
        got.extend(claimed.iter().map(|c| c.id));
    }
    got.sort();
    ids.sort();
    assert_eq!(got, ids);
    println!(
        "32 tasks due 200 ms after enqueue, half on a killed node's shards: all delivered by {:?}",
        started.elapsed()
    );
    a.close();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_shut_down_hands_its_shards_over_at_once() {
    let Some(server) = Server::start() else { return };
    // Leases of 60 s, a heartbeat every 20 s: a leaves the membership, then
    // gives its shards back, and each release hints b's membership to read
    // at once, past the bound below (b's own next heartbeat is up to 20 s
    // away, and waiting a's heartbeat out would take 60 s).
    let (a, b, _) = two_nodes(&server.url(), 60_000).await;
    a.shutdown().await;
    let took = until("b takes them all", Duration::from_secs(10), || b.held_shards().len() == 16).await;
    println!("a node that shut down had its shards taken over in {took:?} (leases of 60 s)");
    b.close();
}

/// A node that gives a shard back hints it (`g SHARD`), and the node whose
/// turn it is takes it at once, not at its own next heartbeat: shards do not
/// sit unfired for up to a heartbeat while nodes join.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shard_given_back_is_taken_at_once_by_the_node_whose_turn_it_is() {
    let Some(server) = Server::start() else { return };
    // Leases of 60 s: each node's own heartbeats are 20 s apart (b's next
    // one 20 s after it starts); the test beats for them.
    let a = holding_every_shard(&server.url(), 60_000, Duration::from_secs(20)).await;
    server.cli(&["CONFIG", "RESETSTAT"]);
    let b = node(&server.url(), 60_000).await;
    // b's first heartbeat reads the membership and looks at each shard of its
    // share (its holder, then the holder's heartbeat: a `ZSCORE`, which
    // nothing else of an idle node sends), and takes none: a is alive.
    until("b looked at its share", Duration::from_secs(10), || calls(&server, "zscore") >= 8).await;
    assert!(b.held_shards().is_empty(), "b waits for a to give its share back");
    // a reads the membership with b in it and gives b's share back.
    let started = Instant::now();
    a.beat().await.unwrap();
    until("b takes its share", Duration::from_secs(10), || b.held_shards().len() == 8).await;
    println!("b took its share {:?} after a's heartbeat began (its own next heartbeat: 20 s)", started.elapsed());
    assert_eq!(a.held_shards().len(), 8);
    a.close();
    b.close();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acks_through_another_node_than_the_claim() {
    let Some(server) = Server::start() else { return };
    let a = sole_node(&server.url()).await;
    let b = node(&server.url(), 2_000).await;
    let batch: Vec<NewTask> = (0..3).map(|_| NewTask::new("{}", RunAt::Delay(0))).collect();
    a.enqueue_batch("acked-elsewhere", batch).await.unwrap();
    let claimed = a.claim("acked-elsewhere", 3, 30_000, 20_000).await.unwrap();
    assert_eq!(claimed.len(), 3);
    // b never saw these tasks: it learns their queue from their records.
    let stale = (claimed[1].id, claimed[0].lease);
    let acks =
        [(claimed[0].id, claimed[0].lease), stale, (claimed[2].id, claimed[2].lease), (u64::MAX, claimed[0].lease)];
    let answers = b.ack_batch(&acks).await.unwrap();
    assert_eq!(answers, [Ok(()), Err(QueueError::StaleLease(stale.0)), Ok(()), Err(QueueError::NotFound(u64::MAX))]);
    assert_eq!(a.get(claimed[0].id).await, Err(QueueError::NotFound(claimed[0].id)));
    assert_eq!(a.queue("acked-elsewhere").await.unwrap().leased, 1);
    a.close();
    b.close();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn setup_fails_with_errors_of_its_own() {
    use std::error::Error;

    use hourglass_redis::ConnectError;

    let Some(server) = Server::start() else { return };
    let first = node(&server.url(), 2_000).await;
    first.close();
    let mut options = RedisOptions::new(server.url().parse().unwrap());
    options.shards = 8;
    let Err(error) = RedisBackend::connect(options).await else { panic!("a shard count not the store's") };
    assert!(matches!(error, ConnectError::ShardsDiffer { store: 16, asked: 8, .. }), "{error:?}");
    let message = error.to_string();
    assert!(message.contains("has 16 shards, not 8") && !message.contains("--"), "names no flag: {message}");

    let nowhere = format!("redis://127.0.0.1:{}", hourglass_test_support::free_port());
    let connecting = RedisBackend::connect(RedisOptions::new(nowhere.parse().unwrap()));
    let Err(error) = tokio::time::timeout(Duration::from_secs(60), connecting).await.expect("gives up") else {
        panic!("nothing listens there")
    };
    assert!(matches!(error, ConnectError::Unreachable { .. }), "{error:?}");
    assert_eq!(error.to_string(), format!("cannot reach redis at {nowhere}"));
    assert!(error.source().is_some(), "the cause is kept");
}

/// Counts of a command Redis ran since its stats were reset, scripts' calls
/// included.
fn calls(server: &Server, command: &str) -> u64 {
    calls_in(&server.cli(&["INFO", "commandstats"]), command)
}

/// Keys a claim script names: t p h lseq paused, then a queue's eight
/// (`lua/claim.lua`); no other script names as many.
const CLAIM_SCRIPT_KEYS: &str = "13";

/// Resets `masters`' counts of commands, and logs every command from now.
pub(crate) fn reset_stats(masters: &[&Server]) {
    for master in masters {
        master.cli(&["CONFIG", "RESETSTAT"]);
        master.cli(&["CONFIG", "SET", "slowlog-log-slower-than", "0"]);
        master.cli(&["CONFIG", "SET", "slowlog-max-len", "100000"]);
        master.cli(&["SLOWLOG", "RESET"]);
    }
}

/// Claim scripts `masters` ran since [`reset_stats`]: `EVALSHA sha 13 ...`
/// in their logs of commands.
pub(crate) fn claim_scripts(masters: &[&Server]) -> usize {
    masters
        .iter()
        .map(|master| {
            let log = master.cli(&["SLOWLOG", "GET", "-1"]);
            let lines: Vec<&str> = log.lines().map(str::trim).collect();
            lines.windows(3).filter(|w| w[0].eq_ignore_ascii_case("evalsha") && w[2] == CLAIM_SCRIPT_KEYS).count()
        })
        .sum()
}

/// Counts of a command in the answer to `INFO commandstats`.
fn calls_in(stats: &str, command: &str) -> u64 {
    let line = stats.lines().find(|line| line.starts_with(&format!("cmdstat_{command}:")));
    line.and_then(|line| line.split("calls=").nth(1)?.split(',').next()?.parse().ok()).unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiting_claim_asks_redis_once_a_look() {
    let Some(server) = Server::start() else { return };
    let backend = sole_node(&server.url()).await;
    // Due tasks on every shard of a paused queue: each look at the queue
    // asks every shard what it has due (one ZCARD each), and is refused.
    for _ in 0..32 {
        backend.enqueue("held", NewTask::new("{}", RunAt::Delay(0))).await.unwrap();
    }
    backend.pause_queue("held", hourglass_queue::Pause::Indefinitely).await.unwrap();
    server.cli(&["CONFIG", "RESETSTAT"]);
    let started = Instant::now();
    let claimed = backend.claim("held", 1, 30_000, 2_500).await.unwrap();
    assert!(claimed.is_empty() && started.elapsed() >= Duration::from_millis(2_500));
    // A look at once, then one each CLAIM_RECHECK_MS, and one at the end of
    // the wait: the long-poll's second look after arming asks nothing.
    let looks = calls(&server, "zcard") / 16;
    println!("a claim that waited 2.5 s on a paused queue looked {looks} times");
    assert!((3..=5).contains(&looks), "{looks} looks");
    backend.close();
}
