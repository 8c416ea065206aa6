//! Queues: pauses (indefinite or until a time) across restarts, deleting
//! the dead, the counters, priorities, own leases and takes.

use hourglass_queue::prelude::*;
use hourglass_queue::{limits, Nack, NewTask, Pause, QueueError, RunAt, Status, TaskState};

use super::{later, task, Harness, T0_MS};
use crate::deadline;

#[tokio::test]
async fn a_paused_queue_hands_out_nothing_until_resumed_even_across_a_restart() {
    let h = Harness::new();
    let id = h.engine.enqueue("q", task("1", RunAt::Delay(0))).await.unwrap().id;
    h.engine.enqueue("other", task("2", RunAt::Delay(0))).await.unwrap();
    let stats = h.engine.pause_queue("q", Pause::Indefinitely).await.unwrap();
    assert!(stats.paused);
    assert_eq!(stats.due, 1, "the due task waits");
    assert!(h.engine.claim("q", 10, 1_000, 0).await.unwrap().is_empty(), "a paused queue hands out nothing");
    assert_eq!(h.engine.claim("other", 10, 1_000, 0).await.unwrap().len(), 1, "other queues go on");
    // Enqueues and timers go on while paused.
    h.engine.enqueue("q", task("3", RunAt::Delay(500))).await.unwrap();
    h.advance(500).await;
    assert_eq!(h.engine.queue("q").await.unwrap().due, 2);
    // Pausing again changes nothing; the pause survives a restart.
    assert!(h.engine.pause_queue("q", Pause::Indefinitely).await.unwrap().paused);
    let h = h.restart();
    let stats = h.engine.queue("q").await.unwrap();
    assert!(stats.paused, "paused after the restart");
    assert!(h.engine.claim("q", 10, 1_000, 0).await.unwrap().is_empty());
    // A claim that waits is woken by the resume.
    let mut waiting = tokio::spawn({
        let engine = h.engine.clone();
        async move { engine.claim("q", 10, 1_000, 30_000).await }
    });
    deadline::still_waiting("a waiting claim of a paused queue", &mut waiting).await;
    assert!(!h.engine.pause_queue("q", Pause::Resume).await.unwrap().paused);
    let claimed = deadline::within("the waiting claim", waiting).await.unwrap().unwrap();
    assert_eq!(claimed.len(), 2, "resumed, both due tasks are handed out");
    assert_eq!(claimed[0].id, id, "oldest due first");
    let h = h.restart();
    assert!(!h.engine.queue("q").await.unwrap().paused, "the resume survives a restart");
    // A queue never used can be paused ahead of its first task; bad names are refused.
    assert!(h.engine.pause_queue("later", Pause::Indefinitely).await.unwrap().paused);
    let error = h.engine.pause_queue("bad name", Pause::Indefinitely).await.unwrap_err();
    assert!(matches!(error, QueueError::Invalid(_)), "{error}");
}

#[tokio::test]
async fn dead_tasks_are_deleted_in_bounded_writes_and_nothing_else_is() {
    let h = Harness::new();
    let mut dead = Vec::new();
    for n in 0..5 {
        let new = NewTask { max_attempts: Some(1), ..task(&n.to_string(), RunAt::Delay(0)) };
        dead.push(h.engine.enqueue("q", new).await.unwrap().id);
    }
    let alive = h.engine.enqueue("q", later(60_000)).await.unwrap().id;
    let elsewhere = h.engine.enqueue("other", NewTask { max_attempts: Some(1), ..later(0) }).await.unwrap().id;
    for claimed in h.engine.claim("q", 10, 1_000, 0).await.unwrap() {
        h.engine.nack(claimed.id, claimed.lease, Nack::default()).await.unwrap();
    }
    let other = h.engine.claim("other", 1, 1_000, 0).await.unwrap().pop().unwrap();
    h.engine.nack(other.id, other.lease, Nack::default()).await.unwrap();
    assert_eq!(h.engine.queue("q").await.unwrap().dead, 5);
    let first = h.engine.delete_dead("q", 3).await.unwrap();
    assert_eq!(first, dead[..3], "oldest ids first, at most max");
    let rest = h.engine.delete_dead("q", 3).await.unwrap();
    assert_eq!(rest, dead[3..], "fewer than max: none left");
    assert!(h.engine.delete_dead("q", 3).await.unwrap().is_empty());
    assert!(h.engine.delete_dead("never", 3).await.unwrap().is_empty());
    assert!(matches!(h.engine.delete_dead("q", 0).await, Err(QueueError::Invalid(_))));
    assert!(matches!(h.engine.delete_dead("q", limits::LIST_MAX + 1).await, Err(QueueError::Invalid(_))));
    let h = h.restart();
    for id in &dead {
        assert!(matches!(h.engine.get(*id).await, Err(QueueError::NotFound(_))), "task {id} stays deleted");
    }
    assert_eq!(h.engine.get(alive).await.unwrap().status, Status::Scheduled);
    assert_eq!(h.engine.get(elsewhere).await.unwrap().status, Status::Dead, "another queue's dead stay");
    assert_eq!(h.engine.totals().await.tasks, 2);
}

