//! Compaction against a model: a store compacted while writes of every kind
//! come holds what a store given the same writes and never compacted holds.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::Ordering;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::super::tests::task;
use super::super::*;
use hourglass_queue::limits::PAYLOAD_INLINE_MAX;
use hourglass_queue::Flow;
use hourglass_queue::{Misfire, Overlap, Rule};

fn schedule(name: &str, next_ms: u64) -> Schedule {
    Schedule {
        name: name.into(),
        queue: "q".into(),
        rule: Rule::Every { every_ms: 60_000 },
        payload: format!("{name}:{next_ms}").into(),
        misfire: Misfire::Skip,
        overlap: Overlap::Allow,
        max_attempts: 3,
        expires_after_ms: None,
        since_ms: 1,
        next_ms: Some(next_ms),
        last: None,
        paused: false,
    }
}

/// Payload `id` of `bytes` bytes, every byte value in turn.
fn payload(id: u64, bytes: usize) -> Payload {
    (0..bytes).map(|at| (id as usize + at) as u8).collect::<Vec<u8>>().into()
}

/// Everything a store holds, as a start reads it.
#[derive(Debug, PartialEq)]
struct Held {
    tasks: BTreeMap<u64, (Task, Payload)>,
    next_id: u64,
    schedules: Vec<Schedule>,
    paused: Vec<PausedQueue>,
    settings: Vec<(Box<str>, QueueSettings)>,
}

fn held(store: &RedbStore) -> Held {
    // What the relaxed log holds, as an open would have it.
    store.commit_logged().unwrap();
    let mut tasks = Vec::new();
    let next_id = store.load(&mut |task, _| tasks.push(task)).unwrap();
    let mut snapshot = store.snapshot().unwrap();
    let tasks = tasks.into_iter().map(|task| (task.id, (task.clone(), snapshot.payload(task.id).unwrap()))).collect();
    Held {
        tasks,
        next_id,
        schedules: store.load_schedules().unwrap(),
        paused: store.load_paused().unwrap(),
        settings: store.load_settings().unwrap(),
    }
}

/// A random batch of every kind of write, on ids up to `next`.
fn batch(rng: &mut StdRng, next: &mut u64) -> Vec<Mutation> {
    let mut batch = Vec::new();
    for _ in 0..rng.random_range(1..40) {
        let name: Box<str> = format!("n{}", rng.random_range(0..6)).into();
        batch.push(match rng.random_range(0..100) {
            0..40 => {
                *next += 1;
                let bytes = if rng.random_bool(0.3) {
                    rng.random_range(PAYLOAD_INLINE_MAX + 1..3_000)
                } else {
                    rng.random_range(0..200)
                };
                Mutation::Insert { task: task(*next, 10), payload: payload(*next, bytes) }
            }
            40..60 => Mutation::Update(task(rng.random_range(1..=*next + 1), rng.random_range(11..1_000))),
            60..85 => Mutation::Delete(rng.random_range(1..=*next + 1)),
            85..88 => Mutation::NextId(*next + 1),
            88..92 => Mutation::PutSchedule(schedule(&name, rng.random_range(1..1_000))),
            92..94 => Mutation::DeleteSchedule(name),
            94..97 => Mutation::PauseQueue {
                queue: name,
                paused: rng.random_bool(0.7),
                until_ms: rng.random_bool(0.5).then(|| rng.random_range(1..1_000)),
            },
            _ => Mutation::PutSettings {
                queue: name,
                settings: QueueSettings {
                    push: None,
                    flow: Flow { rate_per_s: None, burst: None, max_in_flight: rng.random_bool(0.5).then_some(3) },
                },
            },
        });
    }
    batch
}

/// A store and its model: a store never compacted, given the same writes.
struct Pair {
    dir: tempfile::TempDir,
    model_dir: tempfile::TempDir,
    store: RedbStore,
    model: RedbStore,
    /// The next task id.
    next: u64,
}

