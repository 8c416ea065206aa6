//! The crash simulator for redb's own files under a compaction: the real
//! [`RedbStore`] in a directory of disks that lose what was not synced
//! ([`CrashDir`]), its compaction worked one step at a time
//! ([`RedbStore::stepped`]) with writes between the steps, crashed at a
//! random write, length change, sync, removal or rename, anywhere from the
//! compaction's first step to the write after its finish, then opened again
//! from what the disks kept.
//!
//! Each disk keeps what was synced; of each write and length change since,
//! in 4 KiB pieces, a seeded choice says whether it reached the disk before
//! the crash, each on its own (a disk's cache writes back in any order: only
//! a sync orders). The directory's rename of the copy over the file is
//! durable once the directory is synced; a crash before that brings back
//! either file. Checked, for every seed:
//! - the store opens again (redb repairs it), and holds one state the writes
//!   went through: the last made durable (by a durable write, or by a
//!   compaction's finish), or one of those applied after it without fsync,
//!   or the write the crash struck, whole (a prefix, never a hole);
//! - its payloads, in the body and apart, read back byte for byte;
//! - the reopened store compacts, and writes, and holds the same again.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use hourglass_embedded::{Mutation, Promotion, RedbStore, Store, StoreFile, StoreFiles};

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

/// Crashes that struck in the middle of a compaction (before its finish
/// returned), and after one, over every seed; and the writes made between
/// its steps.
static MID_COMPACTION: AtomicU64 = AtomicU64::new(0);
static AFTER_COMPACTION: AtomicU64 = AtomicU64::new(0);
static WRITES_DURING: AtomicU64 = AtomicU64::new(0);

#[derive(Debug)]
enum Change {
    Write(u64, Vec<u8>),
    SetLen(u64),
}

/// What every disk of a directory shares: one count of operations, and the
/// crash.
#[derive(Debug, Default)]
struct Machine {
    /// Writes, length changes, syncs, removals and renames so far.
    ops: u64,
    /// The one that crashes the machine.
    crash_at: Option<u64>,
    dead: bool,
}

impl Machine {
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

#[derive(Debug, Default)]
struct Disk {
    /// What survives a crash for certain.
    synced: Vec<u8>,
    /// What reads see.
    current: Vec<u8>,
    /// Changes since the last sync, in order.
    pending: Vec<Change>,
}

fn write_at(bytes: &mut Vec<u8>, offset: u64, data: &[u8]) {
    let (start, end) = (offset as usize, offset as usize + data.len());
    if bytes.len() < end {
        bytes.resize(end, 0);
    }
    bytes[start..end].copy_from_slice(data);
}

/// One file: a redb storage backend; clones share it.
#[derive(Debug, Clone)]
pub struct CrashDisk {
    disk: Arc<Mutex<Disk>>,
    machine: Arc<Mutex<Machine>>,
}

impl CrashDisk {
    /// What the disk holds after the crash: what was synced, and each piece
    /// of every change since, kept or not as `rng` says.
    fn after_crash(&self, rng: &mut StdRng) -> Vec<u8> {
        let disk = self.disk.lock();
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
        Ok(self.disk.lock().current.len() as u64)
    }

    fn read(&self, offset: u64, out: &mut [u8]) -> Result<(), std::io::Error> {
        if self.machine.lock().dead {
            return Err(std::io::Error::other("the disk is gone"));
        }
        let disk = self.disk.lock();
        let (start, end) = (offset as usize, offset as usize + out.len());
        let bytes = disk.current.get(start..end).ok_or_else(|| std::io::Error::other("read past the end"))?;
        out.copy_from_slice(bytes);
        Ok(())
    }

    fn set_len(&self, len: u64) -> Result<(), std::io::Error> {
        self.machine.lock().tick()?;
        let mut disk = self.disk.lock();
        disk.current.resize(len as usize, 0);
        disk.pending.push(Change::SetLen(len));
        Ok(())
    }

