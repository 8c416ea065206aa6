//! The engine on a manual wall clock and a real store in a temporary directory.
//! Time moves only when a test moves it. The engine's timer thread sleeps on
//! that clock; `advance` also polls the timers itself, so that what a test
//! checks next does not race the timer thread. Nothing here sleeps.

use std::path::Path;
use std::sync::Arc;

use hourglass_embedded::{Engine, Fsync, OpenError, Options, RedbStore};
use hourglass_queue::prelude::*;
use hourglass_queue::{
    limits, Lease, Limits, ListRequest, ManualWallClock, Nack, NewTask, Pause, QueueError, RunAt, Status, TaskState,
};

const T0_MS: u64 = 1_800_000_000_000;

struct Harness {
    dir: tempfile::TempDir,
    clock: Arc<ManualWallClock>,
    engine: Arc<Engine>,
    timers: std::thread::JoinHandle<()>,
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
        let engine = open(dir.path(), &clock, limits);
        let timers = engine.start_timers().expect("start the timer thread");
        Harness { dir, clock, engine, timers }
    }

    /// Drops the engine (its writer finishes) and opens the same directory again.
    fn restart(self) -> Harness {
        let Harness { dir, clock, engine, timers } = self;
        engine.close();
        timers.join().expect("the timer thread stops");
        drop(engine);
        let engine = open(dir.path(), &clock, Limits::default());
        let timers = engine.start_timers().expect("start the timer thread");
        Harness { dir, clock, engine, timers }
    }

    async fn advance(&self, ms: u64) {
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
    assert_eq!(&*claimed[0].payload, r#"{"n":1}"#);
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
async fn tasks_survive_a_restart_and_overdue_ones_are_due_at_once() {
    let h = Harness::new();
    let soon = h.engine.enqueue("q", later(1_000)).await.unwrap().id;
    let far = h.engine.enqueue("q", later(3_600_000)).await.unwrap().id;
    let done = h.engine.enqueue("q", later(0)).await.unwrap().id;
    let claimed = h.engine.claim("q", 1, 1_000, 0).await.unwrap();
    h.engine.ack(done, claimed[0].lease).await.unwrap();
    h.engine.close();
    h.clock.advance_ms(5_000); // the server is down while `soon` comes due
    let h = h.restart();
    assert_eq!(h.engine.get(done).await.unwrap_err(), QueueError::NotFound(done));
    assert_eq!(h.engine.get(far).await.unwrap().status, Status::Scheduled);
    let claimed = h.engine.claim("q", 10, 1_000, 0).await.unwrap();
    assert_eq!(claimed.iter().map(|c| c.id).collect::<Vec<_>>(), [soon]);
    let stats = h.engine.queue("q").await.unwrap();
    // Due at +1 s, delivered at +5 s: 4 s late (the histogram keeps 2 digits).
    assert!((3_960.0..=4_040.0).contains(&stats.lateness.max), "the downtime shows as lateness: {:?}", stats.lateness);
    // Ids are never reused across restarts.
    assert!(h.engine.enqueue("q", later(0)).await.unwrap().id > far);
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
    tokio::task::yield_now().await;
    // No poll by hand: the engine's timer thread, asleep on the manual clock,
    // wakes when it moves and files the task.
    h.clock.advance_ms(200);
    let claimed = tokio::time::timeout(std::time::Duration::from_secs(10), waiting).await.unwrap().unwrap().unwrap();
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
async fn a_damaged_data_file_refuses_to_open_with_a_clear_error() {
    let h = Harness::new();
    for _ in 0..100 {
        h.engine.enqueue("q", later(1_000)).await.unwrap();
    }
    h.engine.close();
    h.timers.join().unwrap();
    let file = h.dir.path().join("tasks.redb");
    drop(h.engine);
    let mut bytes = std::fs::read(&file).unwrap();
    let middle = bytes.len() / 2;
    let end = (middle + 4096).min(bytes.len());
    for byte in &mut bytes[middle..end] {
        *byte ^= 0x5a;
    }
    std::fs::write(&file, &bytes).unwrap();
    match RedbStore::open(h.dir.path()) {
        Err(error) => assert!(error.to_string().contains("tasks.redb"), "{error}"),
        Ok(store) => {
            // The damage may sit in pages the check does not cover; then the
            // records themselves must not load silently wrong.
            let mut loaded = 0;
            let result = hourglass_embedded::Store::load(&store, &mut |task, _| {
                assert_eq!(task.state, TaskState::Scheduled);
                loaded += 1;
            });
            assert!(result.is_err() || loaded == 100, "loaded {loaded} of 100 without an error");
        }
    }
}

/// Flips one byte of the value stored under `id` in `table`, through redb
/// itself, so that its page checksums stay valid: only the record's own
/// checksum can tell.
fn damage(dir: &Path, table: &str, id: u64) {
    use redb::ReadableTable;
    let db = redb::Database::create(dir.join("tasks.redb")).unwrap();
    let table = redb::TableDefinition::<u64, &[u8]>::new(table);
    let txn = db.begin_write().unwrap();
    {
        let mut table = txn.open_table(table).unwrap();
        let mut bytes = table.get(id).unwrap().expect("the record is there").value().to_vec();
        let at = bytes.len() / 2;
        bytes[at] ^= 0x04;
        table.insert(id, bytes.as_slice()).unwrap();
    }
    txn.commit().unwrap();
}

#[tokio::test]
async fn a_damaged_record_is_refused_never_trusted() {
    let h = Harness::new();
    let small = h.engine.enqueue("q", later(1_000)).await.unwrap().id;
    let payload = format!(r#"{{"blob":"{}"}}"#, "z".repeat(limits::PAYLOAD_INLINE_MAX));
    let large = h.engine.enqueue("q", task(&payload, RunAt::Delay(0))).await.unwrap().id;
    let Harness { dir, engine, timers, .. } = h;
    engine.close();
    timers.join().unwrap();
    drop(engine);

    // A payload kept apart is checked when it is handed out.
    damage(dir.path(), "payloads", large);
    let clock = Arc::new(ManualWallClock::at_ms(T0_MS));
    let engine = open(dir.path(), &clock, Limits::default());
    let error = engine.get(large).await.unwrap_err();
    assert!(error.to_string().contains(&format!("corrupt record for task {large}")), "{error}");
    let error = engine.claim("q", 10, 30_000, 0).await.unwrap_err();
    assert!(error.to_string().contains("checksum mismatch"), "{error}");
    assert_eq!(engine.get(small).await.unwrap().task.id, small, "the rest is served");
    engine.close();
    drop(engine);

    // A body is checked at start: the start is refused, naming the task.
    damage(dir.path(), "tasks", small);
    let store = RedbStore::open(dir.path()).unwrap();
    let error = Engine::open(Box::new(store), Options::default(), clock).err().expect("the start is refused");
    assert!(matches!(error, OpenError::Corrupt(_)), "{error:?}");
    assert!(error.to_string().contains(&format!("corrupt record for task {small}")), "{error}");
}

#[tokio::test]
async fn ids_are_never_reused_even_when_the_newest_task_is_gone_before_a_restart() {
    let h = Harness::new();
    h.engine.enqueue("q", later(60_000)).await.unwrap();
    let newest = h.engine.enqueue("q", later(0)).await.unwrap().id;
    let claim = h.engine.claim("q", 1, 1_000, 0).await.unwrap().remove(0);
    h.engine.ack(newest, claim.lease).await.unwrap();
    let h = h.restart();
    assert!(h.engine.enqueue("q", later(0)).await.unwrap().id > newest);
}

#[tokio::test]
async fn a_claim_that_does_not_wait_leaves_no_queue_behind() {
    let h = Harness::new();
    assert!(h.engine.claim("never-used", 1, 1_000, 0).await.unwrap().is_empty());
    assert!(h.engine.queue("never-used").await.is_none());
    assert!(h.engine.queues().await.is_empty());
}

#[tokio::test]
async fn payloads_survive_every_rewrite_and_a_restart() {
    let h = Harness::new();
    let payload = r#"{"order":42,"items":["a","b"]}"#;
    let id = h.engine.enqueue("q", task(payload, RunAt::Delay(0))).await.unwrap().id;
    let first = h.engine.claim("q", 1, 500, 0).await.unwrap().remove(0);
    assert_eq!(&*first.payload, payload);
    h.engine.nack(id, first.lease, Nack::after(0)).await.unwrap(); // rewritten on disk
    let second = h.engine.claim("q", 1, 500, 0).await.unwrap().remove(0);
    h.advance(500).await; // the lease expires: rewritten again
    assert_eq!(&*second.payload, payload);
    h.engine.close();
    let h = h.restart();
    assert_eq!(&*h.engine.get(id).await.unwrap().payload, payload);
}

fn expiring(delay_ms: u64, expires_after_ms: u64) -> NewTask {
    NewTask { expires: Some(RunAt::Delay(expires_after_ms)), ..task("{}", RunAt::Delay(delay_ms)) }
}

#[tokio::test]
async fn a_task_not_delivered_by_its_expiry_is_dead_not_late() {
    let h = Harness::new();
    let id = h.engine.enqueue("q", expiring(100, 1_000)).await.unwrap().id;
    h.advance(100).await;
    assert_eq!(h.engine.get(id).await.unwrap().status, Status::Due);
    // Past the expiry, before the timer thread has looked: a claim still gets nothing.
    h.clock.advance_ms(900);
    assert!(h.engine.claim("q", 10, 1_000, 0).await.unwrap().is_empty(), "delivered after its expiry");
    h.engine.poll_timers();
    let info = h.engine.get(id).await.unwrap();
    assert_eq!((info.status, info.task.expired), (Status::Dead, true));
    let totals = h.engine.totals().await;
    assert_eq!((totals.expired, totals.died, totals.delivered), (1, 1, 0));
    // A retry lifts the expiry: it runs, late, and the lift survives a restart.
    h.engine.retry(id).await.unwrap();
    let h = h.restart();
    let info = h.engine.get(id).await.unwrap();
    assert_eq!((info.status, info.task.expires_at_ms, info.task.expired), (Status::Due, None, false));
    assert_eq!(h.engine.claim("q", 1, 1_000, 0).await.unwrap()[0].id, id);
}

#[tokio::test]
async fn an_expiry_survives_a_restart_and_ends_a_lease_that_outlives_it() {
    let h = Harness::new();
    let kept = h.engine.enqueue("q", expiring(0, 500)).await.unwrap().id;
    let h = h.restart();
    let claimed = h.engine.claim("q", 1, 2_000, 0).await.unwrap();
    assert_eq!(claimed[0].id, kept, "claimed before its expiry");
    // The consumer never acks; the lease ends after the expiry: dead, not retried.
    h.advance(2_000).await;
    let info = h.engine.get(kept).await.unwrap();
    assert_eq!((info.status, info.task.expired), (Status::Dead, true));
    let h = h.restart();
    let info = h.engine.get(kept).await.unwrap();
    assert_eq!((info.status, info.task.expired, info.task.expires_at_ms), (Status::Dead, true, Some(T0_MS + 500)));
    // Refused: an expiry that comes before the task is due.
    let error = h.engine.enqueue("q", expiring(1_000, 1_000)).await.unwrap_err();
    assert!(error.to_string().contains("could never run"), "{error}");
}

/// Claims what is due; asserts that nothing handed out is early by the clock.
async fn claim_due(h: &Harness) -> Vec<u64> {
    let now_ms = hourglass_queue::WallClock::now_ms(&*h.clock);
    let claimed = h.engine.claim("q", 100, 60_000, 0).await.unwrap();
    for task in &claimed {
        assert!(task.run_at_ms <= now_ms, "task {} due at {} handed out at {now_ms}", task.id, task.run_at_ms);
    }
    claimed.iter().map(|task| task.id).collect()
}

#[tokio::test]
async fn a_wall_clock_stepped_back_an_hour_fires_nothing_early_and_loses_nothing() {
    let h = Harness::new();
    let before = h.engine.enqueue("q", task("a", RunAt::Delay(10_000))).await.unwrap().id;
    // The clock is set back an hour: `before` is now due in 1 h 10 s.
    h.clock.set_us((T0_MS - 3_600_000) * 1_000);
    let after = h.engine.enqueue("q", task("b", RunAt::Delay(5_000))).await.unwrap().id;
    h.advance(4_999).await;
    assert!(claim_due(&h).await.is_empty());
    h.advance(1).await;
    assert_eq!(claim_due(&h).await, [after], "due 5 s after the step, by the clock as it reads");
    h.advance(3_600_000 + 10_000 - 5_001).await;
    assert!(claim_due(&h).await.is_empty(), "not before its time on the clock");
    h.advance(1).await;
    assert_eq!(claim_due(&h).await, [before]);
}

#[tokio::test]
async fn a_small_step_back_is_waited_out_and_a_step_forward_fires_what_it_passed() {
    let h = Harness::new();
    h.advance(1_000).await; // the wheel stands at T0 + 1 s
    h.clock.set_us((T0_MS + 700) * 1_000); // back 300 ms
    let id = h.engine.enqueue("q", task("c", RunAt::Delay(100))).await.unwrap().id;
    h.advance(100).await;
    assert!(claim_due(&h).await.is_empty(), "late by at most the step, never early");
    h.advance(200).await;
    assert_eq!(claim_due(&h).await, [id]);
    // Forward a day: what came due in between is due at once; nothing is lost.
    let tomorrow = h.engine.enqueue("q", task("d", RunAt::Delay(86_400_000 - 1))).await.unwrap().id;
    assert!(claim_due(&h).await.is_empty());
    h.clock.set_us((T0_MS + 1_000 + 86_400_000) * 1_000);
    h.engine.poll_timers();
    assert_eq!(claim_due(&h).await, [tomorrow]);
}

#[tokio::test]
async fn lateness_after_a_restart_stays_visible_in_the_stats() {
    let h = Harness::new();
    h.engine.enqueue("q", task("late", RunAt::Delay(1_000))).await.unwrap();
    // The server is down from +0.5 s to +10.5 s: the task came due while it was.
    h.advance(500).await;
    h.clock.advance_ms(10_000);
    let h = h.restart();
    let claimed = h.engine.claim("q", 1, 30_000, 0).await.unwrap();
    assert_eq!(claimed.len(), 1);
    let lateness = h.engine.queue("q").await.unwrap().lateness;
    assert_eq!(lateness.samples, 1);
    assert!((9_400.0..9_600.0).contains(&lateness.max), "9.5 s late, and the stats say so: {lateness:?}");
}

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
    let waiting = tokio::spawn({
        let engine = h.engine.clone();
        async move { engine.claim("q", 10, 1_000, 30_000).await }
    });
    for _ in 0..100 {
        tokio::task::yield_now().await;
    }
    assert!(!waiting.is_finished(), "a waiting claim of a paused queue waits");
    assert!(!h.engine.pause_queue("q", Pause::Resume).await.unwrap().paused);
    let claimed = waiting.await.unwrap().unwrap();
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
    h.engine.flushed().await;
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
        h.engine.flushed().await;
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
