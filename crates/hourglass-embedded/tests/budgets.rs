//! Memory and disk bounded whatever the payloads: large payloads stay in the
//! store, the budgets refuse what would pass them and change nothing, and a
//! full disk is a clear error that loses nothing acknowledged.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use hourglass_embedded::{Engine, Fsync, Loaded, Mutation, Options, RedbStore, Snapshot, Store, StoreError};
use hourglass_queue::limits::{task_memory_bytes, PAYLOAD_INLINE_MAX, TASK_OVERHEAD_BYTES};
use hourglass_queue::prelude::*;
use hourglass_queue::{Limits, ListRequest, ManualWallClock, Nack, NewTask, QueueError, RunAt, Schedule, Status, Task};

use crate::deadline::{self, still_waiting, until, within};

const T0_MS: u64 = 1_800_000_000_000;

fn open_with(store: impl Store, limits: Limits) -> Arc<Engine> {
    let clock = Arc::new(ManualWallClock::at_ms(T0_MS));
    Engine::open(Box::new(store), Options { fsync: Fsync::Always, limits }, clock).expect("open the engine")
}

fn open(dir: &Path, limits: Limits) -> Arc<Engine> {
    open_with(RedbStore::open(dir).expect("open the store"), limits)
}

/// A payload of exactly `bytes` bytes of JSON, numbered.
fn payload(n: u64, bytes: usize) -> String {
    let head = format!("{{\"n\":{n},\"pad\":\"");
    let pad = bytes.checked_sub(head.len() + 2).expect("room for the number");
    format!("{head}{}\"}}", "x".repeat(pad))
}

fn due_now(payload: String) -> NewTask {
    NewTask::new(payload, RunAt::Delay(0))
}

#[tokio::test]
async fn large_payloads_live_in_the_store_and_come_back_whole() {
    let dir = tempfile::tempdir().unwrap();
    let engine = open(dir.path(), Limits::default());
    let sizes = [0, 2, PAYLOAD_INLINE_MAX, PAYLOAD_INLINE_MAX + 1, 1024, 64 * 1024, 1 << 20];
    let mut ids = Vec::new();
    for (n, &bytes) in sizes.iter().enumerate().skip(2) {
        ids.push(engine.enqueue("q", due_now(payload(n as u64, bytes))).await.unwrap().id);
    }
    let held = engine.totals().await.memory_bytes;
    // Five tasks; of their payloads only the one of 128 bytes is in memory.
    let expected = 5 * TASK_OVERHEAD_BYTES + PAYLOAD_INLINE_MAX as u64;
    assert_eq!(held, expected, "memory counts the payloads kept in memory only");
    println!("5 tasks with payloads from {PAYLOAD_INLINE_MAX} B to 1 MiB: {held} bytes counted in memory");

    for (n, &id) in ids.iter().enumerate() {
        let want = payload(n as u64 + 2, sizes[n + 2]);
        assert_eq!(engine.get(id).await.unwrap().payload, want, "get of task {id}");
    }
    let page = engine.list("q", ListRequest { status: Some(Status::Due), after: None, limit: 100 }).await.unwrap();
    assert_eq!(page.tasks.len(), ids.len());
    for (n, info) in page.tasks.iter().enumerate() {
        assert_eq!(info.payload, payload(n as u64 + 2, sizes[n + 2]), "listing of task {}", info.task.id);
    }
    let mut claimed = engine.claim("q", 100, 30_000, 0).await.unwrap();
    claimed.sort_by_key(|task| task.id);
    assert_eq!(claimed.len(), ids.len());
    for (n, task) in claimed.iter().enumerate() {
        assert_eq!(task.payload, payload(n as u64 + 2, sizes[n + 2]), "claim of task {}", task.id);
    }
    // A nack's answer carries the payload too.
    let first = &claimed[3];
    let nacked = engine.nack(first.id, first.lease, Nack::after(0)).await.unwrap();
    assert_eq!(nacked.payload, first.payload);

    // A restart loads the bodies only, and the payloads are still there.
    engine.close();
    drop(engine);
    let engine = open(dir.path(), Limits::default());
    assert_eq!(engine.totals().await.memory_bytes, held);
    for (n, &id) in ids.iter().enumerate() {
        assert_eq!(engine.get(id).await.unwrap().payload, payload(n as u64 + 2, sizes[n + 2]));
    }
    // Acked and cancelled, a task takes its payload with it.
    engine.cancel(ids[4]).await.unwrap();
    let store_bytes = engine.totals().await.disk_bytes;
    engine.close();
    drop(engine);
    let store = RedbStore::open(dir.path()).unwrap();
    let mut loaded = Vec::new();
    store.load(&mut |task, payload| loaded.push((task.id, payload))).unwrap();
    assert!(loaded.iter().all(|(id, _)| *id != ids[4]));
    assert!(store.snapshot().unwrap().payload(ids[4]).is_err(), "the payload went with the task");
    assert!(loaded.iter().all(|(_, payload)| match payload {
        Loaded::Inline(payload) => payload.len() <= PAYLOAD_INLINE_MAX,
        Loaded::Apart(bytes) => *bytes > PAYLOAD_INLINE_MAX,
    }));
    println!("{} bytes counted on disk for {} tasks", store_bytes, loaded.len());
}

