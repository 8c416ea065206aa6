//! The conformance kit (feature `kit`): one suite for the seam, schedules
//! included (`schedules.rs`). Every check
//! runs against any [`Backend`], on the
//! real clock (Redis's time is real). Each check has queues of its own, so
//! the checks can share a backend. Waits are claims that long-poll for what
//! the check expects, never sleeps; the few bounds on time are generous.

pub mod push;
pub mod schedules;

use std::collections::HashSet;
use std::sync::Arc;

use crate::{
    Backend, Cursor, ListRequest, Nack, NewTask, Pause, QueueError, RunAt, Status, SystemWallClock, TaskState,
    WallClock,
};

/// Long enough for anything on a loaded machine; no check waits this long
/// unless it fails.
const WAIT_MS: u64 = 20_000;
const LEASE_MS: u64 = 30_000;

fn now_ms() -> u64 {
    SystemWallClock.now_ms()
}

fn due(payload: &str) -> NewTask {
    NewTask::new(payload, RunAt::Delay(0))
}

fn at(payload: &str, run_at_ms: u64) -> NewTask {
    NewTask::new(payload, RunAt::At(run_at_ms))
}

/// Every check, against `backend`; queue names start with `prefix`. Panics
/// with the check's message at the first that fails.
pub async fn run(backend: Arc<dyn Backend>, prefix: &str) {
    let b = &*backend;
    let q = |check: &str| format!("{prefix}-{check}");
    lifecycle(b, &q("life")).await;
    bytes(b, &q("bytes")).await;
    claim_order(b, &q("order")).await;
    claim_any(b, &q("any-a"), &q("any-b")).await;
    claims_take_every_due(b, &q("all-due")).await;
    lease_expiry(b, &q("expiry")).await;
    nack_dead_retry(b, &q("nack")).await;
    keys(b, &q("keys")).await;
    batches(b, &q("batch")).await;
    waiting_claim(b, &q("wait")).await;
    repeating(b, &q("every")).await;
    reschedule_cancel_take(b, &q("edit")).await;
    pause(b, &q("pause")).await;
    listing(b, &q("list")).await;
    own_lease_and_expiry(b, &q("terms")).await;
    bad_input(b, &q("bad")).await;
    schedules::run(b, prefix).await;
}

/// Payloads are bytes: any bytes come back exactly, from a read, a claim, a
/// listing, a batch and a nack, large ones too (kept apart from the task's
/// record on the embedded store).
async fn bytes(b: &dyn Backend, queue: &str) {
    let every_byte: Vec<u8> = (0..=255).collect();
    let large: Vec<u8> = (0..40_000u32).map(|n| (n.wrapping_mul(2_654_435_761) >> 24) as u8).collect();
    let sent = [every_byte.clone(), vec![], vec![0xff, 0xfe, 0x00], large];
    let one = b.enqueue(queue, NewTask::new(sent[0].clone(), RunAt::Delay(0))).await.unwrap().id;
    let batch = b
        .enqueue_batch(queue, sent[1..].iter().map(|bytes| NewTask::new(bytes.clone(), RunAt::Delay(0))).collect())
        .await
        .unwrap();
    let ids: Vec<u64> = std::iter::once(one).chain(batch.iter().map(|done| done.id)).collect();
    for (id, bytes) in ids.iter().zip(&sent) {
        assert_eq!(b.get(*id).await.unwrap().payload, bytes[..], "a read of task {id}");
    }
    let listed = b.list(queue, ListRequest { status: None, after: None, limit: 10 }).await.unwrap();
    for info in &listed.tasks {
        let at = ids.iter().position(|&id| id == info.task.id).expect("one of the queue's tasks");
        assert_eq!(info.payload, sent[at][..], "the listing's task {}", info.task.id);
    }
    let claimed = b.claim(queue, 10, LEASE_MS, WAIT_MS).await.unwrap();
    assert_eq!(claimed.len(), sent.len());
    for task in &claimed {
        let at = ids.iter().position(|&id| id == task.id).expect("one of the queue's tasks");
        assert_eq!(task.payload, sent[at][..], "the claim of task {}", task.id);
        b.nack(task.id, task.lease, Nack::after(0)).await.unwrap();
    }
    for task in b.claim(queue, 10, LEASE_MS, WAIT_MS).await.unwrap() {
        let at = ids.iter().position(|&id| id == task.id).expect("one of the queue's tasks");
        assert_eq!((task.attempt, &task.payload[..]), (2, &sent[at][..]), "delivered again, the same bytes");
        b.ack(task.id, task.lease).await.unwrap();
    }
}