    fn sync_data(&self) -> Result<(), std::io::Error> {
        self.machine.lock().tick()?;
        let disk = &mut *self.disk.lock();
        for change in disk.pending.drain(..) {
            match change {
                Change::SetLen(len) => disk.synced.resize(len as usize, 0),
                Change::Write(offset, data) => write_at(&mut disk.synced, offset, &data),
            }
        }
        Ok(())
    }

    fn write(&self, offset: u64, data: &[u8]) -> Result<(), std::io::Error> {
        self.machine.lock().tick()?;
        let mut disk = self.disk.lock();
        write_at(&mut disk.current, offset, data);
        disk.pending.push(Change::Write(offset, data.to_vec()));
        Ok(())
    }
}

#[derive(Debug)]
struct Entries {
    main: CrashDisk,
    copy: Option<CrashDisk>,
    /// The main file before a rename the directory has not synced: a crash
    /// brings back either.
    before_rename: Option<CrashDisk>,
}

/// A data directory of crash disks: the store's file and a compaction's
/// copy; clones share it.
#[derive(Debug, Clone)]
pub struct CrashDir {
    entries: Arc<Mutex<Entries>>,
    machine: Arc<Mutex<Machine>>,
}

impl CrashDir {
    /// A directory whose file holds `image`, synced.
    fn holding(image: Vec<u8>) -> CrashDir {
        let machine = Arc::new(Mutex::new(Machine::default()));
        let disk = Disk { synced: image.clone(), current: image, pending: Vec::new() };
        let main = CrashDisk { disk: Arc::new(Mutex::new(disk)), machine: machine.clone() };
        CrashDir { entries: Arc::new(Mutex::new(Entries { main, copy: None, before_rename: None })), machine }
    }

    fn ops(&self) -> u64 {
        self.machine.lock().ops
    }

    /// Crashes at the `nth` operation from now.
    fn crash_in(&self, nth: u64) {
        let mut machine = self.machine.lock();
        machine.crash_at = Some(machine.ops + nth);
    }

    fn crashed(&self) -> bool {
        self.machine.lock().dead
    }

    /// What the store's file holds after the crash: the file the directory
    /// names (either, for a rename not synced), as its disk kept it.
    fn after_crash(&self, rng: &mut StdRng) -> Vec<u8> {
        let entries = self.entries.lock();
        match &entries.before_rename {
            Some(before) if rng.random_bool(0.5) => before.after_crash(rng),
            _ => entries.main.after_crash(rng),
        }
    }
}

impl StoreFiles for CrashDir {
    fn name(&self) -> &std::path::Path {
        "crash dir".as_ref()
    }

    fn open(&self, file: StoreFile, builder: &redb::Builder) -> Result<redb::Database, redb::DatabaseError> {
        let disk = {
            let mut entries = self.entries.lock();
            match file {
                StoreFile::Main => entries.main.clone(),
                StoreFile::Copy => entries
                    .copy
                    .get_or_insert_with(|| CrashDisk { disk: Arc::default(), machine: self.machine.clone() })
                    .clone(),
            }
        };
        builder.create_with_backend(disk)
    }

    fn len(&self, file: StoreFile) -> std::io::Result<u64> {
        let entries = self.entries.lock();
        let disk = match file {
            StoreFile::Main => Some(&entries.main),
            StoreFile::Copy => entries.copy.as_ref(),
        };
        Ok(disk.map_or(0, |disk| disk.disk.lock().current.len() as u64))
    }

    fn remove_copy(&self) -> std::io::Result<()> {
        self.machine.lock().tick()?;
        self.entries.lock().copy = None;
        Ok(())
    }