#[tokio::test]
async fn the_memory_budget_refuses_a_batch_whole_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let per_task = task_memory_bytes(100, None);
    // Room for 9 tasks with 100-byte payloads, or 5 large ones and 4 of those.
    let limits = Limits { memory_bytes_max: 9 * per_task, ..Limits::default() };
    let engine = open(dir.path(), limits);
    // Large payloads cost memory only for their records.
    let big: Vec<_> = (0..5).map(|n| due_now(payload(n, 100_000))).collect();
    engine.enqueue_batch("q", big).await.unwrap();
    let small: Vec<_> = (0..4).map(|n| due_now(payload(n, 100))).collect();
    engine.enqueue_batch("q", small).await.unwrap();
    let before = engine.totals().await;
    assert!(before.memory_bytes <= 9 * per_task);

    let batch: Vec<_> = (0..3).map(|n| due_now(payload(n, 100))).collect();
    let error = engine.enqueue_batch("q", batch).await.unwrap_err();
    assert!(matches!(error, QueueError::OverMemoryBudget { .. }), "{error}");
    assert_eq!(error.code(), "over_memory_budget");
    println!("refused: {error}");
    assert_eq!(engine.totals().await, before, "a refused batch changes nothing");
    assert_eq!(engine.queue("q").await.unwrap().due, 9);

    // Room made (the three oldest due, large ones, acked), the same batch goes in.
    for task in engine.claim("q", 3, 30_000, 0).await.unwrap() {
        engine.ack(task.id, task.lease).await.unwrap();
    }
    let batch: Vec<_> = (0..3).map(|n| due_now(payload(n, 100))).collect();
    engine.enqueue_batch("q", batch).await.unwrap();
    engine.check_invariants().unwrap();
}

#[tokio::test]
async fn the_disk_budget_refuses_what_would_pass_it() {
    let dir = tempfile::tempdir().unwrap();
    let limits = Limits { disk_bytes_max: Some(1 << 20), ..Limits::default() };
    let engine = open(dir.path(), limits);
    let mut accepted = Vec::new();
    let error = loop {
        match engine.enqueue("q", due_now(payload(accepted.len() as u64, 100_000))).await {
            Ok(done) => accepted.push(done.id),
            Err(error) => break error,
        }
        assert!(accepted.len() < 100, "never refused");
    };
    assert!(matches!(error, QueueError::OverDiskBudget { .. }), "{error}");
    assert_eq!(accepted.len(), 10, "ten payloads of 100 kB fit in 1 MiB, not eleven");
    let totals = engine.totals().await;
    assert!(totals.disk_bytes <= 1 << 20);
    assert_eq!(totals.tasks, accepted.len());
    // What was counted is near what the store holds.
    engine.close();
    drop(engine);
    let store = RedbStore::open(dir.path()).unwrap();
    let stored = store.stored_bytes().unwrap();
    let file = std::fs::metadata(store.path()).unwrap().len();
    println!("disk budget: counted {} bytes; redb stores {stored}, its file is {file}", totals.disk_bytes);
    assert!(stored <= totals.disk_bytes * 11 / 10, "the estimate is not far below what is stored");
}

/// A store whose disk can be made full: every write fails with
/// [`StoreError::Full`] and changes nothing, as redb's does on `ENOSPC`.
#[derive(Clone)]
struct FillableDisk {
    inner: Arc<RedbStore>,
    full: Arc<AtomicBool>,
}