async fn lifecycle(b: &dyn Backend, queue: &str) {
    let enqueued = b.enqueue(queue, due(r#"{"order":42}"#)).await.unwrap();
    assert!(enqueued.created);
    let info = b.get(enqueued.id).await.unwrap();
    assert_eq!((info.payload.as_text().unwrap(), info.status, info.task.attempt), (r#"{"order":42}"#, Status::Due, 0));
    let claimed = b.claim(queue, 10, LEASE_MS, WAIT_MS).await.unwrap();
    assert_eq!(claimed.len(), 1);
    let task = &claimed[0];
    assert_eq!((task.id, task.attempt, task.payload.as_text().unwrap()), (enqueued.id, 1, r#"{"order":42}"#));
    assert!(task.lease_until_ms >= task.run_at_ms + LEASE_MS);
    assert_eq!(b.get(task.id).await.unwrap().status, Status::Leased);
    let stats = b.queue(queue).await.unwrap();
    assert_eq!((stats.leased, stats.due, stats.delivered), (1, 0, 1));
    b.ack(task.id, task.lease).await.unwrap();
    assert_eq!(b.get(task.id).await, Err(QueueError::NotFound(task.id)));
    assert_eq!(b.ack(task.id, task.lease).await, Err(QueueError::NotFound(task.id)));
    assert!(b.claim(queue, 10, LEASE_MS, 0).await.unwrap().is_empty());
    assert_eq!(b.queue(queue).await.unwrap().acked, 1);
}

async fn claim_order(b: &dyn Backend, queue: &str) {
    // One at a time, so that a sharded backend spreads them.
    let t0 = now_ms() - 10_000;
    let mut expected = Vec::new();
    for (priority, run_at_ms) in [(5, t0 + 3), (1, t0 + 9), (5, t0 + 1), (1, t0 + 2), (1024, t0), (0, t0 + 50)] {
        let mut task = at("{}", run_at_ms);
        task.priority = Some(priority);
        let id = b.enqueue(queue, task).await.unwrap().id;
        expected.push((priority, run_at_ms, id));
    }
    expected.sort();
    let mut got = Vec::new();
    let mut leases = Vec::new();
    for _ in 0..expected.len() {
        let claimed = b.claim(queue, 1, LEASE_MS, WAIT_MS).await.unwrap();
        got.push(claimed[0].id);
        leases.push((claimed[0].id, claimed[0].lease));
    }
    assert_eq!(got, expected.iter().map(|e| e.2).collect::<Vec<_>>(), "priority, then due time");
    let stale = (leases[0].0, leases[1].1);
    let answers = b.ack_batch(&[leases[1], stale, leases[2]]).await.unwrap();
    assert_eq!(answers, [Ok(()), Err(QueueError::StaleLease(stale.0)), Ok(())]);
    assert!(matches!(b.ack_batch(&[]).await, Err(QueueError::Invalid(_))));
    // The same ack twice in a batch: the second finds the task gone.
    let answers = b.ack_batch(&[leases[3], leases[3]]).await.unwrap();
    assert_eq!(answers, [Ok(()), Err(QueueError::NotFound(leases[3].0))]);
    let stats = b.queue(queue).await.unwrap();
    assert_eq!((stats.leased, stats.due, stats.acked), (3, 0, 3));
}

async fn claim_any(b: &dyn Backend, a: &str, z: &str) {
    let t0 = now_ms() - 1_000;
    let first = b.enqueue(z, at("{}", t0)).await.unwrap().id;
    let second = b.enqueue(a, at("{}", t0 + 5)).await.unwrap().id;
    let mut urgent = at("{}", t0 + 9);
    urgent.priority = Some(0);
    let most_urgent = b.enqueue(a, urgent).await.unwrap().id;
    let mut order = Vec::new();
    for _ in 0..3 {
        order.push(b.claim_any(&[a, z], LEASE_MS, WAIT_MS).await.unwrap().unwrap().id);
    }
    assert_eq!(order, [most_urgent, first, second]);
    assert!(b.claim_any(&[a, z], LEASE_MS, 0).await.unwrap().is_none());
}

/// Due tasks enqueued in every way a backend may spread them (one at a time,
/// in one batch, by idempotency key), several counts: one claim with room
/// for them all hands them all out.
async fn claims_take_every_due(b: &dyn Backend, queue: &str) {
    for n in [1, 2, 5, 20, 50, 150] {
        for (way, spread) in ["one at a time", "a batch", "by key"].into_iter().enumerate() {
            let queue = format!("{queue}-{n}-{way}");
            let mut due_ids = Vec::new();
            match spread {
                "a batch" => {
                    let batch = (0..n).map(|_| due("{}")).collect();
                    due_ids.extend(b.enqueue_batch(&queue, batch).await.unwrap().iter().map(|e| e.id));
                }
                _ => {
                    for i in 0..n {
                        let mut task = due("{}");
                        task.key = (spread == "by key").then(|| format!("k{i}"));
                        due_ids.push(b.enqueue(&queue, task).await.unwrap().id);
                    }
                }
            }
            for max in [n, n + 1, 3 * n] {
                one_claim_takes_every_due(b, &queue, &due_ids, max).await;
            }
        }
    }
}

/// `due_ids` are every due task of `queue`, at least one: one claim of `max`
/// (at least as many), without waiting, hands them all out, wherever the
/// backend keeps them. They are due again after it (given back at once).
pub async fn one_claim_takes_every_due(b: &dyn Backend, queue: &str, due_ids: &[u64], max: usize) {
    assert!(!due_ids.is_empty() && max >= due_ids.len(), "{} due, a claim of {max}", due_ids.len());
    let claimed = b.claim(queue, max, LEASE_MS, 0).await.unwrap();
    let mut got: Vec<u64> = claimed.iter().map(|task| task.id).collect();
    got.sort_unstable();
    let mut expected = due_ids.to_vec();
    expected.sort_unstable();
    assert_eq!(got, expected, "{} due in queue {queue}: one claim of {max} hands them all out", due_ids.len());
    for task in claimed {
        b.nack(task.id, task.lease, Nack::after(0)).await.unwrap();
    }
}

async fn lease_expiry(b: &dyn Backend, queue: &str) {
    let id = b.enqueue(queue, due("{}")).await.unwrap().id;
    let first = b.claim(queue, 1, 100, WAIT_MS).await.unwrap().remove(0);
    // Waits for the redelivery: the lease runs out after 100 ms.
    let again = b.claim(queue, 1, LEASE_MS, WAIT_MS).await.unwrap().remove(0);
    assert_eq!((again.id, again.attempt), (id, 2));
    assert_ne!(again.lease, first.lease);
    assert_eq!(b.ack(id, first.lease).await, Err(QueueError::StaleLease(id)));
    assert_eq!(b.extend(id, first.lease, 1_000).await, Err(QueueError::StaleLease(id)));
    let info = b.get(id).await.unwrap();
    assert_eq!(info.task.last_error.as_deref(), Some("lease expired"));
    // Extended, the lease holds.
    let until = b.extend(id, again.lease, 60_000).await.unwrap();
    assert!(until >= now_ms() + 50_000);
    assert!(b.claim(queue, 1, LEASE_MS, 300).await.unwrap().is_empty(), "an extended lease is not redelivered");
    b.ack(id, again.lease).await.unwrap();
}

async fn nack_dead_retry(b: &dyn Backend, queue: &str) {
    let mut task = due(r#"{"n":1}"#);
    task.max_attempts = Some(2);
    let id = b.enqueue(queue, task).await.unwrap().id;
    let claimed = b.claim(queue, 1, LEASE_MS, WAIT_MS).await.unwrap().remove(0);
    let info = b.nack(id, claimed.lease, Nack::after(60_000).because("smtp 451")).await.unwrap();
    assert_eq!(
        (info.status, info.payload.as_text().unwrap()),
        (Status::Scheduled, r#"{"n":1}"#),
        "the task as it now is"
    );
    assert_eq!(info.task.last_error.as_deref(), Some("smtp 451"));
    assert!(info.task.run_at_ms >= now_ms() + 50_000);
    assert_eq!(b.nack(id, claimed.lease, Nack::default()).await, Err(QueueError::StaleLease(id)));
    // Due now again, then out of attempts.
    b.reschedule(id, RunAt::Delay(0)).await.unwrap();
    let claimed = b.claim(queue, 1, LEASE_MS, WAIT_MS).await.unwrap().remove(0);
    assert_eq!(claimed.attempt, 2);
    let info = b.nack(id, claimed.lease, Nack { priority: Some(3), ..Nack::default() }).await.unwrap();
    assert_eq!((info.status, info.task.priority, info.task.last_error), (Status::Dead, 3, None));
    assert_eq!(b.queue(queue).await.unwrap().dead, 1);
    let dead = b.list(queue, ListRequest { status: Some(Status::Dead), after: None, limit: 10 }).await.unwrap();
    assert_eq!(dead.tasks.iter().map(|t| t.task.id).collect::<Vec<_>>(), [id]);
    let retried = b.retry(id).await.unwrap();
    assert_eq!((retried.status, retried.task.attempt), (Status::Due, 0));
    assert!(matches!(b.retry(id).await, Err(QueueError::Conflict(_))));
    // Buried at once, then deleted with the other dead.
    let claimed = b.claim(queue, 1, LEASE_MS, WAIT_MS).await.unwrap().remove(0);
    b.nack(id, claimed.lease, Nack { dead: true, ..Nack::default() }).await.unwrap();
    let other = b.enqueue(queue, due("{}")).await.unwrap().id;
    let claimed = b.claim(queue, 1, LEASE_MS, WAIT_MS).await.unwrap().remove(0);
    b.nack(other, claimed.lease, Nack { dead: true, ..Nack::default() }).await.unwrap();
    let mut deleted = b.delete_dead(queue, 1).await.unwrap();
    deleted.extend(b.delete_dead(queue, 10).await.unwrap());
    deleted.sort();
    let mut both = vec![id, other];
    both.sort();
    assert_eq!(deleted, both);
    assert_eq!(b.queue(queue).await.unwrap().dead, 0);
}

async fn keys(b: &dyn Backend, queue: &str) {
    let mut task = NewTask::new(r#"{"k":1}"#, RunAt::Delay(60_000));
    task.key = Some("order-42".into());
    let first = b.enqueue(queue, task.clone()).await.unwrap();
    let again = b.enqueue(queue, task.clone()).await.unwrap();
    assert!(first.created && !again.created);
    assert_eq!((again.id, again.run_at_ms), (first.id, first.run_at_ms));
    // In one batch: a held key, a new one, no key, the new one again.
    let keyed = |key: Option<&str>, delay_ms| {
        let mut task = NewTask::new("{}", RunAt::Delay(delay_ms));
        task.key = key.map(Into::into);
        task
    };
    let batch =
        vec![keyed(Some("order-42"), 1_000), keyed(Some("order-7"), 50_000), keyed(None, 0), keyed(Some("order-7"), 0)];
    let done = b.enqueue_batch(queue, batch).await.unwrap();
    assert_eq!(done.iter().map(|e| e.created).collect::<Vec<_>>(), [false, true, true, false]);
    assert_eq!((done[0].id, done[0].run_at_ms), (first.id, first.run_at_ms), "a held key answers its task");
    assert_eq!((done[3].id, done[3].run_at_ms), (done[1].id, done[1].run_at_ms), "a key repeated in a batch");
    assert!(done[1].id != done[2].id && done[1].run_at_ms > done[2].run_at_ms);
    for made in [&done[1], &done[2]] {
        b.cancel(made.id).await.unwrap();
    }
    let found = b.find_by_key(queue, "order-42").await.unwrap().unwrap();
    assert_eq!(found.task.key.as_deref(), Some("order-42"));
    assert!(b.find_by_key(queue, "order-43").await.unwrap().is_none());
    b.cancel(first.id).await.unwrap();
    assert!(b.find_by_key(queue, "order-42").await.unwrap().is_none());
    assert!(b.enqueue(queue, task).await.unwrap().created, "a key is free once its task is gone");
}

async fn batches(b: &dyn Backend, queue: &str) {
    let batch: Vec<NewTask> = (0..20).map(|i| NewTask::new(format!(r#"{{"i":{i}}}"#), RunAt::Delay(60_000))).collect();
    let done = b.enqueue_batch(queue, batch).await.unwrap();
    assert_eq!(done.len(), 20);
    assert_eq!(done.iter().map(|e| e.id).collect::<HashSet<_>>().len(), 20, "ids are unique");
    let mut bad: Vec<NewTask> = (0..3).map(|_| due("{}")).collect();
    bad[2].max_attempts = Some(1_000_000);
    assert!(matches!(b.enqueue_batch(queue, bad).await, Err(QueueError::Invalid(m)) if m.contains("task 2")));
    let stats = b.queue(queue).await.unwrap();
    assert_eq!((stats.scheduled, stats.due), (20, 0), "a refused batch adds nothing");

    // Due and scheduled tasks in one batch, the earliest scheduled not first:
    // the due ones are claimed at once, in claim order, and the earliest
    // scheduled one when it is due, not before.
    let mixed = format!("{queue}-mixed");
    let mut urgent = due("urgent");
    urgent.priority = Some(0);
    let batch =
        vec![NewTask::new("late", RunAt::Delay(60_000)), due("due"), NewTask::new("soon", RunAt::Delay(300)), urgent];
    let done = b.enqueue_batch(&mixed, batch).await.unwrap();
    let claimed = b.claim(&mixed, 10, LEASE_MS, WAIT_MS).await.unwrap();
    let payloads: Vec<_> = claimed.iter().map(|task| task.payload.as_text().unwrap()).collect();
    assert_eq!(payloads, ["urgent", "due"]);
    let soon = b.claim(&mixed, 10, LEASE_MS, WAIT_MS).await.unwrap();
    assert_eq!((soon.len(), soon[0].id), (1, done[2].id));
    assert!(now_ms() >= done[2].run_at_ms, "not early");
    for task in claimed.iter().chain(&soon) {
        b.ack(task.id, task.lease).await.unwrap();
    }
    let stats = b.queue(&mixed).await.unwrap();
    assert_eq!((stats.scheduled, stats.due, stats.leased), (1, 0, 0));
    b.cancel(done[0].id).await.unwrap();
}

async fn waiting_claim(b: &dyn Backend, queue: &str) {
    let enqueued = b.enqueue(queue, NewTask::new("{}", RunAt::Delay(300))).await.unwrap();
    let claimed = b.claim(queue, 1, LEASE_MS, WAIT_MS).await.unwrap();
    let late_ms = now_ms() as i64 - enqueued.run_at_ms as i64;
    assert_eq!(claimed.len(), 1);
    assert!(late_ms >= 0, "handed out {} ms early", -late_ms);
    println!("a waiting claim got a task due in 300 ms {late_ms} ms after its due time");
    b.ack(claimed[0].id, claimed[0].lease).await.unwrap();
}

async fn repeating(b: &dyn Backend, queue: &str) {
    let mut task = due("{}");
    task.every_ms = Some(60_000);
    let enqueued = b.enqueue(queue, task).await.unwrap();
    let claimed = b.claim(queue, 1, LEASE_MS, WAIT_MS).await.unwrap().remove(0);
    b.ack(claimed.id, claimed.lease).await.unwrap();
    let info = b.get(enqueued.id).await.unwrap();
    assert_eq!((info.status, info.task.attempt), (Status::Scheduled, 0));
    assert_eq!(info.task.run_at_ms, enqueued.run_at_ms + 60_000, "on its grid");
    // Acked twice in one batch: the second finds it scheduled again, its
    // lease gone.
    b.reschedule(enqueued.id, RunAt::Delay(0)).await.unwrap();
    let claimed = b.claim(queue, 1, LEASE_MS, WAIT_MS).await.unwrap().remove(0);
    let lease = (claimed.id, claimed.lease);
    let answers = b.ack_batch(&[lease, lease]).await.unwrap();
    assert_eq!(answers, [Ok(()), Err(QueueError::StaleLease(claimed.id))]);
    assert_eq!(b.get(enqueued.id).await.unwrap().status, Status::Scheduled);
    b.cancel(enqueued.id).await.unwrap();
}

async fn reschedule_cancel_take(b: &dyn Backend, queue: &str) {
    let id = b.enqueue(queue, NewTask::new(r#"{"edit":1}"#, RunAt::Delay(60_000))).await.unwrap().id;
    let info = b.reschedule(id, RunAt::At(now_ms() - 5)).await.unwrap();
    assert_eq!((info.status, info.payload.as_text().unwrap()), (Status::Due, r#"{"edit":1}"#));
    let taken = b.take(id, LEASE_MS).await.unwrap();
    assert_eq!((taken.id, taken.attempt), (id, 1));
    assert!(matches!(b.take(id, LEASE_MS).await, Err(QueueError::Conflict(_))));
    assert!(matches!(b.reschedule(id, RunAt::Delay(0)).await, Err(QueueError::Conflict(_))));
    assert!(matches!(b.cancel_unleased(id).await, Err(QueueError::Conflict(_))));
    b.cancel(id).await.unwrap();
    assert_eq!(b.cancel(id).await, Err(QueueError::NotFound(id)));
    assert_eq!(b.ack(id, taken.lease).await, Err(QueueError::NotFound(id)));
    let other = b.enqueue(queue, NewTask::new("{}", RunAt::Delay(60_000))).await.unwrap().id;
    b.cancel_unleased(other).await.unwrap();
    assert_eq!(b.get(other).await, Err(QueueError::NotFound(other)));
    assert_eq!(b.get(u64::MAX).await, Err(QueueError::NotFound(u64::MAX)));
}

async fn pause(b: &dyn Backend, queue: &str) {
    let stats = b.pause_queue(queue, Pause::Indefinitely).await.unwrap();
    assert!(stats.paused);
    let id = b.enqueue(queue, due("{}")).await.unwrap().id;
    assert!(b.claim(queue, 1, LEASE_MS, 200).await.unwrap().is_empty(), "a paused queue hands out nothing");
    assert_eq!(b.queue(queue).await.unwrap().due, 1);
    // Far enough ahead that the pause is still to come when the backend
    // reads its clock, on a loaded machine.
    let until = now_ms() + 1_000;
    let stats = b.pause_queue(queue, Pause::Until(until)).await.unwrap();
    assert_eq!(stats.paused_until_ms, Some(until));
    // Waits out the timed pause.
    let claimed = b.claim(queue, 1, LEASE_MS, WAIT_MS).await.unwrap();
    assert_eq!(claimed[0].id, id);
    assert!(now_ms() >= until);
    b.pause_queue(queue, Pause::Indefinitely).await.unwrap();
    let second = b.enqueue(queue, due("{}")).await.unwrap().id;
    let resume = async {
        b.pause_queue(queue, Pause::Resume).await.unwrap();
    };
    let (claimed, ()) = tokio::join!(b.claim(queue, 1, LEASE_MS, WAIT_MS), resume);
    assert_eq!(claimed.unwrap()[0].id, second, "a resume wakes a waiting claim");
    assert!(!b.queue(queue).await.unwrap().paused);
}

async fn listing(b: &dyn Backend, queue: &str) {
    let t0 = now_ms();
    let mut scheduled = Vec::new();
    for i in 0..25u64 {
        // Pairs share a due time: ties go by id.
        scheduled.push(b.enqueue(queue, at("{}", t0 + 3_600_000 + (i / 2) * 7)).await.unwrap().id);
    }
    let mut due_ids = Vec::new();
    for i in 0..5u64 {
        due_ids.push(b.enqueue(queue, at("{}", t0 - 1_000 + i)).await.unwrap().id);
    }
    let page = |status, after, limit| ListRequest { status, after, limit };
    let mut listed = Vec::new();
    let mut after: Option<Cursor> = None;
    loop {
        let p = b.list(queue, page(Some(Status::Scheduled), after, 10)).await.unwrap();
        assert!(p.tasks.len() <= 10);
        listed.extend(p.tasks.iter().map(|t| (t.task.run_at_ms, t.task.id)));
        match p.next {
            Some(next) => after = Some(next),
            None => break,
        }
    }
    let mut expected: Vec<(u64, u64)> = Vec::new();
    for id in &scheduled {
        expected.push((b.get(*id).await.unwrap().task.run_at_ms, *id));
    }
    expected.sort();
    assert_eq!(listed, expected, "every scheduled task once, by due time then id");
    let due = b.list(queue, page(Some(Status::Due), None, 100)).await.unwrap();
    assert_eq!(due.tasks.iter().map(|t| t.task.id).collect::<Vec<_>>(), due_ids);
    // Every status, in pages of 7.
    let mut all = HashSet::new();
    let mut after = None;
    let mut pages = 0;
    loop {
        let p = b.list(queue, page(None, after, 7)).await.unwrap();
        pages += 1;
        for t in &p.tasks {
            assert!(all.insert(t.task.id), "task {} listed twice", t.task.id);
        }
        match p.next {
            Some(next) => after = Some(next),
            None => break,
        }
        assert!(pages < 100);
    }
    assert_eq!(all.len(), 30);
    assert!(matches!(b.list(queue, page(None, None, 0)).await, Err(QueueError::Invalid(_))));
}

async fn own_lease_and_expiry(b: &dyn Backend, queue: &str) {
    let mut task = due("{}");
    task.lease_ms = Some(150);
    task.max_attempts = Some(0);
    let id = b.enqueue(queue, task).await.unwrap().id;
    let claimed = b.claim(queue, 1, LEASE_MS, WAIT_MS).await.unwrap().remove(0);
    assert!(claimed.lease_until_ms < now_ms() + 1_000, "the task's own lease, not the claim's");
    // Unlimited attempts: due again at once, no backoff, never dead.
    for attempt in 2..=4 {
        let again = b.claim(queue, 1, LEASE_MS, WAIT_MS).await.unwrap().remove(0);
        assert_eq!((again.id, again.attempt), (id, attempt));
    }
    b.cancel(id).await.unwrap();
    // Not delivered by its expiry: dead, not late.
    let mut expiring = NewTask::new("{}", RunAt::Delay(0));
    expiring.expires = Some(RunAt::Delay(100));
    b.pause_queue(queue, Pause::Indefinitely).await.unwrap();
    let id = b.enqueue(queue, expiring).await.unwrap().id;
    let info = b.get(id).await.unwrap();
    let until = info.task.expires_at_ms.unwrap() + 50;
    b.pause_queue(queue, Pause::Until(until)).await.unwrap();
    assert!(b.claim(queue, 1, LEASE_MS, 2_000).await.unwrap().is_empty(), "never delivered late");
    let info = b.get(id).await.unwrap();
    assert!(info.task.dead_reason == crate::DeadReason::Expired && info.status == Status::Dead, "{info:?}");
}

async fn bad_input(b: &dyn Backend, queue: &str) {
    let invalid = |r: Result<_, QueueError>| matches!(r, Err(QueueError::Invalid(_)));
    assert!(invalid(b.enqueue("has space", due("{}")).await.map(|_| ())));
    assert!(invalid(b.claim(queue, 0, LEASE_MS, 0).await.map(|_| ())));
    assert!(invalid(b.claim(queue, 1, 1, 0).await.map(|_| ())));
    assert!(invalid(b.claim(queue, 1, LEASE_MS, 3_600_000).await.map(|_| ())));
    assert!(invalid(b.enqueue(queue, NewTask::new("{}", RunAt::Delay(u64::MAX))).await.map(|_| ())));
    assert!(invalid(b.enqueue_batch(queue, Vec::new()).await.map(|_| ())));
    assert!(invalid(b.find_by_key(queue, "").await.map(|_| ())));
    let huge = "x".repeat(2 << 20);
    assert!(matches!(b.enqueue(queue, due(&huge)).await, Err(QueueError::PayloadTooLarge { .. })));
    assert!(b.queue(queue).await.is_none_or(|q| q.scheduled + q.due == 0), "nothing was added");
    let id = b.enqueue(queue, due("{}")).await.unwrap().id;
    let claimed = b.claim(queue, 1, LEASE_MS, WAIT_MS).await.unwrap().remove(0);
    let long = "r".repeat(crate::limits::NACK_REASON_BYTES_MAX + 1);
    assert!(invalid(b.nack(id, claimed.lease, Nack::default().because(&long)).await.map(|_| ())));
    assert!(matches!(b.get(id).await.unwrap().task.state, TaskState::Leased { .. }), "a refused nack changes nothing");
}
