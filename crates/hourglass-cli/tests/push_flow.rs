//! Flow control of push delivery through the real binary, with a real
//! receiver: a queue's rate paces its deliveries, its in-flight cap bounds
//! the requests the receiver holds at once (one node, and three nodes on a
//! Redis Cluster) and pull claims alike, and a target the outbound rules
//! refuse at delivery never reaches the receiver.
//!
//! Real time: the rate is measured over ten seconds from the arrival times
//! the receiver recorded, printed, and held to 10 %.

use std::time::Duration;

use hourglass_client::wire::{ClaimRequest, NewTasks, PushTarget, QueueSettings, State};
use hourglass_client::Client;
use hourglass_test_support::hourglass::Hourglass;
use hourglass_test_support::receiver::Receiver;
use hourglass_test_support::redis::Cluster;
use hourglass_test_support::within_async;

use crate::{client, serve, Seq};

pub(crate) const WAIT: Duration = Duration::from_secs(60);

/// Settings that push to `url` with a timeout of `timeout_ms`.
pub(crate) fn push_to(url: String, timeout_ms: u32) -> QueueSettings {
    let push = PushTarget { url, method: None, headers: Default::default(), timeout_ms: Some(timeout_ms) };
    QueueSettings { push: Some(push), ..QueueSettings::default() }
}

