//! The redb store's own tests: batches, payloads apart, pauses, settings.

use super::*;
use hourglass_queue::DeadReason;
use hourglass_queue::TaskState;

/// A task of queue `q`, due at `run_at_ms`: the store's tests' own.
pub(super) fn task(id: u64, run_at_ms: u64) -> Task {
    Task {
        id,
        queue: "q".into(),
        run_at_ms,
        attempt: 0,
        max_attempts: 5,
        priority: hourglass_queue::limits::PRIORITY_DEFAULT,
        lease_ms: None,
        key: None,
        every_ms: None,
        expires_at_ms: None,
        dead_reason: DeadReason::Attempts,
        last_error: None,
        http: None,
        state: TaskState::Scheduled,
        created_ms: 1,
    }
}

#[test]
fn redb_s_error_is_the_source() {
    let error = db_error(redb::Error::Io(std::io::Error::from_raw_os_error(ENOSPC)));
    assert!(matches!(error, StoreError::Full(_)), "{error:?}");
    let source = std::error::Error::source(&error).expect("redb's error is kept");
    assert!(source.downcast_ref::<redb::Error>().is_some(), "{source:?}");
    let error = db_error(redb::Error::TableDoesNotExist("t".into()));
    assert!(matches!(error, StoreError::Database(_)), "{error:?}");
    assert!(error.to_string().starts_with("database error: redb: "), "{error}");
}

/// What a commit reported failing became is read back from the file.
#[test]
fn a_batch_is_known_to_have_landed_or_not() {
    let dir = tempfile::tempdir().unwrap();
    let store = RedbStore::open(dir.path()).unwrap();
    let landed = |batch: &[Mutation]| store.with_db(|db| landed(db, batch)).unwrap();
    let big = "b".repeat(hourglass_queue::limits::PAYLOAD_INLINE_MAX + 1);
    let first = vec![
        Mutation::Insert { task: task(1, 10), payload: "{}".into() },
        Mutation::Insert { task: task(2, 10), payload: big.as_str().into() },
        Mutation::NextId(3),
    ];
    assert!(!landed(&first), "not yet written");
    store.apply(&first, true).unwrap();
    assert!(landed(&first));
    let other_body = [Mutation::Insert { task: task(1, 11), payload: "{}".into() }];
    assert!(!landed(&other_body), "a body that differs is not this batch's");

    let update = [Mutation::Update(task(1, 20))];
    assert!(!landed(&update));
    store.apply(&update, true).unwrap();
    assert!(landed(&update));
    assert!(!landed(&[Mutation::NextId(4)]));
    assert!(landed(&[Mutation::NextId(3)]), "the next id is there already: nothing tells it apart");

    let delete = [Mutation::Delete(2)];
    assert!(!landed(&delete));
    store.apply(&delete, true).unwrap();
    assert!(landed(&delete));
    // The payload went with the task.
    assert!(store.snapshot().unwrap().payload(2).is_err());

    // A pause tells once written (before, the table does not even exist);
    // so does the resume, and the paused queues are loaded by name.
    let pause = [Mutation::PauseQueue { queue: "q".into(), paused: true, until_ms: None }];
    assert!(!landed(&pause));
    assert_eq!(store.load_paused().unwrap(), Vec::<(Box<str>, Option<u64>)>::new());
    store.apply(&pause, true).unwrap();
    assert!(landed(&pause));
    assert_eq!(store.load_paused().unwrap(), [(Box::from("q"), None)]);
    // A pause that ends by itself keeps its end; a later one without, none.
    let timed = [Mutation::PauseQueue { queue: "q".into(), paused: true, until_ms: Some(1_000) }];
    assert!(!landed(&timed));
    store.apply(&timed, true).unwrap();
    assert!(landed(&timed) && !landed(&pause));
    assert_eq!(store.load_paused().unwrap(), [(Box::from("q"), Some(1_000))]);
    store.apply(&pause, true).unwrap();
    assert_eq!(store.load_paused().unwrap(), [(Box::from("q"), None)]);
    let resume = [Mutation::PauseQueue { queue: "q".into(), paused: false, until_ms: None }];
    assert!(!landed(&resume));
    store.apply(&resume, true).unwrap();
    assert!(landed(&resume));
    assert!(store.load_paused().unwrap().is_empty());
}