impl Store for FillableDisk {
    fn load(&self, visit: &mut dyn FnMut(Task, Loaded)) -> Result<u64, StoreError> {
        self.inner.load(visit)
    }
    fn load_schedules(&self) -> Result<Vec<Schedule>, StoreError> {
        self.inner.load_schedules()
    }
    fn load_paused(&self) -> Result<Vec<hourglass_embedded::PausedQueue>, StoreError> {
        self.inner.load_paused()
    }
    fn load_settings(&self) -> Result<Vec<(Box<str>, hourglass_queue::QueueSettings)>, StoreError> {
        self.inner.load_settings()
    }
    fn apply(&self, batch: &[Mutation], durable: bool) -> Result<(), StoreError> {
        if self.full.load(Ordering::SeqCst) {
            let enospc = std::io::Error::from_raw_os_error(28);
            return Err(StoreError::Full(hourglass_queue::Failure::new("cannot write the batch", enospc)));
        }
        self.inner.apply(batch, durable)
    }
    fn sync(&self) -> Result<(), StoreError> {
        self.inner.sync()
    }
    fn snapshot(&self) -> Result<Box<dyn Snapshot>, StoreError> {
        self.inner.snapshot()
    }
}

#[tokio::test]
async fn a_full_disk_is_a_clear_error_and_loses_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let disk = FillableDisk { inner: Arc::new(RedbStore::open(dir.path()).unwrap()), full: Arc::default() };
    let engine = open_with(disk.clone(), Limits::default());
    let kept = engine.enqueue("q", due_now(payload(1, 4096))).await.unwrap().id;
    disk.full.store(true, Ordering::SeqCst);
    let error = engine.enqueue("q", due_now(payload(2, 4096))).await.unwrap_err();
    assert_eq!(error.code(), "disk_full", "{error}");
    // The cause is kept: the store's error, and below it the disk's.
    let store = std::error::Error::source(&error).expect("a full disk keeps the store's error");
    let cause = store.source().expect("the store's error keeps the disk's").to_string();
    assert_eq!(cause, std::io::Error::from_raw_os_error(28).to_string());
    let error = engine.cancel(kept).await.unwrap_err();
    assert_eq!(error.code(), "disk_full", "{error}");
    assert_eq!(engine.get(kept).await.unwrap().payload, payload(1, 4096), "the cancel that failed changed nothing");
    assert_eq!(engine.totals().await.tasks, 1);
    disk.full.store(false, Ordering::SeqCst);
    engine.enqueue("q", due_now(payload(3, 4096))).await.unwrap();
    engine.check_invariants().unwrap();
}

/// A tmpfs of `bytes`, unmounted on drop.
struct Tmpfs(PathBuf);

impl Tmpfs {
    /// `Err` with the reason if it cannot be mounted (not root, say).
    fn mount(at: PathBuf, bytes: u64) -> Result<Tmpfs, String> {
        std::fs::create_dir_all(&at).map_err(|error| error.to_string())?;
        let mut mount = Command::new("mount");
        mount.args(["-t", "tmpfs", "-o", &format!("size={bytes}")]).arg("tmpfs").arg(&at);
        let status = deadline::run("mount", &mut mount)?;
        if status.success() {
            Ok(Tmpfs(at))
        } else {
            Err(format!("mount failed: {status}"))
        }
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = deadline::run("umount", Command::new("umount").arg("-l").arg(&self.0));
    }
}

/// A real full disk: redb on a small tmpfs, filled with tasks. The enqueue
/// that does not fit is refused with `disk_full`; the server goes on serving
/// what it has; once space is freed, writes work again; and a restart finds
/// every acknowledged task.
#[tokio::test]
async fn a_real_full_disk_is_survived() {
    let dir = tempfile::tempdir().unwrap();
    let tmpfs = match Tmpfs::mount(dir.path().join("mnt"), 8 << 20) {
        Ok(tmpfs) => tmpfs,
        Err(why) if std::env::var_os("CI").is_none() => {
            println!("skipped: cannot mount a tmpfs ({why}); CI requires it");
            return;
        }
        Err(why) => panic!("cannot mount a tmpfs, which this test needs in CI: {why}"),
    };
    let ballast = tmpfs.0.join("ballast");
    std::fs::write(&ballast, vec![7u8; 2 << 20]).unwrap();
    let data = tmpfs.0.join("data");
    let engine = open(&data, Limits::default());
    let mut acked = Vec::new();
    let error = loop {
        match engine.enqueue("q", due_now(payload(acked.len() as u64, 32 * 1024))).await {
            Ok(done) => acked.push(done.id),
            Err(error) => break error,
        }
        assert!(acked.len() < 1_000, "8 MiB never filled up");
    };
    assert_eq!(error.code(), "disk_full", "{error}");
    println!("full after {} tasks of 32 KiB: {error}", acked.len());
    assert_eq!(engine.totals().await.tasks, acked.len());
    assert_eq!(engine.get(acked[0]).await.unwrap().payload, payload(0, 32 * 1024));

    std::fs::remove_file(&ballast).unwrap();
    let more = engine.enqueue("q", due_now(payload(acked.len() as u64, 32 * 1024))).await.unwrap();
    acked.push(more.id);
    engine.check_invariants().unwrap();
    engine.close();
    drop(engine);

    let engine = open(&data, Limits::default());
    assert_eq!(engine.totals().await.tasks, acked.len(), "every acknowledged task survived");
    for (n, &id) in acked.iter().enumerate() {
        assert_eq!(engine.get(id).await.unwrap().payload, payload(n as u64, 32 * 1024));
    }
    engine.close();
    drop(engine);
}