/// Enqueues `n` tasks due now on `queue` in batches; returns their ids.
pub(crate) async fn enqueue_due(client: &Client, queue: &str, n: u64) -> Vec<u64> {
    let mut ids = Vec::new();
    let mut first = 0;
    while first < n {
        let tasks = (first..n.min(first + 500)).map(|seq| Seq::task(seq, 0)).collect();
        let batch = client.enqueue_batch(queue, &NewTasks { tasks }).await.expect("a batch enqueued");
        ids.extend(batch.tasks.iter().map(|t| t.id));
        first += 500;
    }
    ids
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queue_rate_paces_its_pushes_within_ten_percent_over_ten_seconds() {
    const RATE: f64 = 40.0;
    const WINDOW: Duration = Duration::from_secs(10);
    let receiver = Receiver::start().await;
    let data = tempfile::tempdir().unwrap();
    let server = serve().data(data.path()).args(["--push-allow", &receiver.host_port()]).start();
    let client = client(&server, WAIT);
    let settings = QueueSettings { rate_per_s: Some(RATE), burst: Some(20), ..push_to(receiver.url("/ok"), 5_000) };
    client.put_settings("paced", &settings).await.unwrap();
    // More than the window takes, so that the queue never runs dry in it.
    enqueue_due(&client, "paced", (RATE * 14.0) as u64).await;

    // The first second is left out: the bucket's burst, and the batch landing. A
    // burst absorbs a claim's lateness; tokens a claim later than the burst lasts
    // would have had are lost (with a burst of 1, 35/s of 40 was measured at a
    // load average of 12). A burst of 20 absorbs 500 ms at 40/s; a bucket full
    // at the window's start adds at most 20 of 400 deliveries (5 %).
    let skip = Duration::from_secs(1);
    within_async(WAIT, "deliveries for eleven seconds", async || {
        let got = receiver.got();
        got.len() > 1 && got[got.len() - 1].at - got[0].at > skip + WINDOW
    })
    .await;
    let got = receiver.got();
    let start = got[0].at + skip;
    let in_window = got.iter().filter(|g| g.at >= start && g.at < start + WINDOW).count();
    let measured = in_window as f64 / WINDOW.as_secs_f64();
    println!("rate: set {RATE}/s, measured {measured:.1}/s ({in_window} deliveries in {WINDOW:?})");
    assert!((measured - RATE).abs() <= RATE * 0.1, "measured {measured}/s against a rate of {RATE}/s");
}

/// Pushes `n` tasks to `/busy` (each held a while, so that they overlap)
/// through `nodes` with a cap of `cap`; the receiver must never hold more.
async fn cap_holds(nodes: &[Hourglass], receiver: &Receiver, cap: u32, n: u64) {
    let first = client(&nodes[0], WAIT);
    let settings = QueueSettings { max_in_flight: Some(cap), ..push_to(receiver.url("/busy"), 5_000) };
    first.put_settings("capped", &settings).await.unwrap();
    let ids = enqueue_due(&first, "capped", n).await;
    within_async(WAIT, "every task pushed", async || receiver.task_ids().len() == ids.len()).await;
    println!("in flight: cap {cap}, the receiver held at most {}", receiver.max_in_flight());
    assert!(receiver.max_in_flight() <= cap as usize, "{} held at once, cap {cap}", receiver.max_in_flight());
    assert!(receiver.max_in_flight() >= 2, "the deliveries overlapped, or the cap was not put to the test");
    assert_eq!(receiver.requests(), ids.len(), "each task once: no node delivered what another held");
}

/// A pull queue with a cap of two: two claimed and held, a third claim
/// (on any node) gets nothing until one is acked.
async fn pull_claims_obey_the_cap(nodes: &[Hourglass]) {
    let first = client(&nodes[0], WAIT);
    let settings = QueueSettings { max_in_flight: Some(2), ..QueueSettings::default() };
    first.put_settings("pulled", &settings).await.unwrap();
    enqueue_due(&first, "pulled", 5).await;
    let claim = |max| ClaimRequest { max: Some(max), lease_ms: Some(60_000), wait_ms: Some(0), acks: None };
    let mut held = Vec::new();
    within_async(WAIT, "two tasks claimed", async || {
        held.extend(first.claim("pulled", &claim(5)).await.unwrap().tasks);
        held.len() >= 2
    })
    .await;
    assert_eq!(held.len(), 2, "a claim took more than the cap");
    for node in nodes {
        let more = client(node, WAIT).claim("pulled", &claim(5)).await.unwrap();
        assert!(more.tasks.is_empty(), "a claim while the cap is full got {} tasks", more.tasks.len());
    }
    let done = held.pop().unwrap();
    first.ack(done.id, done.lease).await.unwrap();
    let last = nodes.last().unwrap();
    let mut freed = Vec::new();
    within_async(WAIT, "the freed slot claimed", async || {
        freed.extend(client(last, WAIT).claim("pulled", &claim(5)).await.unwrap().tasks);
        !freed.is_empty()
    })
    .await;
    assert_eq!(freed.len(), 1, "one slot was freed");
}

/// Three nodes started with `args`, once each has reached its Redis.
pub(crate) async fn on_redis(args: &[&str]) -> Vec<Hourglass> {
    let nodes: Vec<Hourglass> = (0..3).map(|_| serve().args(args).start()).collect();
    for node in &nodes {
        // An error while the node hands its socket from the answers it gives
        // while waiting to the API's is a "not yet".
        within_async(WAIT, "the node reached its Redis", async || client(node, WAIT).healthz().await.is_ok()).await;
    }
    nodes
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_in_flight_bounds_pushes_and_pull_claims_on_one_node() {
    let receiver = Receiver::start().await;
    let data = tempfile::tempdir().unwrap();
    let server = serve().data(data.path()).args(["--push-allow", &receiver.host_port()]).start();
    let nodes = [server];
    cap_holds(&nodes, &receiver, 3, 120).await;
    pull_claims_obey_the_cap(&nodes).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_in_flight_bounds_pushes_and_pull_claims_across_three_nodes_on_a_cluster() {
    let Some(cluster) = Cluster::start() else { return };
    let receiver = Receiver::start().await;
    let store = cluster.url();
    let nodes = on_redis(&["--store", &store, "--push-allow", &receiver.host_port()]).await;
    cap_holds(&nodes, &receiver, 4, 150).await;
    let senders: std::collections::HashSet<_> = receiver.got().iter().map(|g| g.peer).collect();
    println!("in flight on three nodes: {} connections delivered", senders.len());
    pull_claims_obey_the_cap(&nodes).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_loopback_target_is_refused_at_delivery_without_push_allow() {
    let receiver = Receiver::start().await;
    let data = tempfile::tempdir().unwrap();
    // Set up while the receiver is allowed, with the queue paused...
    let mut allowed = serve().data(data.path()).args(["--push-allow", &receiver.host_port()]).start();
    let before = client(&allowed, WAIT);
    before.put_settings("aimed", &push_to(receiver.url("/ok"), 1_000)).await.unwrap();
    before.pause_queue("aimed").await.unwrap();
    let ids = enqueue_due(&before, "aimed", 3).await;
    assert!(allowed.terminate().success());

    // ...then delivered by a server that does not allow it: only the check
    // on the address connected to stands between the tasks and the receiver.
    let server = serve().data(data.path()).start();
    let client = client(&server, WAIT);
    client.resume_queue("aimed").await.unwrap();
    for id in ids {
        let mut task = None;
        within_async(WAIT, "the task is dead", async || {
            task = Some(client.get(id).await.unwrap());
            task.as_ref().is_some_and(|t| t.state == State::Dead)
        })
        .await;
        let error = task.unwrap().last_error.unwrap_or_default();
        assert!(error.contains("refused") && error.contains("127.0.0.1"), "{error}");
    }
    assert_eq!(receiver.requests(), 0, "a refused target reached the receiver");
}