    fn promote_copy(&self) -> Promotion {
        if let Err(error) = self.machine.lock().tick() {
            return Promotion::Failed(error);
        }
        {
            let mut entries = self.entries.lock();
            let Some(copy) = entries.copy.take() else {
                return Promotion::Failed(std::io::Error::other("no copy to promote"));
            };
            let before = std::mem::replace(&mut entries.main, copy);
            entries.before_rename = Some(before);
        }
        match self.sync_promotion() {
            Ok(()) => Promotion::Done,
            Err(error) => Promotion::Unsynced(error),
        }
    }

    fn sync_promotion(&self) -> std::io::Result<()> {
        self.machine.lock().tick()?;
        self.entries.lock().before_rename = None;
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
        apply_to(held, batch);
    }
    result
}

/// What `batch` makes of `held`.
fn apply_to(held: &mut Held, batch: &[Mutation]) {
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
        let bytes = rng.random_range(1..3_000);
        let batch = some_writes(&held, &mut id, 1..20, bytes, rng);
        apply(store, &mut held, &batch, false).expect("a write before the crash");
        states.push(held.clone());
    }
    states
}

/// A fresh store in `dir`, its compactions stepped, loaded (so that its
/// live bytes are counted).
fn opened(dir: &CrashDir) -> RedbStore {
    let store = RedbStore::on_files(dir.clone()).expect("open").stepped();
    store.load(&mut |_, _| {}).expect("load");
    store
}