/// One claim or listing page hands out at most `ANSWER_PAYLOAD_BYTES_MAX` of
/// payloads, the rest going to the next; a claim always hands out one task,
/// however large.
#[tokio::test]
async fn a_claim_or_a_page_hands_out_a_bounded_number_of_payload_bytes() {
    use hourglass_queue::limits::ANSWER_PAYLOAD_BYTES_MAX;
    let dir = tempfile::tempdir().unwrap();
    let payload_bytes_max = ANSWER_PAYLOAD_BYTES_MAX + 1024;
    let engine = open(dir.path(), Limits { payload_bytes_max, ..Limits::default() });
    let per_answer = 8;
    let bytes = ANSWER_PAYLOAD_BYTES_MAX / per_answer;
    for n in 0..per_answer as u64 + 2 {
        engine.enqueue("q", due_now(payload(n, bytes))).await.unwrap();
    }
    let page = engine.list("q", ListRequest { status: Some(Status::Due), after: None, limit: 100 }).await.unwrap();
    assert_eq!(page.tasks.len(), per_answer, "a page stops at {ANSWER_PAYLOAD_BYTES_MAX} bytes of payloads");
    let rest = engine.list("q", ListRequest { status: Some(Status::Due), after: page.next, limit: 100 }).await.unwrap();
    assert_eq!((rest.tasks.len(), rest.next), (2, None), "the next page has the rest");
    let claimed = engine.claim("q", 100, 30_000, 0).await.unwrap();
    assert_eq!(claimed.len(), per_answer);
    assert_eq!(engine.claim("q", 100, 30_000, 0).await.unwrap().len(), 2);

    let huge = payload(99, ANSWER_PAYLOAD_BYTES_MAX + 1);
    engine.enqueue("q", due_now(huge.clone())).await.unwrap();
    let claimed = engine.claim("q", 100, 30_000, 0).await.unwrap();
    assert_eq!(claimed.len(), 1, "a claim hands out one task whatever its size");
    assert_eq!(claimed[0].payload, huge);
}

/// The writer's queue holds a bounded number of payload bytes: past
/// `QUEUED_PAYLOAD_BYTES_MAX`, a new write waits for room before it takes the
/// lock, so it has not even been inserted while the writer is behind.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn payload_bytes_waiting_for_the_writer_are_bounded() {
    use hourglass_queue::limits::QUEUED_PAYLOAD_BYTES_MAX;
    let store = crate::sim::CrashStore::new(7, 0.0);
    let limits = Limits { payload_bytes_max: QUEUED_PAYLOAD_BYTES_MAX + 1024, ..Limits::default() };
    let engine = open_with(store.clone(), limits);
    let gate = store.close_gate();
    let big = tokio::spawn({
        let engine = engine.clone();
        async move { engine.enqueue("q", due_now(payload(1, QUEUED_PAYLOAD_BYTES_MAX + 1))).await }
    });
    until("the big write is held at the gate", || store.held_at_gate()).await;
    let held = engine.totals().await.memory_bytes;
    let mut small = tokio::spawn({
        let engine = engine.clone();
        async move { engine.enqueue("q", due_now(payload(2, 100))).await }
    });
    // Asserted with the gate closed: a failing assertion drops the gate as
    // it unwinds, and the writer is let go.
    still_waiting("a write while the writer's queue is full", &mut small).await;
    let inserted = engine.totals().await.memory_bytes - held;
    assert_eq!(inserted, 0, "the second write waited for room, not yet inserted");
    gate.open();
    within("the big write", big).await.unwrap().unwrap();
    within("the small write", small).await.unwrap().unwrap();
    assert_eq!(engine.totals().await.tasks, 2);
}
