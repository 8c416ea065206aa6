//! The kit's checks of push delivery's data and of flow control: targets
//! kept with their tasks, settings kept with their queues, pull and push
//! claims each finding only their own tasks, and rates and caps on both.
//!
//! A push claim takes from every queue, so each check leaves no task of
//! push behind for the next (and the whole suite runs on a backend of its
//! own: see [`run`]).

use std::sync::Arc;

use super::{due, now_ms, LEASE_MS, WAIT_MS};
use crate::limits::{PUSH_LEASE_MARGIN_MS, PUSH_TIMEOUT_MS_DEFAULT};
use crate::{
    Backend, Claim, Claimed, Flow, HttpMethod, HttpTarget, Nack, NewTask, PushTarget, QueueError, QueueSettings, Status,
};

/// Every check of push and flow control against `backend`, whose push
/// claims nobody else makes meanwhile; queue names start with `prefix`.
pub async fn run(backend: Arc<dyn Backend>, prefix: &str) {
    let b = &*backend;
    let q = |check: &str| format!("{prefix}-{check}");
    own_targets(b, &q("own")).await;
    queue_targets(b, &q("queue"), &q("queue-other")).await;
    settings_checked(b, &q("settings")).await;
    in_flight_cap(b, &q("cap")).await;
    a_freed_slot_wakes_a_claim(b, &q("slot")).await;
    rate(b, &q("rate")).await;
}

fn target(url: &str) -> HttpTarget {
    HttpTarget {
        url: url.into(),
        method: HttpMethod::Put,
        headers: vec![("Authorization".into(), "Bearer t".into()), ("X-B".into(), "2".into())],
    }
}

fn aimed(url: &str) -> NewTask {
    NewTask { http: Some(target(url)), ..due("{\"push\":1}") }
}

async fn push_claim(b: &dyn Backend, max: usize, wait_ms: u64) -> Vec<Claimed> {
    b.claim_from(Claim::push(max, wait_ms).unwrap()).await.unwrap()
}

async fn ack_all(b: &dyn Backend, claimed: &[Claimed]) {
    for task in claimed {
        b.ack(task.id, task.lease).await.unwrap();
    }
}

async fn own_targets(b: &dyn Backend, queue: &str) {
    let id = b.enqueue(queue, aimed("https://receiver.example/hook")).await.unwrap().id;
    let info = b.get(id).await.unwrap();
    assert_eq!(info.task.http.as_deref(), Some(&target("https://receiver.example/hook")), "kept with the task");
    assert_eq!(info.status, Status::Due);
    assert!(b.claim(queue, 10, LEASE_MS, 0).await.unwrap().is_empty(), "a pull claim never gets a push task");
    let pull = b.enqueue(queue, due("{}")).await.unwrap().id;
    let claimed = push_claim(b, 10, WAIT_MS).await;
    assert_eq!(claimed.iter().map(|c| c.id).collect::<Vec<_>>(), [id], "a push claim gets only push tasks");
    let task = &claimed[0];
    let resolved = task.target.as_deref().expect("a push claim resolves the target");
    assert_eq!(
        (&resolved.http, resolved.timeout_ms),
        (&target("https://receiver.example/hook"), PUSH_TIMEOUT_MS_DEFAULT)
    );
    assert_eq!((task.payload.as_text().unwrap(), task.attempt), ("{\"push\":1}", 1));
    let lease_ms = u64::from(PUSH_TIMEOUT_MS_DEFAULT) + PUSH_LEASE_MARGIN_MS;
    assert!(task.lease_until_ms >= task.run_at_ms + lease_ms, "leased for the timeout and a margin");
    assert!(task.lease_until_ms <= now_ms() + lease_ms);
    assert_eq!(b.queue(queue).await.unwrap().leased, 1);
    // A 500, then a 410: a failed attempt, then dead at once with its reason.
    let info = b.nack(id, task.lease, Nack::after(0).because("HTTP 500: oops")).await.unwrap();
    assert_eq!(info.task.last_error.as_deref(), Some("HTTP 500: oops"));
    let again = push_claim(b, 10, WAIT_MS).await.remove(0);
    assert_eq!((again.id, again.attempt), (id, 2));
    let info = b.nack(id, again.lease, Nack::dead("HTTP 410: gone")).await.unwrap();
    assert_eq!((info.status, info.task.last_error.as_deref()), (Status::Dead, Some("HTTP 410: gone")));
    let retried = b.retry(id).await.unwrap();
    assert!(retried.task.http.is_some(), "a retried task keeps its target");
    b.cancel(id).await.unwrap();
    let pulled = b.claim(queue, 10, LEASE_MS, WAIT_MS).await.unwrap();
    assert_eq!(pulled.iter().map(|c| (c.id, c.target.is_none())).collect::<Vec<_>>(), [(pull, true)]);
    ack_all(b, &pulled).await;
    // In one batch, a task without a target and one with its own: each to
    // its own kind of claim.
    let done = b.enqueue_batch(queue, vec![due("{}"), aimed("https://receiver.example/hook")]).await.unwrap();
    let pushed = push_claim(b, 10, WAIT_MS).await;
    assert_eq!(pushed.iter().map(|c| c.id).collect::<Vec<_>>(), [done[1].id]);
    let pulled = b.claim(queue, 10, LEASE_MS, WAIT_MS).await.unwrap();
    assert_eq!(pulled.iter().map(|c| c.id).collect::<Vec<_>>(), [done[0].id]);
    ack_all(b, &pushed).await;
    ack_all(b, &pulled).await;
}

