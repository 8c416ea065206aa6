//! The crash simulator for redb's own file under a compaction: the real
//! [`RedbStore`] on a disk that loses what was not synced, crashed at a
//! random write, length change or sync in the middle of a compaction (or, if
//! the compaction finishes first, in the write after it), then opened again
//! from what the disk kept.
//!
//! The disk ([`CrashDisk`]) keeps what was synced; of each write and length
//! change since, in 4 KiB pieces, a seeded choice says whether it reached the
//! disk before the crash, each on its own (a disk's cache writes back in any
//! order: only a sync orders). Checked, for every seed:
//! - the store opens again (redb repairs it), and every task is there as one
//!   state the writes went through: the last durable one, or one of those
//!   applied after it without fsync (a compaction begins with a durable
//!   commit, so they may have become durable; a prefix, never a hole);
//! - its payloads, in the body and apart, read back byte for byte;
//! - the reopened store compacts, and writes, and holds the same again.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use hourglass_embedded::{Mutation, RedbStore, Store};

use crate::stored_task as task;
use hourglass_queue::limits::PAYLOAD_INLINE_MAX;
use hourglass_queue::Payload;
use parking_lot::Mutex;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// The unit a disk writes whole: a write is kept or lost in pieces of this.
const PIECE_BYTES: u64 = 4096;
/// Tasks a seed enqueues, at most.
const TASKS_MAX: u64 = 1_000;
/// The seeds this simulator runs: one in this many of the simulator's.
const SEEDS_ONE_IN: u64 = 30;

/// Crashes that struck in the middle of a compaction, and after one, over
/// every seed.
static MID_COMPACTION: AtomicU64 = AtomicU64::new(0);
static AFTER_COMPACTION: AtomicU64 = AtomicU64::new(0);

#[derive(Debug)]
enum Change {
    Write(u64, Vec<u8>),
    SetLen(u64),
}

#[derive(Debug, Default)]
struct Disk {
    /// What survives a crash for certain.
    synced: Vec<u8>,
    /// What reads see.
    current: Vec<u8>,
    /// Changes since the last sync, in order.
    pending: Vec<Change>,
    /// Writes, length changes and syncs so far.
    ops: u64,
    /// The one that crashes the disk.
    crash_at: Option<u64>,
    dead: bool,
}

fn write_at(bytes: &mut Vec<u8>, offset: u64, data: &[u8]) {
    let (start, end) = (offset as usize, offset as usize + data.len());
    if bytes.len() < end {
        bytes.resize(end, 0);
    }
    bytes[start..end].copy_from_slice(data);
}

impl Disk {
    /// Counts an operation; an error if it is the crash, or after it.
    fn tick(&mut self) -> std::io::Result<()> {
        if self.dead {
            return Err(std::io::Error::other("the disk is gone"));
        }
        self.ops += 1;
        if self.crash_at == Some(self.ops) {
            self.dead = true;
            return Err(std::io::Error::other("crashed"));
        }
        Ok(())
    }
}

/// A redb storage backend that crashes at a chosen operation; clones share it.
#[derive(Debug, Clone, Default)]
pub struct CrashDisk(Arc<Mutex<Disk>>);

impl CrashDisk {
    /// A disk that holds `image`, synced.
    fn holding(image: Vec<u8>) -> CrashDisk {
        CrashDisk(Arc::new(Mutex::new(Disk { synced: image.clone(), current: image, ..Disk::default() })))
    }

    fn ops(&self) -> u64 {
        self.0.lock().ops
    }

    /// Crashes at the `nth` operation from now.
    fn crash_in(&self, nth: u64) {
        let mut disk = self.0.lock();
        disk.crash_at = Some(disk.ops + nth);
    }

    fn crashed(&self) -> bool {
        self.0.lock().dead
    }

    /// What the disk holds after the crash: what was synced, and each piece
    /// of every change since, kept or not as `rng` says.
    fn after_crash(&self, rng: &mut StdRng) -> Vec<u8> {
        let disk = self.0.lock();
        let mut image = disk.synced.clone();
        for change in &disk.pending {
            match change {
                Change::SetLen(len) => {
                    if rng.random_bool(0.5) {
                        image.resize(*len as usize, 0);
                    }
                }
                Change::Write(offset, data) => {
                    let mut at = *offset;
                    for piece in data.chunks(PIECE_BYTES as usize) {
                        if rng.random_bool(0.5) {
                            write_at(&mut image, at, piece);
                        }
                        at += piece.len() as u64;
                    }
                }
            }
        }
        image
    }
}

impl redb::StorageBackend for CrashDisk {
    fn len(&self) -> Result<u64, std::io::Error> {
        Ok(self.0.lock().current.len() as u64)
    }

