//! The engine on a manual wall clock and a real store in a temporary directory.
//! Time moves only when a test moves it. The engine's timer thread sleeps on
//! that clock; `advance` also polls the timers itself, so that what a test
//! checks next does not race the timer thread. Nothing here sleeps.

use std::path::Path;
use std::sync::Arc;

use hourglass_embedded::{Engine, Fsync, Options, RedbStore};

use crate::deadline;
use hourglass_queue::prelude::*;
use hourglass_queue::{limits, Lease, Limits, ListRequest, ManualWallClock, Nack, NewTask, QueueError, RunAt, Status};

mod queues;
mod recovery;
mod time;

const T0_MS: u64 = 1_800_000_000_000;

/// An engine on a manual clock, its store in `dir`, its timer thread running.
pub(crate) struct Harness {
    dir: tempfile::TempDir,
    pub(crate) clock: Arc<ManualWallClock>,
    pub(crate) engine: Arc<Engine>,
    timers: hourglass::TimerThread,
}

fn open(dir: &Path, clock: &Arc<ManualWallClock>, limits: Limits) -> Arc<Engine> {
    let store = RedbStore::open(dir).expect("open the store");
    Engine::open(Box::new(store), Options { fsync: Fsync::Always, limits }, clock.clone()).expect("open the engine")
}

impl Harness {
    fn new() -> Harness {
        Harness::with_limits(Limits::default())
    }

    fn with_limits(limits: Limits) -> Harness {
        let dir = tempfile::tempdir().unwrap();
        let clock = Arc::new(ManualWallClock::at_ms(T0_MS));
        Harness::open_in(dir, clock, limits)
    }

    /// The engine on whatever `dir` holds (a data directory made elsewhere).
    pub(crate) fn open_in(dir: tempfile::TempDir, clock: Arc<ManualWallClock>, limits: Limits) -> Harness {
        let engine = open(dir.path(), &clock, limits);
        let timers = engine.start_timers().expect("start the timer thread");
        Harness { dir, clock, engine, timers }
    }

    /// Drops the engine (its writer finishes) and opens the same directory again.
    pub(crate) fn restart(self) -> Harness {
        let Harness { dir, clock, engine, timers } = self;
        engine.close();
        deadline::stop("the timer thread", timers);
        drop(engine);
        let engine = open(dir.path(), &clock, Limits::default());
        let timers = engine.start_timers().expect("start the timer thread");
        Harness { dir, clock, engine, timers }
    }

    pub(crate) async fn advance(&self, ms: u64) {
        self.clock.advance_ms(ms);
        self.engine.poll_timers();
    }
}

fn task(payload: &str, run_at: RunAt) -> NewTask {
    NewTask::new(payload, run_at)
}