async fn queue_targets(b: &dyn Backend, queue: &str, other: &str) {
    assert_eq!(b.settings(queue).await.unwrap(), QueueSettings::default(), "a queue never set: the defaults");
    let waiting = b.enqueue(queue, due("{\"a\":1}")).await.unwrap().id;
    let push = Arc::new(PushTarget { http: target("https://queue.example/"), timeout_ms: 1_500 });
    let settings = QueueSettings { push: Some(push.clone()), flow: Flow::default() };
    assert_eq!(b.put_settings(queue, settings.clone()).await.unwrap(), settings);
    assert_eq!(b.settings(queue).await.unwrap(), settings, "read back");
    assert!(b.claim(queue, 10, LEASE_MS, 0).await.unwrap().is_empty(), "a due task moved to push");
    let own = b.enqueue(queue, aimed("https://own.example/")).await.unwrap().id;
    let elsewhere = b.enqueue(other, aimed("https://other.example/")).await.unwrap().id;
    let mut claimed = push_claim(b, 10, WAIT_MS).await;
    while claimed.len() < 3 {
        let more = push_claim(b, 10, WAIT_MS).await;
        assert!(!more.is_empty(), "every push task of every queue is claimed");
        claimed.extend(more);
    }
    claimed.sort_by_key(|c| c.id);
    let mut ids = [waiting, own, elsewhere];
    ids.sort();
    assert_eq!(claimed.iter().map(|c| c.id).collect::<Vec<_>>(), ids);
    let by_id = |id| claimed.iter().find(|c| c.id == id).unwrap().target.clone().unwrap();
    assert_eq!(by_id(waiting), push, "the queue's target");
    assert_eq!((&*by_id(own).http.url, by_id(own).timeout_ms), ("https://own.example/", 1_500), "own, queue's timeout");
    assert_eq!(by_id(elsewhere).timeout_ms, PUSH_TIMEOUT_MS_DEFAULT);
    // Back to pull: the queue's tasks without a target of their own follow.
    let back = claimed.iter().find(|c| c.id == waiting).unwrap();
    b.nack(waiting, back.lease, Nack::after(0)).await.unwrap();
    b.put_settings(queue, QueueSettings::default()).await.unwrap();
    let pulled = b.claim(queue, 10, LEASE_MS, WAIT_MS).await.unwrap();
    assert_eq!(pulled.iter().map(|c| c.id).collect::<Vec<_>>(), [waiting]);
    ack_all(b, &pulled).await;
    ack_all(b, &claimed.into_iter().filter(|c| c.id != waiting).collect::<Vec<_>>()).await;
}

async fn settings_checked(b: &dyn Backend, queue: &str) {
    fn invalid<T>(r: Result<T, QueueError>) -> bool {
        matches!(r, Err(QueueError::Invalid(_)))
    }
    let bad_target =
        QueueSettings { push: Some(Arc::new(PushTarget::new(HttpTarget::post("ftp://x/")))), ..Default::default() };
    assert!(invalid(b.put_settings(queue, bad_target).await));
    let bad_flow = QueueSettings { flow: Flow { max_in_flight: Some(0), ..Flow::default() }, ..Default::default() };
    assert!(invalid(b.put_settings(queue, bad_flow).await));
    assert!(invalid(b.put_settings("has space", QueueSettings::default()).await));
    assert!(invalid(b.settings("has space").await));
    assert_eq!(b.settings(queue).await.unwrap(), QueueSettings::default(), "a refused put changes nothing");
    let mut header = target("https://x.example/");
    header.headers.push(("Hourglass-Task-Id".into(), "1".into()));
    let refused = NewTask { http: Some(header), ..due("{}") };
    assert!(invalid(b.enqueue(queue, refused).await.map(|_| ())));
    assert!(b.queue(queue).await.is_none_or(|q| q.due == 0), "nothing was added");
}