#[tokio::test]
async fn queue_counters_and_the_writer_s_commits_are_counted() {
    let h = Harness::new();
    for n in 0..3 {
        h.engine.enqueue("q", task(&n.to_string(), RunAt::Delay(0))).await.unwrap();
    }
    let claimed = h.engine.claim("q", 2, 1_000, 0).await.unwrap();
    h.engine.ack(claimed[0].id, claimed[0].lease).await.unwrap();
    let stats = h.engine.queue("q").await.unwrap();
    assert_eq!((stats.enqueued, stats.delivered, stats.acked), (3, 2, 1));
    // Both deliveries were less than a second late: in every bucket from 1 s up.
    let at_one_second = limits_bucket(1_000_000);
    assert_eq!(stats.lateness.buckets[at_one_second], 2);
    assert_eq!(*stats.lateness.buckets.last().unwrap(), 2);
    let storage = h.engine.storage().await.expect("the engine counts its commits");
    assert!(storage.commits >= 4, "three enqueues, a claim and an ack: {storage:?}");
    assert_eq!(storage.failed, 0);
    assert!(storage.commit_us_sum > 0, "commits take time: {storage:?}");
    assert_eq!(*storage.batch_buckets.last().unwrap(), storage.commits, "no commit is over the writer's bound");
    // Each enqueue writes its task and the next id; the claim two leases; the ack one delete.
    assert_eq!(storage.mutations, 3 * 2 + 2 + 1, "{storage:?}");
    assert_eq!(storage.batch_buckets[1], storage.commits, "none carried more than 4 changes: {storage:?}");
}

fn limits_bucket(bound_us: u64) -> usize {
    hourglass_queue::LATENESS_BUCKETS_US.iter().position(|&b| b == bound_us).unwrap()
}

#[tokio::test]
async fn a_nack_s_reason_is_the_task_s_last_error_until_the_next_failure_and_survives_a_restart() {
    let h = Harness::new();
    let id = h.engine.enqueue("q", NewTask { max_attempts: Some(3), ..later(0) }).await.unwrap().id;
    let first = h.engine.claim("q", 1, 1_000, 0).await.unwrap().remove(0);
    let reason = "SMTP 451: mailbox busy, try again";
    let info = h.engine.nack(id, first.lease, Nack::after(0).because(reason)).await.unwrap();
    assert_eq!(info.task.last_error.as_deref(), Some(reason));
    let memory_with_error = h.engine.totals().await.memory_bytes;
    let h = h.restart();
    assert_eq!(h.engine.get(id).await.unwrap().task.last_error.as_deref(), Some(reason), "kept across a restart");
    assert_eq!(h.engine.totals().await.memory_bytes, memory_with_error, "charged the same after a restart");
    // A lease that runs out says so.
    let second = h.engine.claim("q", 1, 1_000, 0).await.unwrap().remove(0);
    h.advance(1_000).await;
    deadline::within("the writer's settlements", h.engine.flushed()).await;
    let info = h.engine.get(second.id).await.unwrap();
    assert_eq!((info.task.attempt, info.task.last_error.as_deref()), (2, Some("lease expired")));
    // A nack without a reason clears it; the charge goes with it.
    h.advance(10_000).await;
    let third = h.engine.claim("q", 1, 1_000, 0).await.unwrap().remove(0);
    let info = h.engine.nack(id, third.lease, Nack::default()).await.unwrap();
    assert_eq!((info.status, info.task.last_error), (Status::Dead, None));
    assert!(h.engine.totals().await.memory_bytes < memory_with_error);
    h.engine.check_invariants().unwrap();
}

#[tokio::test]
async fn a_pause_until_a_time_ends_by_itself_even_across_a_restart() {
    let h = Harness::new();
    h.engine.enqueue("q", later(0)).await.unwrap();
    let stats = h.engine.pause_queue("q", Pause::Until(T0_MS + 1_000)).await.unwrap();
    assert_eq!((stats.paused, stats.paused_until_ms), (true, Some(T0_MS + 1_000)));
    assert!(h.engine.claim("q", 1, 1_000, 0).await.unwrap().is_empty());
    let h = h.restart();
    let stats = h.engine.queue("q").await.unwrap();
    assert_eq!((stats.paused, stats.paused_until_ms), (true, Some(T0_MS + 1_000)), "the end survives a restart");
    assert!(h.engine.claim("q", 1, 1_000, 0).await.unwrap().is_empty());
    h.advance(1_000).await;
    assert!(!h.engine.queue("q").await.unwrap().paused, "over at its end");
    assert_eq!(h.engine.claim("q", 1, 1_000, 0).await.unwrap().len(), 1);
    // An indefinite pause replaces a timed one.
    h.engine.pause_queue("q", Pause::Until(T0_MS + 5_000)).await.unwrap();
    let stats = h.engine.pause_queue("q", Pause::Indefinitely).await.unwrap();
    assert_eq!((stats.paused, stats.paused_until_ms), (true, None));
    h.advance(10_000).await;
    assert!(h.engine.queue("q").await.unwrap().paused);
}