    fn read(&self, offset: u64, out: &mut [u8]) -> Result<(), std::io::Error> {
        let disk = self.0.lock();
        if disk.dead {
            return Err(std::io::Error::other("the disk is gone"));
        }
        let (start, end) = (offset as usize, offset as usize + out.len());
        let bytes = disk.current.get(start..end).ok_or_else(|| std::io::Error::other("read past the end"))?;
        out.copy_from_slice(bytes);
        Ok(())
    }

    fn set_len(&self, len: u64) -> Result<(), std::io::Error> {
        let mut disk = self.0.lock();
        disk.tick()?;
        disk.current.resize(len as usize, 0);
        disk.pending.push(Change::SetLen(len));
        Ok(())
    }

    fn sync_data(&self) -> Result<(), std::io::Error> {
        let mut disk = self.0.lock();
        disk.tick()?;
        let disk = &mut *disk;
        for change in disk.pending.drain(..) {
            match change {
                Change::SetLen(len) => disk.synced.resize(len as usize, 0),
                Change::Write(offset, data) => write_at(&mut disk.synced, offset, &data),
            }
        }
        Ok(())
    }

    fn write(&self, offset: u64, data: &[u8]) -> Result<(), std::io::Error> {
        let mut disk = self.0.lock();
        disk.tick()?;
        write_at(&mut disk.current, offset, data);
        disk.pending.push(Change::Write(offset, data.to_vec()));
        Ok(())
    }
}

/// What the store holds: each task's due time and payload, by id.
type Held = BTreeMap<u64, (u64, Payload)>;

/// Payload `id` of `bytes` bytes: its id, then padding.
fn payload(id: u64, bytes: usize) -> Payload {
    let mut text = format!("{id}:");
    let pad = bytes.saturating_sub(text.len());
    text.extend(std::iter::repeat_n('x', pad));
    text.into()
}

fn apply(store: &RedbStore, held: &mut Held, batch: &[Mutation], durable: bool) -> Result<(), String> {
    let result = store.apply(batch, durable).map_err(|error| error.to_string());
    if result.is_ok() {
        for mutation in batch {
            match mutation {
                Mutation::Insert { task, payload } => {
                    held.insert(task.id, (task.run_at_ms, payload.clone()));
                }
                Mutation::Update(task) => held.get_mut(&task.id).expect("updates a task held").0 = task.run_at_ms,
                Mutation::Delete(id) => {
                    held.remove(id);
                }
                _ => {}
            }
        }
    }
    result
}

/// Everything `store` holds, payloads read back.
fn read(store: &RedbStore) -> Held {
    let mut tasks = Vec::new();
    store.load(&mut |task, _| tasks.push(task)).expect("load");
    let mut snapshot = store.snapshot().expect("snapshot");
    tasks.into_iter().map(|task| (task.id, (task.run_at_ms, snapshot.payload(task.id).expect("payload")))).collect()
}

/// The writes of a seed, up to the compaction: tasks enqueued with payloads
/// of both homes, most deleted, some of the rest rescheduled; the last
/// batches without fsync. Returns the states the store went through since
/// the last durable batch (the first is that one's).
fn fill(store: &RedbStore, rng: &mut StdRng) -> Vec<Held> {
    let mut held = Held::new();
    let tasks = rng.random_range(TASKS_MAX / 4..=TASKS_MAX);
    let mut id = 1;
    while id <= tasks {
        let batch: Vec<_> = (id..=(id + rng.random_range(1..200)).min(tasks))
            .map(|id| {
                let bytes = if rng.random_bool(0.5) {
                    rng.random_range(1..PAYLOAD_INLINE_MAX)
                } else {
                    rng.random_range(PAYLOAD_INLINE_MAX + 1..6_000)
                };
                Mutation::Insert { task: task(id, 10), payload: payload(id, bytes) }
            })
            .collect();
        id += batch.len() as u64;
        apply(store, &mut held, &batch, true).expect("a write before the crash");
    }
    let keep = rng.random_range(0.0..0.3);
    let mut doomed: Vec<u64> = held.keys().copied().filter(|_| !rng.random_bool(keep)).collect();
    while !doomed.is_empty() {
        let take = rng.random_range(1..=doomed.len().min(500));
        let batch: Vec<_> = doomed.drain(..take).map(Mutation::Delete).collect();
        apply(store, &mut held, &batch, true).expect("a write before the crash");
    }
    let mut states = vec![held.clone()];
    for _ in 0..rng.random_range(0..4) {
        let mut ids: Vec<u64> = held.keys().copied().collect();
        let mut batch = Vec::new();
        for _ in 0..rng.random_range(1..20) {
            if ids.is_empty() {
                break;
            }
            let at = rng.random_range(0..ids.len());
            batch.push(if rng.random_bool(0.5) {
                Mutation::Update(task(ids[at], rng.random_range(11..1_000_000)))
            } else {
                Mutation::Delete(ids.swap_remove(at))
            });
        }
        batch.push(Mutation::Insert { task: task(id, 10), payload: payload(id, rng.random_range(1..3_000)) });
        id += 1;
        apply(store, &mut held, &batch, false).expect("a write before the crash");
        states.push(held.clone());
    }
    states
}

