//! A node started before its Cluster: it waits, joins once the Cluster is up,
//! and a claim then hands out every due task.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use hourglass_queue::kit::one_claim_takes_every_due;
use hourglass_queue::prelude::*;
use hourglass_queue::{NewTask, RunAt};
use hourglass_redis::{RedisBackend, RedisOptions};
use hourglass_test_support::redis::Cluster;
use hourglass_test_support::within_async;

/// Long enough for a Cluster to start and form on a loaded machine.
const WAIT: Duration = Duration::from_secs(120);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_started_before_its_cluster_waits_then_joins() {
    let Some(mut cluster) = Cluster::not_started() else { return };
    let options = RedisOptions::new(cluster.url().parse().unwrap());
    let failed = Arc::new(AtomicUsize::new(0));
    let counted = failed.clone();
    let connecting = tokio::spawn(RedisBackend::connect_within(options, WAIT, move |error| {
        assert!(error.is_unreachable(), "{error}");
        counted.fetch_add(1, Ordering::SeqCst);
    }));
    within_async(WAIT, "the node waits for its cluster", async || failed.load(Ordering::SeqCst) > 0).await;
    let cluster = tokio::task::spawn_blocking(move || {
        cluster.start_now();
        cluster
    })
    .await
    .unwrap();
    let backend = connecting.await.unwrap().expect("the node joins its cluster");
    println!("the node tried {} times before its cluster was up", failed.load(Ordering::SeqCst));
    let batch = (0..20).map(|_| NewTask::new("{}", RunAt::Delay(0))).collect();
    let due: Vec<u64> = backend.enqueue_batch("late", batch).await.unwrap().iter().map(|e| e.id).collect();
    one_claim_takes_every_due(&*backend, "late", &due, 50).await;
    backend.close();
    drop(cluster);
}