#[test]
fn settings_are_stored_by_queue_and_the_defaults_remove_them() {
    use hourglass_queue::{Flow, HttpTarget, PushTarget};
    let dir = tempfile::tempdir().unwrap();
    let store = RedbStore::open(dir.path()).unwrap();
    assert!(store.load_settings().unwrap().is_empty());
    let settings = QueueSettings {
        push: Some(std::sync::Arc::new(PushTarget::new(HttpTarget::post("https://example.com/")))),
        flow: Flow { rate_per_s: Some(3.5), burst: None, max_in_flight: Some(2) },
    };
    let put = |settings: &QueueSettings| [Mutation::PutSettings { queue: "q".into(), settings: settings.clone() }];
    store.apply(&put(&settings), true).unwrap();
    assert!(landed(store.db.read().as_ref().unwrap(), &put(&settings)).unwrap());
    drop(store);
    let store = RedbStore::open(dir.path()).unwrap();
    assert_eq!(store.load_settings().unwrap(), [(Box::from("q"), settings.clone())], "across a reopen");
    store.apply(&put(&QueueSettings::default()), true).unwrap();
    assert!(store.load_settings().unwrap().is_empty());
    assert!(!landed(store.db.read().as_ref().unwrap(), &put(&settings)).unwrap());
}

fn insert(id: u64, payload_bytes: usize) -> Mutation {
    Mutation::Insert { task: task(id, 10), payload: "p".repeat(payload_bytes).into() }
}

/// The live estimate a load counts (a load counts it again).
fn recounted(store: &RedbStore) -> u64 {
    store.load(&mut |_, _| {}).unwrap();
    store.live_bytes().unwrap()
}

/// Every write keeps the estimate where a load would count it: inserts with
/// payloads in the body and apart, state records written and rewritten,
/// deletes of both kinds, and a delete of a task not stored.
#[test]
fn the_live_estimate_follows_every_write_as_a_load_counts_it() {
    let dir = tempfile::tempdir().unwrap();
    let big = hourglass_queue::limits::PAYLOAD_INLINE_MAX + 1;
    let store = RedbStore::open(dir.path()).unwrap();
    assert_eq!(store.live_bytes(), None, "unknown until the load");
    store.load(&mut |_, _| {}).unwrap();
    assert_eq!(store.live_bytes(), Some(0));
    let batches = [
        vec![insert(1, 10), insert(2, big), insert(3, 3 * big), Mutation::NextId(4)],
        vec![Mutation::Update(task(1, 20)), Mutation::Update(task(2, 30))],
        vec![Mutation::Update(task(1, 40)), Mutation::Delete(2), Mutation::Delete(99)],
    ];
    for batch in &batches {
        store.apply(batch, true).unwrap();
        let live = store.live_bytes().unwrap();
        assert_eq!(live, recounted(&store), "after {batch:?}");
    }
    // Task 1 (body and state) and task 3 (body and payload apart) are left.
    let body = |id, bytes| record::encode(&task(id, 10), &"p".repeat(bytes)).len();
    let expected = entry_bytes(body(1, 10))
        + entry_bytes(record::encode_state(&task(1, 40)).len())
        + entry_bytes(body(3, 3 * big))
        + entry_bytes(record::stored_payload_bytes(3 * big));
    assert_eq!(store.live_bytes(), Some(expected as u64));
    store.apply(&[Mutation::Delete(1), Mutation::Delete(3)], true).unwrap();
    assert_eq!(store.live_bytes(), Some(0), "nothing live once everything is deleted");
}

/// When a compaction is due: the file past its minimum and mostly free, the
/// live bytes known, and, after one that could not bring the file within
/// the bound, only once
/// the file has grown or the live bytes shrunk enough for another to pay.
#[test]
fn a_compaction_is_due_when_the_file_is_mostly_free_and_large_enough() {
    let min = COMPACT_FILE_MIN_BYTES;
    let due = |last, len, live| Compaction::due(last, len, live);
    assert!(due(None, min, 0));
    assert!(due(None, min, min / FILE_PER_LIVE_MAX), "at the bound");
    assert!(!due(None, min, min / FILE_PER_LIVE_MAX + 1), "less than half free");
    assert!(!due(None, min - 1, 0), "below the minimum");
    assert!(!due(None, 100 * min, LIVE_UNKNOWN), "the live bytes not yet counted");
    let large = 1 << 40;
    assert!(due(None, FILE_PER_LIVE_MAX * large, large), "however much is live: the writer waits as little");
    // A compaction that left 3 min with min live (its pages fuller than
    // estimated) is not run again at once, but once the file doubles, or
    // the live bytes halve.
    let last = Some(Compaction { after_bytes: 3 * min, live_bytes: min });
    assert!(!due(last, 3 * min, min));
    assert!(due(last, 6 * min, min));
    assert!(!due(last, 3 * min, min / 2));
    assert!(due(last, 3 * min, min / 2 - 1));
    // One that left an empty file at its floor: not again while it stays there.
    let last = Some(Compaction { after_bytes: min, live_bytes: 0 });
    assert!(!due(last, min, 0));
    assert!(due(last, 2 * min, 0));
    // One that brought the file within the bound is no reason to wait: the
    // next is due once the file is mostly free again, though it has not
    // doubled (redb grows it by regions: 4 KiB short of twice, say).
    let last = Some(Compaction { after_bytes: 3 * min, live_bytes: 2 * min });
    assert!(due(last, 6 * min - 4096, 2 * min));
    assert!(!due(last, 6 * min - 4096, 3 * min + 1), "not mostly free");
}

