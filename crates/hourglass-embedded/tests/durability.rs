//! What a 2xx means, step by step, over a store a test can hold back or fail:
//! nothing is visible before it is durable, and a failed write leaves no trace.

use std::sync::Arc;

use hourglass_embedded::{Engine, Fsync, Options};
use hourglass_queue::prelude::*;
use hourglass_queue::{ManualWallClock, NewTask, QueueError, RunAt, Status};

use crate::deadline::{still_waiting, until, within};
use crate::sim::CrashStore;

const T0_MS: u64 = 1_800_000_000_000;

fn open(store: &CrashStore) -> Arc<Engine> {
    let clock = Arc::new(ManualWallClock::at_ms(T0_MS));
    Engine::open(Box::new(store.clone()), Options::default(), clock).expect("open the engine")
}

fn keyed(n: u32) -> NewTask {
    NewTask { key: Some("order-42".into()), ..NewTask::new(format!("{n}"), RunAt::Delay(0)) }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_repeated_key_waits_for_the_first_enqueue_and_a_failed_one_leaves_no_trace() {
    let store = CrashStore::new(1, 0.0);
    let engine = open(&store);
    let gate = store.close_gate();
    let first = tokio::spawn({
        let engine = engine.clone();
        async move { engine.enqueue("q", keyed(1)).await }
    });
    // The first enqueue is being written (held at the gate): its key is
    // taken, and nothing of it is visible, not even in the counts.
    until("the first enqueue is held at the gate", || store.held_at_gate()).await;
    assert_eq!(engine.totals().await.tasks, 0);
    let mut second = tokio::spawn({
        let engine = engine.clone();
        async move { engine.enqueue("q", keyed(2)).await }
    });
    still_waiting("an enqueue of a key whose first enqueue is not durable", &mut second).await;
    assert!(engine.claim("q", 10, 1_000, 0).await.unwrap().is_empty(), "nothing is claimable yet");
    // The write fails: the first enqueue is refused and leaves no trace; the
    // second, which waited, makes a task of its own.
    store.fail_with_probability(1.0);
    gate.open();
    assert!(matches!(within("the first enqueue", first).await.unwrap(), Err(QueueError::Storage(_))));
    until("the second enqueue answers", || second.is_finished()).await;
    store.fail_with_probability(0.0);
    let second = within("the second enqueue", second).await.unwrap();
    // The second enqueue either met the failing store too, or ran after it
    // was mended: either way no answer names the failed task.
    match second {
        Ok(done) => {
            assert!(done.created, "the failed enqueue's key was free again");
            assert_eq!(engine.get(done.id).await.unwrap().payload, "2");
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
    let gate = store.close_gate();
    let mut moving = tokio::spawn({
        let engine = engine.clone();
        async move { engine.reschedule(id, RunAt::Delay(0)).await }
    });
    // Held at the gate, the reschedule has hidden the task: a read started
    // now must wait for it, and then sees it whole. (Started before, a read
    // could answer with the old due time, which is no failure of the engine.)
    until("the reschedule is held at the gate", || store.held_at_gate()).await;
    let mut reader = tokio::spawn({
        let engine = engine.clone();
        async move { engine.get(id).await }
    });
    still_waiting("a read of a task whose reschedule is not durable", &mut reader).await;
    still_waiting("a reschedule that is not durable", &mut moving).await;
    assert!(engine.claim("q", 1, 1_000, 0).await.unwrap().is_empty(), "not claimable before it is durable");
    gate.open();
    assert_eq!(within("the reschedule", moving).await.unwrap().unwrap().task.run_at_ms, T0_MS);
    let seen = within("the read", reader).await.unwrap().unwrap();
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

/// In the relaxed mode a crash loses the last interval's enqueues, and the
/// next id they stored with them; the ids they were answered with are never
/// given to other tasks after the restart (a client may still hold them).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_relaxed_restart_never_gives_an_id_again() {
    // No periodic sync within the test: every enqueue after the first
    // (whose next id is stored durably) is committed without fsync.
    let relaxed = || Options { fsync: Fsync::EveryMs(3_600_000), ..Options::default() };
    let mut lost = 0;
    for seed in 0..8 {
        let store = CrashStore::new(seed, 0.0);
        let clock = Arc::new(ManualWallClock::at_ms(T0_MS));
        let engine = Engine::open(Box::new(store.clone()), relaxed(), clock.clone()).unwrap();
        let mut answered = Vec::new();
        for n in 0..10 {
            answered.push(engine.enqueue("q", NewTask::new(format!("{n}"), RunAt::Delay(60_000))).await.unwrap().id);
        }
        // The crash keeps a prefix of what was not durable, as the seed says.
        store.crash(false);
        engine.close();
        drop(engine);
        store.restart();
        let engine = Engine::open(Box::new(store.clone()), relaxed(), clock).unwrap();
        lost += answered.len() - engine.totals().await.tasks;
        let fresh = engine.enqueue("q", NewTask::new("after", RunAt::Delay(0))).await.unwrap().id;
        let highest = answered.iter().copied().max().unwrap();
        assert!(fresh > highest, "seed {seed}: id {fresh} given after the restart; {highest} was answered before it");
        engine.check_invariants().unwrap();
    }
    println!("enqueues the crashes lost, over 8 seeds: {lost} of 80; no id given twice");
    assert!(lost > 0, "no crash lost an enqueue: the test did not test the loss");
}

/// The incident of a hung suite: a test failing while a write was held at
/// the gate left the writer held, and the engine's drop (in the runtime's
/// shutdown) waited for it forever. The gate opens as the failing test
/// unwinds, so the failure is reported.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[should_panic(expected = "failing while a write is held")]
async fn a_test_failing_while_a_write_is_held_fails_and_does_not_hang() {
    let store = CrashStore::new(4, 0.0);
    let engine = open(&store);
    let id = engine.enqueue("q", NewTask::new("1", RunAt::Delay(60_000))).await.unwrap().id;
    let _gate = store.close_gate();
    let _moving = tokio::spawn({
        let engine = engine.clone();
        async move { engine.reschedule(id, RunAt::Delay(0)).await }
    });
    until("the reschedule is held at the gate", || store.held_at_gate()).await;
    panic!("failing while a write is held");
}
