//! What a 2xx means, step by step, over a store a test can hold back or fail:
//! nothing is visible before it is durable, and a failed write leaves no trace.

use std::sync::Arc;

use hourglass_embedded::{Engine, Options};
use hourglass_queue::prelude::*;
use hourglass_queue::{ManualWallClock, NewTask, QueueError, RunAt, Status};

use crate::sim::CrashStore;

const T0_MS: u64 = 1_800_000_000_000;

fn open(store: &CrashStore) -> Arc<Engine> {
    let clock = Arc::new(ManualWallClock::at_ms(T0_MS));
    Engine::open(Box::new(store.clone()), Options::default(), clock).expect("open the engine")
}

fn keyed(n: u32) -> NewTask {
    NewTask { key: Some("order-42".into()), ..NewTask::new(format!("{n}"), RunAt::Delay(0)) }
}

/// Looks again until `condition` holds: the engine's writer is another
/// thread, which a loaded machine may not run for a while. A count of yields
/// was not enough: 100,000 of them passed in release, on two busy cores,
/// before the writer reached the store's gate (and the writer, held there,
/// then kept the test from ending). So the bound is time, and generous.
async fn until(mut condition: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while std::time::Instant::now() < deadline {
        if condition() {
            return;
        }
        tokio::task::yield_now().await;
    }
    panic!("the condition did not hold within 60 s");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_repeated_key_waits_for_the_first_enqueue_and_a_failed_one_leaves_no_trace() {
    let store = CrashStore::new(1, 0.0);
    let engine = open(&store);
    store.close_gate();
    let first = tokio::spawn({
        let engine = engine.clone();
        async move { engine.enqueue("q", keyed(1)).await }
    });
    // The first enqueue is being written (held at the gate): its key is
    // taken, and nothing of it is visible, not even in the counts.
    until(|| store.held_at_gate()).await;
    assert_eq!(engine.totals().await.tasks, 0);
    let second = tokio::spawn({
        let engine = engine.clone();
        async move { engine.enqueue("q", keyed(2)).await }
    });
    for _ in 0..1_000 {
        tokio::task::yield_now().await;
    }
    assert!(!second.is_finished(), "a repeated key answered before the first enqueue was durable");
    assert!(engine.claim("q", 10, 1_000, 0).await.unwrap().is_empty(), "nothing is claimable yet");
    // The write fails: the first enqueue is refused and leaves no trace; the
    // second, which waited, makes a task of its own.
    store.fail_with_probability(1.0);
    store.open_gate();
    assert!(matches!(first.await.unwrap(), Err(QueueError::Storage(_))));
    until(|| second.is_finished()).await;
    store.fail_with_probability(0.0);
    let second = second.await.unwrap();
    // The second enqueue either met the failing store too, or ran after it
    // was mended: either way no answer names the failed task.
    match second {
        Ok(done) => {
            assert!(done.created, "the failed enqueue's key was free again");
            assert_eq!(&*engine.get(done.id).await.unwrap().payload, "2");
        }
        Err(error) => assert!(matches!(error, QueueError::Storage(_)), "{error}"),
    }
    assert!(store.durable_ids().len() <= 1);
    engine.check_invariants().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reschedule_is_seen_only_once_durable() {
    let store = CrashStore::new(2, 0.0);
    let engine = open(&store);
    let id = engine.enqueue("q", NewTask::new("1", RunAt::Delay(60_000))).await.unwrap().id;
    store.close_gate();
    let moving = tokio::spawn({
        let engine = engine.clone();
        async move { engine.reschedule(id, RunAt::Delay(0)).await }
    });
    let reader = tokio::spawn({
        let engine = engine.clone();
        async move {
            // Waits while the reschedule is on its way, then sees it whole.
            tokio::task::yield_now().await;
            engine.get(id).await
        }
    });
    for _ in 0..1_000 {
        tokio::task::yield_now().await;
    }
    assert!(!moving.is_finished() && !reader.is_finished(), "nothing answers before the write is durable");
    assert!(engine.claim("q", 1, 1_000, 0).await.unwrap().is_empty(), "not claimable before it is durable");
    store.open_gate();
    assert_eq!(moving.await.unwrap().unwrap().task.run_at_ms, T0_MS);
    let seen = reader.await.unwrap().unwrap();
    assert_eq!((seen.task.run_at_ms, seen.status), (T0_MS, Status::Due));
    assert_eq!(engine.claim("q", 1, 1_000, 0).await.unwrap().len(), 1);
}

#[tokio::test]
async fn failed_writes_change_nothing() {
    let store = CrashStore::new(3, 0.0);
    let engine = open(&store);
    let id = engine.enqueue("q", NewTask::new("1", RunAt::Delay(60_000))).await.unwrap().id;
    store.fail_with_probability(1.0);
    assert!(matches!(engine.enqueue("q", keyed(2)).await, Err(QueueError::Storage(_))));
    assert!(matches!(engine.reschedule(id, RunAt::Delay(0)).await, Err(QueueError::Storage(_))));
    assert!(matches!(engine.cancel(id).await, Err(QueueError::Storage(_))));
    store.fail_with_probability(0.0);
    let info = engine.get(id).await.unwrap();
    assert_eq!((info.task.run_at_ms, info.status), (T0_MS + 60_000, Status::Scheduled), "the old due time stands");
    assert_eq!(engine.totals().await.tasks, 1, "the failed enqueue left nothing");
    assert_eq!(engine.totals().await.cancelled, 0);
    assert!(engine.find_by_key("q", "order-42").await.unwrap().is_none(), "nor its key");
    assert!(engine.enqueue("q", keyed(3)).await.unwrap().created);
    engine.cancel(id).await.unwrap();
    assert_eq!(engine.get(id).await, Err(QueueError::NotFound(id)));
    engine.check_invariants().unwrap();
}