/// A file left mostly free by deletes is compacted below the minimum, and
/// holds what it held, payloads apart included; then no other is due.
#[test]
fn a_file_mostly_free_is_compacted_and_holds_what_it_held() {
    let dir = tempfile::tempdir().unwrap();
    let store = RedbStore::open(dir.path()).unwrap();
    store.load(&mut |_, _| {}).unwrap();
    assert_eq!(store.compact_if_due().unwrap(), None, "a new file is small");
    assert!(!store.compacting());
    let big = hourglass_queue::limits::PAYLOAD_INLINE_MAX + 1;
    let (tasks, kept_every) = (16_000u64, 100);
    for first in (1..=tasks).step_by(1_000) {
        let batch: Vec<_> =
            (first..first + 1_000).map(|id| insert(id, if id.is_multiple_of(2) { big } else { 1_000 })).collect();
        store.apply(&batch, true).unwrap();
    }
    let peak = store.file_bytes().unwrap();
    assert!(peak > FILE_PER_LIVE_MAX * COMPACT_FILE_MIN_BYTES, "{peak} bytes: the test needs a larger file");
    assert_eq!(store.compact_if_due().unwrap(), None, "full of live tasks");
    assert!(!store.compacting());
    let deleted: Vec<_> = (1..=tasks).filter(|id| !id.is_multiple_of(kept_every)).map(Mutation::Delete).collect();
    store.apply(&deleted, true).unwrap();
    let live = store.live_bytes().unwrap();
    assert_eq!(store.compact_if_due().unwrap(), None, "a compaction begins");
    assert!(store.compacting());
    let done = store.compact().unwrap();
    assert_eq!((done.before_bytes, done.live_bytes), (peak, live));
    assert_eq!(done.after_bytes, store.file_bytes().unwrap());
    assert!(done.after_bytes < COMPACT_FILE_MIN_BYTES, "{done:?}");
    assert!(done.after_bytes <= FILE_PER_LIVE_MAX * live + COMPACT_FILE_MIN_BYTES, "{done:?}");
    assert_eq!(store.compact_if_due().unwrap(), None, "nothing more to give back");
    assert!(!store.compacting());
    drop(store);

    let store = RedbStore::open(dir.path()).unwrap();
    let mut ids = Vec::new();
    store.load(&mut |task, _| ids.push(task.id)).unwrap();
    assert_eq!(ids, (1..=tasks).filter(|id| id.is_multiple_of(kept_every)).collect::<Vec<_>>());
    let mut snapshot = store.snapshot().unwrap();
    for id in ids {
        let expected = if id.is_multiple_of(2) { big } else { 1_000 };
        assert_eq!(snapshot.payload(id).unwrap().len(), expected, "task {id}'s payload");
    }
    assert_eq!(store.live_bytes(), Some(live), "the estimate kept is the one a load counts");
}

/// Relaxed batches (not durable) go to the log, not redb: a crash of the
/// process (the store dropped with no sync) loses none of them, in order;
/// a payload kept apart among them is read from the log until committed,
/// and a snapshot keeps reading what it saw across the commit.
#[test]
fn relaxed_batches_survive_a_crash_of_the_process_and_are_read_before_their_commit() {
    let dir = tempfile::tempdir().unwrap();
    let big = |n: u8| Payload::from(vec![n; hourglass_queue::limits::PAYLOAD_INLINE_MAX + 1]);
    let mut dead = task(2, 10);
    (dead.state, dead.attempt) = (TaskState::Dead, 5);
    let batches = [
        vec![Mutation::Insert { task: task(1, 10), payload: "{}".into() }, Mutation::NextId(65_536)],
        vec![Mutation::Insert { task: task(2, 10), payload: big(2) }],
        vec![Mutation::Update(dead.clone()), Mutation::Insert { task: task(3, 10), payload: big(3) }],
        vec![Mutation::Delete(1), Mutation::PauseQueue { queue: "q".into(), paused: true, until_ms: None }],
    ];
    let log = dir.path().join(LOG_FILE_NAME);
    {
        let store = RedbStore::open(dir.path()).unwrap();
        for batch in &batches {
            store.apply(batch, false).unwrap();
        }
        assert!(std::fs::metadata(&log).unwrap().len() > 0, "in the log");
        let in_redb = store
            .with_db(|db| Ok(db.begin_read().unwrap().open_table(TASKS).unwrap().iter().unwrap().count()))
            .unwrap();
        assert_eq!(in_redb, 0, "not in redb before a durable commit");
        let mut before = store.snapshot().unwrap();
        assert_eq!(before.payload(2).unwrap(), big(2), "read from the log");
        store.sync().unwrap();
        assert_eq!(std::fs::metadata(&log).unwrap().len(), 0, "the log starts again once committed");
        assert_eq!(before.payload(3).unwrap(), big(3), "a snapshot reads on what it saw");
        assert_eq!(store.snapshot().unwrap().payload(3).unwrap(), big(3), "read from redb");
        // Relaxed again, then the store goes with no sync, as in a crash:
        // redb never had the batch (dropping commits nothing), the log has.
        store.apply(&[Mutation::Delete(3)], false).unwrap();
        drop(store);
    }
    let store = RedbStore::open(dir.path()).unwrap();
    let mut tasks = Vec::new();
    let next_id = store.load(&mut |task, _| tasks.push(task)).unwrap();
    assert_eq!((tasks, next_id), (vec![dead], 65_536), "every batch, in order");
    assert_eq!(store.snapshot().unwrap().payload(2).unwrap(), big(2));
    assert_eq!(store.load_paused().unwrap().len(), 1);
    assert_eq!(std::fs::metadata(&log).unwrap().len(), 0, "replayed and committed at the open");
}