fn later(ms: u64) -> NewTask {
    task(r#"{"n":1}"#, RunAt::Delay(ms))
}

#[tokio::test]
async fn a_task_is_delivered_when_due_and_gone_after_ack() {
    let h = Harness::new();
    let id = h.engine.enqueue("emails", later(30_000)).await.unwrap().id;
    assert!(h.engine.claim("emails", 10, 1_000, 0).await.unwrap().is_empty(), "not due yet");
    h.advance(29_999).await;
    assert!(h.engine.claim("emails", 10, 1_000, 0).await.unwrap().is_empty(), "still not due");
    h.advance(1).await;
    let claimed = h.engine.claim("emails", 10, 1_000, 0).await.unwrap();
    assert_eq!(claimed.len(), 1);
    assert_eq!((claimed[0].id, claimed[0].attempt), (id, 1));
    assert_eq!(claimed[0].payload, r#"{"n":1}"#);
    assert_eq!(h.engine.get(id).await.unwrap().status, Status::Leased);
    h.engine.ack(id, claimed[0].lease).await.unwrap();
    assert_eq!(h.engine.get(id).await.unwrap_err(), QueueError::NotFound(id));
    assert_eq!(h.engine.ack(id, claimed[0].lease).await, Err(QueueError::NotFound(id)));
}

#[tokio::test]
async fn claims_take_the_oldest_due_first() {
    let h = Harness::new();
    let late = h.engine.enqueue("q", later(300)).await.unwrap().id;
    let early = h.engine.enqueue("q", later(100)).await.unwrap().id;
    let middle = h.engine.enqueue("q", later(200)).await.unwrap().id;
    h.advance(1_000).await;
    let ids: Vec<u64> = h.engine.claim("q", 2, 1_000, 0).await.unwrap().iter().map(|c| c.id).collect();
    assert_eq!(ids, [early, middle]);
    let ids: Vec<u64> = h.engine.claim("q", 2, 1_000, 0).await.unwrap().iter().map(|c| c.id).collect();
    assert_eq!(ids, [late]);
}

#[tokio::test]
async fn an_expired_lease_redelivers_and_the_old_token_is_stale() {
    let h = Harness::new();
    let id = h.engine.enqueue("q", later(0)).await.unwrap().id;
    let first = h.engine.claim("q", 1, 500, 0).await.unwrap().remove(0);
    h.advance(499).await;
    assert!(h.engine.claim("q", 1, 500, 0).await.unwrap().is_empty());
    h.advance(1).await; // the lease expires: retry after the 1 s backoff
    assert_eq!(h.engine.get(id).await.unwrap().status, Status::Scheduled);
    h.advance(limits::BACKOFF_BASE_MS).await;
    let second = h.engine.claim("q", 1, 500, 0).await.unwrap().remove(0);
    assert_eq!((second.id, second.attempt), (id, 2));
    assert_eq!(h.engine.ack(id, first.lease).await, Err(QueueError::StaleLease(id)), "nothing changes");
    assert_eq!(h.engine.get(id).await.unwrap().status, Status::Leased);
    h.engine.ack(id, second.lease).await.unwrap();
    assert_eq!(h.engine.totals().await.lease_expired, 1);
}

#[tokio::test]
async fn extend_keeps_the_lease() {
    let h = Harness::new();
    let id = h.engine.enqueue("q", later(0)).await.unwrap().id;
    let claim = h.engine.claim("q", 1, 500, 0).await.unwrap().remove(0);
    h.advance(400).await;
    let until = h.engine.extend(id, claim.lease, 1_000).await.unwrap();
    assert_eq!(until, T0_MS + 1_400);
    h.advance(500).await; // past the original lease
    assert_eq!(h.engine.get(id).await.unwrap().status, Status::Leased);
    h.engine.ack(id, claim.lease).await.unwrap();
}

#[tokio::test]
async fn nacks_back_off_until_the_task_is_dead_then_retry_revives_it() {
    let h = Harness::new();
    let new = NewTask { max_attempts: Some(2), ..later(0) };
    let id = h.engine.enqueue("q", new).await.unwrap().id;
    let first = h.engine.claim("q", 1, 1_000, 0).await.unwrap().remove(0);
    let info = h.engine.nack(id, first.lease, Nack::after(50)).await.unwrap();
    assert_eq!((info.status, info.task.run_at_ms), (Status::Scheduled, T0_MS + 50));
    h.advance(50).await;
    let second = h.engine.claim("q", 1, 1_000, 0).await.unwrap().remove(0);
    assert_eq!(second.attempt, 2);
    let info = h.engine.nack(id, second.lease, Nack::default()).await.unwrap();
    assert_eq!(info.status, Status::Dead);
    let dead = h.engine.list("q", ListRequest { status: Some(Status::Dead), after: None, limit: 10 }).await.unwrap();
    assert_eq!(dead.tasks.iter().map(|t| t.task.id).collect::<Vec<_>>(), [id]);
    assert_eq!(h.engine.queue("q").await.unwrap().dead, 1);
    let revived = h.engine.retry(id).await.unwrap();
    assert_eq!((revived.status, revived.task.attempt), (Status::Due, 0));
    assert_eq!(h.engine.claim("q", 1, 1_000, 0).await.unwrap()[0].attempt, 1);
    assert!(matches!(h.engine.retry(id).await, Err(QueueError::Conflict(_))));
}

#[tokio::test]
async fn an_idempotency_key_returns_the_live_task() {
    let h = Harness::new();
    let keyed = || NewTask { key: Some("order-42".into()), ..later(1_000) };
    let first = h.engine.enqueue("q", keyed()).await.unwrap();
    let again = h.engine.enqueue("q", keyed()).await.unwrap();
    assert!(first.created && !again.created);
    assert_eq!(first.id, again.id);
    assert!(h.engine.enqueue("other", keyed()).await.unwrap().created, "keys are per queue");
    h.engine.cancel(first.id).await.unwrap();
    assert!(h.engine.enqueue("q", keyed()).await.unwrap().created, "a done task frees its key");
}

#[tokio::test]
async fn a_batch_is_all_or_nothing() {
    let h = Harness::new();
    let bad = task(r#"{"n":2}"#, RunAt::Delay(limits::DELAY_MS_MAX + 1));
    let error = h.engine.enqueue_batch("q", vec![later(0), bad]).await.unwrap_err();
    assert!(error.to_string().starts_with("task 1:"), "{error}");
    assert_eq!(h.engine.totals().await.tasks, 0);
    let done = h.engine.enqueue_batch("q", vec![later(0), later(0), later(5)]).await.unwrap();
    assert_eq!(done.len(), 3);
    assert_eq!(h.engine.totals().await.tasks, 3);
    assert!(h.engine.enqueue_batch("q", vec![]).await.is_err());
}

#[tokio::test]
async fn bad_input_is_refused_and_changes_nothing() {
    let h = Harness::with_limits(Limits { payload_bytes_max: 64, tasks_max: 3, ..Limits::default() });
    let too_big = task(&format!(r#""{}""#, "x".repeat(100)), RunAt::Delay(0));
    assert!(matches!(h.engine.enqueue("q", too_big).await, Err(QueueError::PayloadTooLarge { max: 64, .. })));
    assert!(matches!(h.engine.enqueue("bad name", later(0)).await, Err(QueueError::Invalid(_))));
    assert!(matches!(h.engine.enqueue("", later(0)).await, Err(QueueError::Invalid(_))));
    let absurd = task("1", RunAt::Delay(u64::MAX));
    assert!(matches!(h.engine.enqueue("q", absurd).await, Err(QueueError::Invalid(_))));
    let too_many_attempts = NewTask { max_attempts: Some(limits::MAX_ATTEMPTS_MAX + 1), ..later(0) };
    assert!(matches!(h.engine.enqueue("q", too_many_attempts).await, Err(QueueError::Invalid(_))));
    let short_lease = NewTask { lease_ms: Some(limits::LEASE_MS_MIN - 1), ..later(0) };
    assert!(matches!(h.engine.enqueue("q", short_lease).await, Err(QueueError::Invalid(_))));
    let too_often = NewTask { every_ms: Some(1), ..later(0) };
    assert!(matches!(h.engine.enqueue("q", too_often).await, Err(QueueError::Invalid(_))));
    assert!(matches!(h.engine.claim("q", 0, 1_000, 0).await, Err(QueueError::Invalid(_))));
    assert!(matches!(h.engine.claim("q", 1, 1, 0).await, Err(QueueError::Invalid(_))));
    assert!(matches!(h.engine.claim("q", 1, 1_000, limits::WAIT_MS_MAX + 1).await, Err(QueueError::Invalid(_))));
    assert!(matches!(h.engine.extend(1, Lease(1), limits::LEASE_MS_MAX + 1).await, Err(QueueError::Invalid(_))));
    assert!(matches!(
        h.engine.nack(1, Lease(1), Nack::after(limits::DELAY_MS_MAX + 1)).await,
        Err(QueueError::Invalid(_))
    ));
    let too_long = "x".repeat(limits::NACK_REASON_BYTES_MAX + 1);
    assert!(matches!(
        h.engine.nack(1, Lease(1), Nack::default().because(&too_long)).await,
        Err(QueueError::Invalid(_))
    ));
    assert_eq!(h.engine.totals().await.tasks, 0, "nothing was added");
    for _ in 0..3 {
        h.engine.enqueue("q", later(0)).await.unwrap();
    }
    assert_eq!(h.engine.enqueue("q", later(0)).await, Err(QueueError::TooManyTasks { max: 3 }));
}

#[tokio::test]
async fn a_waiting_claim_returns_as_soon_as_a_task_comes_due() {
    let h = Harness::new();
    h.engine.enqueue("q", later(200)).await.unwrap();
    let engine = h.engine.clone();
    let waiting = tokio::spawn(async move { engine.claim("q", 1, 1_000, 30_000).await });
    // No poll by hand: the engine's timer thread, asleep on the manual clock,
    // wakes when it moves and files the task.
    h.clock.advance_ms(200);
    let claimed = deadline::within("the waiting claim", waiting).await.unwrap().unwrap();
    assert_eq!(claimed.len(), 1);
}

#[tokio::test]
async fn a_repeating_task_is_rescheduled_on_ack_at_fixed_rate() {
    let h = Harness::new();
    let new = NewTask { every_ms: Some(1_000), ..later(1_000) };
    let id = h.engine.enqueue("q", new).await.unwrap().id;
    h.advance(1_000).await;
    let claim = h.engine.claim("q", 1, 5_000, 0).await.unwrap().remove(0);
    h.advance(2_500).await; // a slow consumer: the runs at 2 s and 3 s are missed
    h.engine.ack(id, claim.lease).await.unwrap();
    let info = h.engine.get(id).await.unwrap();
    assert_eq!((info.task.run_at_ms, info.task.attempt), (T0_MS + 4_000, 0));
}

#[tokio::test]
async fn reschedule_and_cancel() {
    let h = Harness::new();
    let id = h.engine.enqueue("q", later(60_000)).await.unwrap().id;
    let info = h.engine.reschedule(id, RunAt::Delay(10)).await.unwrap();
    assert_eq!(info.task.run_at_ms, T0_MS + 10);
    h.advance(10).await;
    let claim = h.engine.claim("q", 1, 1_000, 0).await.unwrap().remove(0);
    assert!(matches!(h.engine.reschedule(id, RunAt::Delay(10)).await, Err(QueueError::Conflict(_))));
    h.engine.cancel(id).await.unwrap();
    assert_eq!(h.engine.ack(id, claim.lease).await, Err(QueueError::NotFound(id)));
    assert_eq!(h.engine.cancel(id).await, Err(QueueError::NotFound(id)));
    assert_eq!(h.engine.totals().await.cancelled, 1);
}

#[tokio::test]
async fn a_claim_that_does_not_wait_leaves_no_queue_behind() {
    let h = Harness::new();
    assert!(h.engine.claim("never-used", 1, 1_000, 0).await.unwrap().is_empty());
    assert!(h.engine.queue("never-used").await.is_none());
    assert!(h.engine.queues().await.is_empty());
}
