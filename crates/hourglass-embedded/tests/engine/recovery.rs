//! Restarts and damage: what was acknowledged survives a restart, overdue
//! tasks are due at once, ids are never reused, and a damaged file or
//! record refuses the start (or the read) rather than be misread.

use std::path::Path;
use std::sync::Arc;

use hourglass_embedded::{Engine, OpenError, Options, RedbStore};
use hourglass_queue::prelude::*;
use hourglass_queue::{limits, DeadReason, Limits, ManualWallClock, Nack, QueueError, RunAt, Status, TaskState};

use super::{later, open, task, Harness, T0_MS};
use crate::deadline;

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
async fn a_damaged_data_file_refuses_to_open_with_a_clear_error() {
    let h = Harness::new();
    for _ in 0..100 {
        h.engine.enqueue("q", later(1_000)).await.unwrap();
    }
    h.engine.close();
    deadline::stop("the timer thread", h.timers);
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
    deadline::stop("the timer thread", timers);
    drop(engine);

    // A payload kept apart is checked when it is read: a read says so, and a
    // claim makes its task dead at once, `corrupt`, rather than hand it out
    // again and again until its attempts run out.
    damage(dir.path(), "payloads", large);
    let clock = Arc::new(ManualWallClock::at_ms(T0_MS));
    let engine = open(dir.path(), &clock, Limits::default());
    let error = engine.get(large).await.unwrap_err();
    assert!(error.to_string().contains(&format!("corrupt record for task {large}")), "{error}");
    let found_corrupt = |engine: Arc<Engine>| async move {
        let info = engine.get(large).await.unwrap();
        assert_eq!((info.status, info.task.dead_reason), (Status::Dead, DeadReason::Corrupt), "{info:?}");
        assert!(info.task.last_error.as_deref().is_some_and(|e| e.starts_with("corrupt payload: ")), "{info:?}");
        assert!(info.payload.is_empty(), "a damaged payload is not shown");
    };
    assert!(engine.claim("q", 10, 30_000, 0).await.unwrap().is_empty(), "the damaged task is not handed out");
    found_corrupt(engine.clone()).await;
    assert_eq!(engine.totals().await.died, 1);
    // Retried (answered with the payload empty, as it cannot be read), it
    // is found damaged again at its next claim.
    let retried = engine.retry(large).await.unwrap();
    assert_eq!((retried.status, retried.payload.len()), (Status::Due, 0));
    assert!(engine.claim("q", 10, 30_000, 0).await.unwrap().is_empty());
    found_corrupt(engine.clone()).await;
    assert_eq!(engine.get(small).await.unwrap().task.id, small, "the rest is served");
    engine.close();
    drop(engine);
    // It stays dead across a restart (recorded without waiting, as claims are).
    let engine = open(dir.path(), &clock, Limits::default());
    found_corrupt(engine.clone()).await;
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
async fn payloads_survive_every_rewrite_and_a_restart() {
    let h = Harness::new();
    let payload = r#"{"order":42,"items":["a","b"]}"#;
    let id = h.engine.enqueue("q", task(payload, RunAt::Delay(0))).await.unwrap().id;
    let first = h.engine.claim("q", 1, 500, 0).await.unwrap().remove(0);
    assert_eq!(first.payload, payload);
    h.engine.nack(id, first.lease, Nack::after(0)).await.unwrap(); // rewritten on disk
    let second = h.engine.claim("q", 1, 500, 0).await.unwrap().remove(0);
    h.advance(500).await; // the lease expires: rewritten again
    assert_eq!(second.payload, payload);
    h.engine.close();
    let h = h.restart();
    assert_eq!(h.engine.get(id).await.unwrap().payload, payload);
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
async fn settings_and_targets_survive_a_restart_and_file_tasks_for_their_claims() {
    use hourglass_queue::{Claim, Flow, HttpTarget, PushTarget, QueueSettings};
    let h = Harness::new();
    let settings = QueueSettings {
        push: Some(Arc::new(PushTarget::new(HttpTarget::post("https://queue.example/")))),
        flow: Flow { rate_per_s: Some(100.0), burst: Some(10), max_in_flight: Some(3) },
    };
    h.engine.put_settings("pushed", settings.clone()).await.unwrap();
    let target = HttpTarget { headers: vec![("X-A".into(), "1".into())], ..HttpTarget::post("https://own.example/") };
    let own =
        h.engine.enqueue("pulled", hourglass_queue::NewTask { http: Some(target.clone()), ..later(0) }).await.unwrap();
    let plain = h.engine.enqueue("pushed", later(0)).await.unwrap();
    h.engine.close();
    let h = h.restart();
    assert_eq!(h.engine.settings("pushed").await.unwrap(), settings);
    assert_eq!(h.engine.get(own.id).await.unwrap().task.http.as_deref(), Some(&target));
    assert!(h.engine.claim("pulled", 10, 1_000, 0).await.unwrap().is_empty());
    assert!(h.engine.claim("pushed", 10, 1_000, 0).await.unwrap().is_empty());
    let mut pushed: Vec<u64> =
        h.engine.claim_from(Claim::push(10, 0).unwrap()).await.unwrap().iter().map(|c| c.id).collect();
    pushed.sort();
    assert_eq!(pushed, [own.id, plain.id]);
    h.engine.check_invariants().unwrap();
}