/// A log whose last record a crash tore opens without it (it was never
/// answered); the record before it is replayed.
#[test]
fn a_torn_log_opens_without_its_last_record() {
    let dir = tempfile::tempdir().unwrap();
    {
        let store = RedbStore::open(dir.path()).unwrap();
        store.apply(&[Mutation::Insert { task: task(1, 10), payload: "{}".into() }], false).unwrap();
        store.apply(&[Mutation::Insert { task: task(2, 10), payload: "{}".into() }], false).unwrap();
    }
    let log = dir.path().join(LOG_FILE_NAME);
    let bytes = std::fs::read(&log).unwrap();
    std::fs::write(&log, &bytes[..bytes.len() - 1]).unwrap();
    let store = RedbStore::open(dir.path()).unwrap();
    let mut ids = Vec::new();
    store.load(&mut |task, _| ids.push(task.id)).unwrap();
    assert_eq!(ids, [1]);
}

/// Past [`APPLY_MUTATIONS`] changes, the log's batches go to redb in one
/// commit without fsync (the next batch waits in the log); the log keeps
/// them all until a durable commit, so a crash of the process loses none.
#[test]
fn gathered_changes_go_to_redb_together_and_stay_in_the_log_until_durable() {
    let dir = tempfile::tempdir().unwrap();
    let big = Payload::from(vec![9u8; hourglass_queue::limits::PAYLOAD_INLINE_MAX + 1]);
    let count = APPLY_MUTATIONS as u64 + 1;
    {
        let store = RedbStore::open(dir.path()).unwrap();
        for id in 1..=count {
            let payload = if id == 1 { big.clone() } else { "{}".into() };
            store.apply(&[Mutation::Insert { task: task(id, 10), payload }], false).unwrap();
        }
        let in_redb = |store: &RedbStore| {
            store.with_db(|db| Ok(db.begin_read().unwrap().open_table(TASKS).unwrap().iter().unwrap().count())).unwrap()
        };
        assert_eq!(in_redb(&store), APPLY_MUTATIONS, "the gathered ones in redb, the last in the log");
        assert_eq!(store.snapshot().unwrap().payload(1).unwrap(), big, "read from redb now");
        drop(store);
    }
    let store = RedbStore::open(dir.path()).unwrap();
    let mut held = 0;
    store.load(&mut |_, _| held += 1).unwrap();
    assert_eq!(held, count, "every one after the crash");
}

/// A crash between a durable commit and the log's reset, or a power loss
/// that brings back records the reset had removed: the records are of an
/// older generation than redb holds, and a replay leaves them out, so a
/// task deleted since does not come back.
#[test]
fn records_older_than_redb_s_generation_are_not_replayed() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join(LOG_FILE_NAME);
    {
        let store = RedbStore::open(dir.path()).unwrap();
        store.apply(&[Mutation::Insert { task: task(1, 10), payload: "{}".into() }], false).unwrap();
        let before_the_commit = std::fs::read(&log).unwrap();
        store.sync().unwrap();
        store.apply(&[Mutation::Delete(1)], false).unwrap();
        store.sync().unwrap();
        // The reset undone: the insert's record back in the log.
        std::fs::write(&log, before_the_commit).unwrap();
    }
    let store = RedbStore::open(dir.path()).unwrap();
    let mut ids = Vec::new();
    store.load(&mut |task, _| ids.push(task.id)).unwrap();
    assert!(ids.is_empty(), "the deleted task came back: {ids:?}");
}