async fn in_flight_cap(b: &dyn Backend, queue: &str) {
    let flow = Flow { max_in_flight: Some(2), ..Flow::default() };
    b.put_settings(queue, QueueSettings { push: None, flow }).await.unwrap();
    for _ in 0..3 {
        b.enqueue(queue, due("{}")).await.unwrap();
    }
    let pushed = b.enqueue(queue, aimed("https://cap.example/")).await.unwrap().id;
    let first = b.claim(queue, 10, LEASE_MS, WAIT_MS).await.unwrap();
    assert_eq!(first.len(), 2, "no more than the cap at once");
    assert!(b.claim(queue, 10, LEASE_MS, 0).await.unwrap().is_empty(), "the cap is reached");
    assert!(push_claim(b, 10, 0).await.is_empty(), "push deliveries count against the same cap");
    b.ack(first[0].id, first[0].lease).await.unwrap();
    let pushed_claim = push_claim(b, 10, WAIT_MS).await;
    assert_eq!(pushed_claim.iter().map(|c| c.id).collect::<Vec<_>>(), [pushed], "a freed slot");
    assert!(b.claim(queue, 10, LEASE_MS, 0).await.unwrap().is_empty(), "one pulled and one pushed fill the cap");
    ack_all(b, &pushed_claim).await;
    let last = b.claim(queue, 10, LEASE_MS, WAIT_MS).await.unwrap();
    assert_eq!(last.len(), 1);
    // Lifting the cap lets claims through at once.
    b.enqueue(queue, due("{}")).await.unwrap();
    b.put_settings(queue, QueueSettings::default()).await.unwrap();
    let rest = b.claim(queue, 10, LEASE_MS, WAIT_MS).await.unwrap();
    assert_eq!(rest.len(), 1);
    ack_all(b, &[first[1].clone(), last[0].clone(), rest[0].clone()]).await;
}

async fn a_freed_slot_wakes_a_claim(b: &dyn Backend, queue: &str) {
    let flow = Flow { max_in_flight: Some(1), ..Flow::default() };
    b.put_settings(queue, QueueSettings { push: None, flow }).await.unwrap();
    let enqueued = [b.enqueue(queue, due("{}")).await.unwrap().id, b.enqueue(queue, due("{}")).await.unwrap().id];
    // Either may come first: due in the same millisecond in two shards,
    // their claim order is the shards'.
    let held = b.claim(queue, 1, LEASE_MS, WAIT_MS).await.unwrap().remove(0);
    let other = enqueued.into_iter().find(|&id| id != held.id).expect("two tasks");
    let free = async {
        b.ack(held.id, held.lease).await.unwrap();
    };
    let (claimed, ()) = tokio::join!(b.claim(queue, 1, LEASE_MS, WAIT_MS), free);
    let claimed = claimed.unwrap();
    assert_eq!(claimed.iter().map(|c| c.id).collect::<Vec<_>>(), [other], "an ack frees the slot a claim waits for");
    ack_all(b, &claimed).await;
}

async fn rate(b: &dyn Backend, queue: &str) {
    let flow = Flow { rate_per_s: Some(20.0), burst: Some(3), max_in_flight: None };
    b.put_settings(queue, QueueSettings { push: None, flow }).await.unwrap();
    assert_eq!(b.settings(queue).await.unwrap().flow, flow);
    for _ in 0..6 {
        b.enqueue(queue, due("{}")).await.unwrap();
    }
    let burst = b.claim(queue, 10, LEASE_MS, WAIT_MS).await.unwrap();
    assert_eq!(burst.len(), 3, "a full bucket: the burst");
    // A token comes every 50 ms: the waiting claim gets one, not the rest.
    let next = b.claim(queue, 10, LEASE_MS, WAIT_MS).await.unwrap();
    assert!((1..=3).contains(&next.len()), "{} handed out after the burst", next.len());
    let mut all = burst;
    all.extend(next);
    while all.len() < 6 {
        let more = b.claim(queue, 10, LEASE_MS, WAIT_MS).await.unwrap();
        assert!(!more.is_empty(), "the rate hands out the rest, in time");
        all.extend(more);
    }
    ack_all(b, &all).await;
    b.put_settings(queue, QueueSettings::default()).await.unwrap();
}