#[tokio::test]
async fn due_tasks_go_by_priority_then_due_time_and_across_queues() {
    let h = Harness::new();
    let with = |priority: u32, delay_ms: u64| NewTask { priority: Some(priority), ..later(delay_ms) };
    let low = h.engine.enqueue("q", with(2_000, 0)).await.unwrap().id;
    let old_urgent = h.engine.enqueue("q", with(1, 0)).await.unwrap().id;
    h.advance(10).await;
    let new_urgent = h.engine.enqueue("q", with(1, 0)).await.unwrap().id;
    let default = h.engine.enqueue("q", later(0)).await.unwrap().id;
    let stats = h.engine.queue("q").await.unwrap();
    assert_eq!((stats.due, stats.urgent, stats.oldest_due_ms), (4, 2, Some(T0_MS)));
    let order: Vec<u64> = h.engine.claim("q", 10, 1_000, 0).await.unwrap().iter().map(|c| c.id).collect();
    assert_eq!(order, [old_urgent, new_urgent, default, low], "priority, then the oldest due");
    // Across queues: the most urgent of any.
    h.engine.enqueue("a", with(5, 0)).await.unwrap();
    let b = h.engine.enqueue("b", with(3, 0)).await.unwrap().id;
    let claimed = h.engine.claim_any(&["a", "b"], 1_000, 0).await.unwrap().unwrap();
    assert_eq!(claimed.id, b);
    // A nack may change the priority, and it is kept across a restart.
    let a = h.engine.claim_any(&["a", "b"], 1_000, 0).await.unwrap().unwrap();
    let info =
        h.engine.nack(a.id, a.lease, Nack { delay_ms: Some(0), priority: Some(0), ..Nack::default() }).await.unwrap();
    assert_eq!(info.task.priority, 0);
    let h = h.restart();
    assert_eq!(h.engine.get(a.id).await.unwrap().task.priority, 0);
}

#[tokio::test]
async fn an_own_lease_unlimited_attempts_take_and_cancel_unleased() {
    let h = Harness::new();
    let new = NewTask { lease_ms: Some(5_000), max_attempts: Some(limits::ATTEMPTS_UNLIMITED), ..later(0) };
    let id = h.engine.enqueue("q", new).await.unwrap().id;
    let claimed = h.engine.claim("q", 1, 1_000, 0).await.unwrap().remove(0);
    assert_eq!(claimed.lease_until_ms, T0_MS + 5_000, "its own lease, not the claim's");
    assert!(matches!(h.engine.cancel_unleased(id).await, Err(QueueError::Conflict(_))), "only its holder removes it");
    assert!(matches!(h.engine.take(id, 1_000).await, Err(QueueError::Conflict(_))));
    // Its lease runs out many times: due again at once each time, never dead.
    for attempt in 1..=20 {
        h.advance(5_000).await;
        deadline::within("the writer's settlements", h.engine.flushed()).await;
        let info = h.engine.get(id).await.unwrap();
        assert_eq!((info.status, info.task.attempt), (Status::Due, attempt), "no backoff, no death");
        h.engine.claim("q", 1, 1_000, 0).await.unwrap();
    }
    // A dead or waiting task can be taken by id, then cancelled once given back.
    let TaskState::Leased { lease, .. } = h.engine.get(id).await.unwrap().task.state else { panic!("leased") };
    let info = h.engine.nack(id, lease, Nack { dead: true, ..Nack::default() }).await.unwrap();
    assert_eq!(info.status, Status::Dead, "buried at once, attempts left or not");
    let taken = h.engine.take(id, 1_000).await.unwrap();
    h.engine.nack(id, taken.lease, Nack::after(60_000)).await.unwrap();
    h.engine.cancel_unleased(id).await.unwrap();
    assert!(matches!(h.engine.get(id).await, Err(QueueError::NotFound(_))));
}

#[tokio::test]
async fn a_rate_limit_runs_on_the_engine_s_clock() {
    use hourglass_queue::{Flow, QueueSettings};
    let h = Harness::new();
    let flow = Flow { rate_per_s: Some(2.0), burst: Some(2), max_in_flight: None };
    h.engine.put_settings("q", QueueSettings { push: None, flow }).await.unwrap();
    for _ in 0..5 {
        h.engine.enqueue("q", later(0)).await.unwrap();
    }
    assert_eq!(h.engine.claim("q", 10, 60_000, 0).await.unwrap().len(), 2, "the burst");
    assert!(h.engine.claim("q", 10, 60_000, 0).await.unwrap().is_empty(), "the bucket is empty");
    h.advance(499).await;
    assert!(h.engine.claim("q", 10, 60_000, 0).await.unwrap().is_empty(), "a token every 500 ms");
    h.advance(1).await;
    assert_eq!(h.engine.claim("q", 10, 60_000, 0).await.unwrap().len(), 1);
    h.advance(10_000).await;
    assert_eq!(h.engine.claim("q", 10, 60_000, 0).await.unwrap().len(), 2, "never more than the burst");
    assert_eq!(h.engine.queue("q").await.unwrap().leased, 5);
}