/// A random batch: `changes` tasks held rescheduled or deleted, then one
/// enqueued with a payload of `bytes`.
fn some_writes(
    held: &Held,
    next_id: &mut u64,
    changes: std::ops::Range<usize>,
    bytes: usize,
    rng: &mut StdRng,
) -> Vec<Mutation> {
    let mut ids: Vec<u64> = held.keys().copied().collect();
    let mut batch = Vec::new();
    for _ in 0..rng.random_range(changes) {
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
    batch.push(Mutation::Insert { task: task(*next_id, 10), payload: payload(*next_id, bytes) });
    *next_id += 1;
    batch
}

/// The compaction of a seed, with writes between its steps, until it
/// finishes or the crash strikes. `states` gets every state the store may be
/// left in (its last is the store's now). Returns whether it finished, and
/// the writes made between its steps; the next task's id is `next_id`.
fn compact_with_writes(
    store: &RedbStore,
    dir: &CrashDir,
    states: &mut Vec<Held>,
    next_id: &mut u64,
    rng: &mut StdRng,
) -> (bool, u64) {
    let mut held = states.last().expect("one state at least").clone();
    let mut writes = 0;
    if store.begin_compaction().is_err() {
        assert!(dir.crashed(), "a compaction could not begin with no crash");
        return (false, writes);
    }
    loop {
        for _ in 0..rng.random_range(0..3) {
            let durable = rng.random_bool(0.3);
            let batch = some_writes(&held, next_id, 0..6, between_steps_bytes(rng), rng);
            let before = held.clone();
            let result = apply(store, &mut held, &batch, durable);
            if result.is_err() {
                assert!(dir.crashed(), "a write failed with no crash: {result:?}");
                // The write the crash struck may have landed, whole.
                let mut struck = before;
                apply_to(&mut struck, &batch);
                states.push(struck);
                return (false, writes);
            }
            writes += 1;
            if durable {
                states.clear();
            }
            states.push(held.clone());
        }
        match store.compact_if_due() {
            Ok(None) => {}
            Ok(Some(done)) => {
                assert!(done.after_bytes <= done.before_bytes, "{done:?}");
                // A finished compaction made everything durable.
                *states = vec![held];
                return (true, writes);
            }
            Err(error) => {
                assert!(dir.crashed(), "a compaction failed with no crash: {error}");
                return (false, writes);
            }
        }
    }
}

/// Durable writes until the crash: the one it strikes may land, whole.
fn write_until_the_crash(
    store: &RedbStore,
    dir: &CrashDir,
    states: &mut Vec<Held>,
    next_id: &mut u64,
    rng: &mut StdRng,
) {
    let mut held = states.last().expect("one state at least").clone();
    while !dir.crashed() {
        let batch = some_writes(&held, next_id, 0..6, between_steps_bytes(rng), rng);
        let mut applied = held.clone();
        apply_to(&mut applied, &batch);
        states.push(applied);
        let result = apply(store, &mut held, &batch, true);
        assert_eq!(result.is_err(), dir.crashed(), "{result:?}");
        if result.is_ok() {
            *states = vec![held.clone()];
        }
    }
}

/// A payload's bytes between the steps of a compaction: in the body, or
/// apart from it.
fn between_steps_bytes(rng: &mut StdRng) -> usize {
    if rng.random_bool(0.5) {
        100
    } else {
        PAYLOAD_INLINE_MAX + 100
    }
}

/// The id a seed's writes during the compaction begin at: past every task
/// `fill` made.
fn first_id(states: &[Held]) -> u64 {
    states.last().and_then(|held| held.keys().last()).map_or(1, |id| id + 1) + 1_000
}

fn run_seed(seed: u64) {
    // How many operations the compaction of this seed takes, to crash within
    // them: the same writes in a directory that does not crash.
    let ops = {
        let dir = CrashDir::holding(Vec::new());
        let store = opened(&dir);
        let mut states = fill(&store, &mut StdRng::seed_from_u64(seed));
        let before = dir.ops();
        let mut next_id = first_id(&states);
        let mut rng = StdRng::seed_from_u64(seed ^ 0xc0_4ac7);
        let (finished, _) = compact_with_writes(&store, &dir, &mut states, &mut next_id, &mut rng);
        assert!(finished, "seed {seed}: a compaction with no crash finishes");
        dir.ops() - before
    };

    let mut rng = StdRng::seed_from_u64(seed);
    let dir = CrashDir::holding(Vec::new());
    let store = opened(&dir);
    let mut states = fill(&store, &mut rng);
    let mut rng = StdRng::seed_from_u64(seed ^ 0xc0_4ac7);
    dir.crash_in(StdRng::seed_from_u64(seed ^ 0x000c_2a54).random_range(1..=ops + 2));
    let mut next_id = first_id(&states);
    let (finished, writes) = compact_with_writes(&store, &dir, &mut states, &mut next_id, &mut rng);
    WRITES_DURING.fetch_add(writes, Ordering::Relaxed);
    if finished {
        write_until_the_crash(&store, &dir, &mut states, &mut next_id, &mut rng);
        AFTER_COMPACTION.fetch_add(1, Ordering::Relaxed);
    } else {
        MID_COMPACTION.fetch_add(1, Ordering::Relaxed);
    }
    drop(store);

    // The machine comes back with what the disks kept.
    let dir = CrashDir::holding(dir.after_crash(&mut rng));
    let store = opened(&dir);
    let held = read(&store);
    assert!(
        states.contains(&held),
        "seed {seed}: after the crash the store holds {} tasks, a state the writes never went through \
         (they went through {:?} tasks)",
        held.len(),
        states.iter().map(Held::len).collect::<Vec<_>>()
    );
    store.compact().expect("a compaction after the restart");
    assert_eq!(read(&store), held, "seed {seed}: a compaction after the restart changed what is held");
    let id = held.keys().last().map_or(1, |id| id + 1);
    let mut after = held.clone();
    apply(&store, &mut after, &[Mutation::Insert { task: task(id, 10), payload: payload(id, 10) }], true)
        .expect("a write after the restart");
    drop(store);
    assert_eq!(read(&opened(&dir)), after, "seed {seed}: what the reopened store was given");
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
        "compaction crash simulator: {} seeds passed in {:.1?}: {} crashes in the middle of a compaction, {} in the write after one; {} writes between its steps",
        seeds.len(),
        started.elapsed(),
        MID_COMPACTION.load(Ordering::Relaxed),
        AFTER_COMPACTION.load(Ordering::Relaxed),
        WRITES_DURING.load(Ordering::Relaxed),
    );
}