impl Pair {
    /// A store (`open`ed in a directory of its own) and its model, both
    /// given 12,000 tasks then most deleted: a compaction is due.
    fn mostly_free(open: impl FnOnce(&Path) -> RedbStore) -> Pair {
        let (dir, model_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let (store, model) = (open(dir.path()), RedbStore::open(model_dir.path()).unwrap());
        for both in [&store, &model] {
            both.load(&mut |_, _| {}).unwrap();
        }
        let tasks = 12_000;
        for first in (1..=tasks).step_by(1_000) {
            let batch: Vec<_> = (first..first + 1_000)
                .map(|id| Mutation::Insert { task: task(id, 10), payload: payload(id, 1_000) })
                .collect();
            for both in [&store, &model] {
                both.apply(&batch, false).unwrap();
            }
        }
        let deletes: Vec<_> = (1..=tasks).filter(|id| !id.is_multiple_of(7)).map(Mutation::Delete).collect();
        for both in [&store, &model] {
            both.apply(&deletes, true).unwrap();
        }
        Pair { dir, model_dir, store, model, next: tasks }
    }
}

/// Seeds: writes between every step of a compaction worked on this thread,
/// so each run is the same; after it finishes, and after a reopen, the store
/// holds what the model does.
#[test]
fn writes_between_the_steps_of_a_compaction_are_all_in_its_copy() {
    for seed in 0..4u64 {
        let mut rng = StdRng::seed_from_u64(seed);
        let Pair { dir, model_dir: _model_dir, store, model, mut next } =
            Pair::mostly_free(|path| RedbStore::open(path).unwrap().stepped());
        let before = store.file_bytes().unwrap();
        assert_eq!(store.compact_if_due().unwrap(), None, "seed {seed}: it begins");
        assert!(store.compacting() && dir.path().join(format!("{FILE_NAME}{COPY_SUFFIX}")).exists());
        let mut done = None;
        let mut asks = 0;
        while done.is_none() {
            for _ in 0..rng.random_range(0..4) {
                let batch = batch(&mut rng, &mut next);
                let durable = rng.random_bool(0.5);
                store.apply(&batch, durable).unwrap();
                model.apply(&batch, durable).unwrap();
            }
            done = store.compact_if_due().unwrap();
            asks += 1;
        }
        let done = done.unwrap();
        assert!(done.finish_keys <= FINISH_DIRTY_MAX, "seed {seed}: {done:?}");
        assert!(done.after_bytes < before, "seed {seed}: {done:?} from {before}");
        assert!(!store.compacting());
        assert!(!dir.path().join(format!("{FILE_NAME}{COPY_SUFFIX}")).exists(), "the copy is the file now");
        assert_eq!(held(&store), held(&model), "seed {seed}, after {asks} asks");
        // Writes after it go to the new file, and a reopen finds them all.
        let batch = batch(&mut rng, &mut next);
        store.apply(&batch, true).unwrap();
        model.apply(&batch, true).unwrap();
        drop(store);
        let store = RedbStore::open(dir.path()).unwrap();
        assert_eq!(held(&store), held(&model), "seed {seed}, reopened");
    }
}

/// The same with the copy worked by its own thread while writes come from
/// this one, as the server runs it.
#[test]
fn writes_while_a_compaction_thread_copies_are_all_in_its_copy() {
    let mut rng = StdRng::seed_from_u64(7);
    let Pair { dir, model_dir: _model_dir, store, model, mut next } =
        Pair::mostly_free(|path| RedbStore::open(path).unwrap());
    assert_eq!(store.compact_if_due().unwrap(), None, "it begins");
    // Writes for a while (as fast as this thread goes, which may outrun the
    // copy's fsyncs on a loaded machine), then none: the compaction must
    // finish once the writes stop, and is never given up meanwhile.
    const WRITES_MAX: usize = 2_000;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let mut writes = 0;
    let done = loop {
        if writes < WRITES_MAX {
            let batch = batch(&mut rng, &mut next);
            store.apply(&batch, false).unwrap();
            model.apply(&batch, false).unwrap();
            writes += 1;
        } else {
            assert!(
                std::time::Instant::now() < deadline,
                "the compaction did not finish within 60 s of the last write"
            );
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        if let Some(done) = store.compact_if_due().unwrap() {
            break done;
        }
        assert!(store.compacting(), "given up after {writes} batches: the writes outran the copy");
    };
    println!("a compaction finished after {writes} batches written meanwhile: {done:?}");
    assert!(done.finish_keys <= FINISH_DIRTY_MAX, "{done:?}");
    assert_eq!(held(&store), held(&model));
    drop(store);
    assert_eq!(held(&RedbStore::open(dir.path()).unwrap()), held(&model), "reopened");
}

/// The writer finishes only once few keys are dirty: with more written than
/// that since the last step, it works another step first.
#[test]
fn the_finish_syncs_no_more_than_its_bound() {
    let Pair { dir: _dir, model_dir: _model_dir, store, model, next: _ } =
        Pair::mostly_free(|path| RedbStore::open(path).unwrap().stepped());
    assert_eq!(store.compact_if_due().unwrap(), None, "it begins");
    copied(&store);
    let many: Vec<_> = (1..=(3 * FINISH_DIRTY_MAX) as u64).map(|id| Mutation::Update(task(id, 99))).collect();
    store.apply(&many, true).unwrap();
    model.apply(&many, true).unwrap();
    assert_eq!(store.compact_if_due().unwrap(), None, "one step leaves more dirty than the finish takes");
    let done = store.compact_if_due().unwrap().expect("a second leaves as many as it takes: it finishes");
    assert_eq!(done.finish_keys, FINISH_DIRTY_MAX, "{done:?}");
    assert_eq!(held(&store), held(&model));
}

/// Works a stepped store's compaction until all is copied, writing nothing.
fn copied(store: &RedbStore) {
    loop {
        let job = store.job.lock();
        let job = job.as_ref().expect("a compaction under way");
        if job.shared.state.lock().copied {
            return;
        }
        job.step().unwrap();
    }
}

/// The finish's payload bytes are bounded too: with more payload dirty than
/// it takes, a step goes first, and the finish syncs what is left.
#[test]
fn the_finish_syncs_no_more_payload_bytes_than_its_bound() {
    let Pair { dir: _dir, model_dir: _model_dir, store, model, next } =
        Pair::mostly_free(|path| RedbStore::open(path).unwrap().stepped());
    store.begin_compaction().unwrap();
    copied(&store);
    let big = FINISH_DIRTY_BYTES * 3 / 4;
    let batch: Vec<_> =
        (next + 1..=next + 3).map(|id| Mutation::Insert { task: task(id, 10), payload: payload(id, big) }).collect();
    store.apply(&batch, true).unwrap();
    model.apply(&batch, true).unwrap();
    let ready = store.job.lock().as_ref().unwrap().ready().unwrap();
    assert!(!ready, "more payload dirty than the finish takes");
    let done = store.compact_if_due().unwrap().expect("a step, then the finish");
    assert_eq!(done.finish_keys, 1, "the step took two of the three payloads: {done:?}");
    assert_eq!(held(&store), held(&model));
}

/// Writes that outrun the compaction (more keys dirty than it may track)
/// give it up: its copy is removed and the store holds every write.
#[test]
fn writes_that_outrun_a_compaction_give_it_up() {
    let Pair { dir, model_dir: _model_dir, store, model, next } =
        Pair::mostly_free(|path| RedbStore::open(path).unwrap().stepped());
    store.begin_compaction().unwrap();
    let copy = dir.path().join(format!("{FILE_NAME}{COPY_SUFFIX}"));
    assert!(copy.exists());
    // Deletes of tasks never stored: cheap to write, each a key to sync.
    let first = next + 1_000_000;
    let deletes: Vec<_> = (first..first + DIRTY_KEYS_MAX as u64 + 1).map(Mutation::Delete).collect();
    // Durable: a relaxed batch reaches redb, and the compaction, with the
    // next durable commit (`relaxed_log`).
    store.apply(&deletes, true).unwrap();
    assert!(!store.compacting(), "given up");
    RedbStore::wait(&store.giving_up);
    assert!(!copy.exists(), "its copy removed");
    let batch = [Mutation::Insert { task: task(next + 1, 10), payload: payload(next + 1, 10) }];
    store.apply(&batch, true).unwrap();
    model.apply(&batch, true).unwrap();
    assert_eq!(held(&store), held(&model));
}

/// The store's files, with the directory's sync after the copy's rename
/// failing, and then `owed` syncs failing too: the rename is done, but not
/// durably.
struct UnsyncedRename {
    directory: Directory,
    owed_failures: std::sync::atomic::AtomicU32,
}

impl StoreFiles for UnsyncedRename {
    fn name(&self) -> &Path {
        self.directory.name()
    }

    fn open(&self, file: StoreFile, builder: &redb::Builder) -> Result<Database, redb::DatabaseError> {
        self.directory.open(file, builder)
    }

    fn len(&self, file: StoreFile) -> std::io::Result<u64> {
        self.directory.len(file)
    }

    fn remove_copy(&self) -> std::io::Result<()> {
        self.directory.remove_copy()
    }

    fn promote_copy(&self) -> Promotion {
        match self.directory.promote_copy() {
            Promotion::Done => Promotion::Unsynced(std::io::Error::other("injected: the directory's sync failed")),
            other => other,
        }
    }

    fn open_log(&self) -> std::io::Result<Box<dyn LogFile>> {
        self.directory.open_log()
    }

    fn sync_promotion(&self) -> std::io::Result<()> {
        let failures = &self.owed_failures;
        if failures.fetch_update(Ordering::AcqRel, Ordering::Acquire, |left| left.checked_sub(1)).is_ok() {
            return Err(std::io::Error::other("injected: the directory's sync failed again"));
        }
        self.directory.sync_promotion()
    }
}

/// A copy renamed in place but not durably: the compaction reports the
/// failure, the copy serves, and no durable write is made until the
/// directory's sync has gone through (a relaxed one joins the log, and
/// the log's batches reach redb only after it); then writes go on, all
/// there.
#[test]
fn a_rename_not_yet_durable_is_made_durable_before_the_next_write() {
    let Pair { dir, model_dir: _model_dir, store, model, next } = Pair::mostly_free(|path| {
        let files = UnsyncedRename {
            directory: Directory::new(path, FILE_NAME),
            owed_failures: std::sync::atomic::AtomicU32::new(2),
        };
        RedbStore::on_files(files).unwrap()
    });
    let before = store.file_bytes().unwrap();
    assert!(store.compact().is_err(), "the rename is not durable yet");
    assert!(store.file_bytes().unwrap() < before, "the copy is in place");
    let batch = [Mutation::Insert { task: task(next + 1, 10), payload: payload(next + 1, 10) }];
    for _ in 0..2 {
        assert!(store.apply(&batch, true).is_err(), "no durable write while the rename is owed");
    }
    assert_eq!(held(&store), held(&model), "nothing written");
    store.apply(&batch, false).unwrap();
    model.apply(&batch, false).unwrap();
    assert_eq!(held(&store), held(&model));
    drop(store);
    assert_eq!(held(&RedbStore::open(dir.path()).unwrap()), held(&model), "reopened");
}

/// A snapshot taken before a compaction reads on from the old file after the
/// copy took its place; a new one reads the copy.
#[test]
fn a_snapshot_taken_before_a_compaction_reads_on_after_it() {
    let Pair { dir: _dir, model_dir: _model_dir, store, model: _model, next: _ } =
        Pair::mostly_free(|path| RedbStore::open(path).unwrap());
    let mut before = store.snapshot().unwrap();
    let done = store.compact().unwrap();
    assert!(done.after_bytes < done.before_bytes, "{done:?}");
    assert_eq!(before.payload(7).unwrap(), payload(7, 1_000));
    assert!(matches!(before.payload(8), Err(StoreError::Missing { id: 8 })));
    assert_eq!(store.snapshot().unwrap().payload(14).unwrap(), payload(14, 1_000));
}

/// A snapshot held across two compactions holds up neither: the writer
/// never waits for the old file to be closed (a request may hold a snapshot
/// while it waits for the writer), and the old file is closed once the
/// snapshot is dropped.
#[test]
fn a_snapshot_held_across_compactions_holds_up_neither() {
    let Pair { dir: _dir, model_dir: _model_dir, store, model, next } =
        Pair::mostly_free(|path| RedbStore::open(path).unwrap());
    let mut reading = store.snapshot().unwrap();
    store.compact().unwrap();
    let batch = [Mutation::Insert { task: task(next + 1, 10), payload: payload(next + 1, 10) }];
    store.apply(&batch, true).unwrap();
    model.apply(&batch, true).unwrap();
    store.compact().unwrap();
    assert_eq!(reading.payload(7).unwrap(), payload(7, 1_000), "the first file, read on");
    drop(reading);
    assert_eq!(held(&store), held(&model));
}

/// A copy left beside the file by a crash is removed by the next open, and
/// never taken for the store.
#[test]
fn a_copy_left_by_a_crash_is_removed_at_the_next_open() {
    let dir = tempfile::tempdir().unwrap();
    let store = RedbStore::open(dir.path()).unwrap();
    store.apply(&[Mutation::Insert { task: task(1, 10), payload: payload(1, 10) }], true).unwrap();
    drop(store);
    let copy = dir.path().join(format!("{FILE_NAME}{COPY_SUFFIX}"));
    std::fs::write(&copy, b"half a copy").unwrap();
    let store = RedbStore::open(dir.path()).unwrap();
    assert!(!copy.exists());
    let mut ids = Vec::new();
    store.load(&mut |task, _| ids.push(task.id)).unwrap();
    assert_eq!(ids, [1]);
}

/// A compaction whose copy cannot be made (here: its name taken by a
/// directory) is given up: the store serves on, holding what it held, and
/// does not try again before the pause.
#[test]
fn a_compaction_that_fails_is_given_up_and_the_store_serves_on() {
    let Pair { dir, model_dir: _model_dir, store, model, next } =
        Pair::mostly_free(|path| RedbStore::open(path).unwrap());
    let copy = dir.path().join(format!("{FILE_NAME}{COPY_SUFFIX}"));
    std::fs::create_dir(&copy).unwrap();
    std::fs::write(copy.join("in the way"), b"").unwrap();
    assert!(store.compact_if_due().is_err());
    assert!(!store.compacting());
    assert_eq!(store.compact_if_due().unwrap(), None, "not begun again at once");
    assert!(!store.compacting());
    let batch = [Mutation::Insert { task: task(next + 1, 10), payload: payload(next + 1, 10) }];
    store.apply(&batch, true).unwrap();
    model.apply(&batch, true).unwrap();
    assert_eq!(held(&store), held(&model));
}
