//! The sweeps, the net for lost hints: a node looks at its idle shards
//! together (`shards.rs`, `sweep_idle`), and finds the first task of one
//! whose hint was lost.

use hourglass_redis::SWEEP_IDLE_MS;

use super::*;

/// Within two idle sweeps, and the shard's fire after.
const WITHIN: Duration = Duration::from_millis(2 * SWEEP_IDLE_MS + 10_000);

/// Enqueues a task due in 100 ms with its shard's hint lost, and waits until
/// the shard's timer moves it. The shard had no deadline (all were idle), so
/// it had no alarm, and with the hint lost only the node's sweep of its idle
/// shards can wake it: by the sweep's own read if the task was due by then,
/// else by the alarm that read set.
async fn found_by_a_sweep(backend: &Arc<RedisBackend>) -> Duration {
    let moved = |fired: hourglass_redis::Fired| fired.by_sweep + fired.by_timer;
    let before = moved(backend.fired());
    backend.lose_head_hints(true);
    backend.enqueue("unhinted", NewTask::new("{}", RunAt::Delay(100))).await.unwrap();
    let took = until("a sweep finds the task", WITHIN, || moved(backend.fired()) > before).await;
    backend.lose_head_hints(false);
    println!("a task whose hint was lost was moved {took:?} after its enqueue: {:?}", backend.fired());
    took
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_shards_are_swept_together_and_find_a_task_whose_hint_was_lost() {
    let Some(server) = Server::start() else { return };
    let backend = sole_node(&server.url()).await;
    // Idle: two sweeps of the node's 16 shards, as one EXISTS each, and no
    // shard's heads read on its own (a heartbeat's ZRANGE is the membership's,
    // one with each ZADD at most).
    server.cli(&["CONFIG", "RESETSTAT"]);
    until("two idle sweeps", WITHIN, || calls(&server, "exists") >= 2).await;
    let info = server.cli(&["INFO", "commandstats"]);
    let (exists, zadd, zrange) = (calls_in(&info, "exists"), calls_in(&info, "zadd"), calls_in(&info, "zrange"));
    println!("idle, 16 shards: {exists} EXISTS, {zadd} ZADD, {zrange} ZRANGE");
    assert!(zrange <= zadd, "no shard's heads read by a sweep of its own: {info}");

    found_by_a_sweep(&backend).await;
    let claimed = backend.claim("unhinted", 1, 30_000, 10_000).await.unwrap();
    assert_eq!(claimed.len(), 1, "the task is due and claimed");
    backend.ack(claimed[0].id, claimed[0].lease).await.unwrap();
    backend.close();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_node_sweeps_its_idle_shards_across_slots() {
    let Some(cluster) = Cluster::start() else { return };
    let backend = sole_node(&cluster.url()).await;
    found_by_a_sweep(&backend).await;
    backend.close();
}