/// A fresh store on `disk`, loaded (so that its live bytes are counted).
fn opened(disk: &CrashDisk) -> RedbStore {
    let store = RedbStore::on_backend(disk.clone(), "crash disk").expect("open");
    store.load(&mut |_, _| {}).expect("load");
    store
}

fn run_seed(seed: u64) {
    // How many operations a compaction of this seed's file takes, to crash
    // within them: the same writes on a disk that does not crash.
    let ops = {
        let disk = CrashDisk::default();
        let store = opened(&disk);
        fill(&store, &mut StdRng::seed_from_u64(seed));
        let before = disk.ops();
        store.compact().expect("a compaction").expect("no snapshot open");
        disk.ops() - before
    };

    let mut rng = StdRng::seed_from_u64(seed);
    let disk = CrashDisk::default();
    let store = opened(&disk);
    let mut states = fill(&store, &mut rng);
    let mut rng = StdRng::seed_from_u64(seed ^ 0xc0_4ac7);
    disk.crash_in(rng.random_range(1..=ops + 2));
    match store.compact() {
        Err(_) => {
            assert!(disk.crashed(), "seed {seed}: a compaction failed with no crash");
            MID_COMPACTION.fetch_add(1, Ordering::Relaxed);
        }
        Ok(done) => {
            let done = done.expect("no snapshot open");
            assert!(done.after_bytes <= done.before_bytes, "seed {seed}: {done:?}");
            // The crash strikes in the writes after it: the one it strikes
            // may land, whole.
            let mut held = states.last().expect("one state at least").clone();
            while !disk.crashed() {
                let id = held.keys().last().map_or(1, |id| id + 1);
                let batch = [Mutation::Insert { task: task(id, 10), payload: payload(id, 5_000) }];
                let mut applied = held.clone();
                applied.insert(id, (10, payload(id, 5_000)));
                states.push(applied);
                let result = apply(&store, &mut held, &batch, true);
                assert_eq!(result.is_err(), disk.crashed(), "seed {seed}: {result:?}");
            }
            AFTER_COMPACTION.fetch_add(1, Ordering::Relaxed);
        }
    }
    drop(store);

    // The machine comes back with what the disk kept.
    let disk = CrashDisk::holding(disk.after_crash(&mut rng));
    let store = opened(&disk);
    let held = read(&store);
    assert!(
        states.contains(&held),
        "seed {seed}: after the crash the store holds {} tasks, a state the writes never went through \
         (they went through {:?} tasks)",
        held.len(),
        states.iter().map(Held::len).collect::<Vec<_>>()
    );
    store.compact().expect("a compaction after the restart").expect("no snapshot open");
    assert_eq!(read(&store), held, "seed {seed}: a compaction after the restart changed what is held");
    let id = held.keys().last().map_or(1, |id| id + 1);
    let mut after = held.clone();
    apply(&store, &mut after, &[Mutation::Insert { task: task(id, 10), payload: payload(id, 10) }], true)
        .expect("a write after the restart");
    drop(store);
    assert_eq!(read(&opened(&disk)), after, "seed {seed}: what the reopened store was given");
}

#[test]
fn crash_simulator_of_compactions() {
    let started = std::time::Instant::now();
    let seeds: Vec<u64> = match std::env::var("HOURGLASS_SIM_SEED").ok().and_then(|s| s.parse().ok()) {
        Some(seed) => vec![seed],
        None => super::seeds().filter(|seed| seed.is_multiple_of(SEEDS_ONE_IN)).collect(),
    };
    for &seed in &seeds {
        if let Err(panic) = std::panic::catch_unwind(|| run_seed(seed)) {
            eprintln!("compaction crash simulator: seed {seed} failed; rerun it with HOURGLASS_SIM_SEED={seed}");
            std::panic::resume_unwind(panic);
        }
    }
    println!(
        "compaction crash simulator: {} seeds passed in {:.1?}: {} crashes in the middle of a compaction, {} in the write after one",
        seeds.len(),
        started.elapsed(),
        MID_COMPACTION.load(Ordering::Relaxed),
        AFTER_COMPACTION.load(Ordering::Relaxed),
    );
}
