//! The crash simulator for redb's own files under a compaction: the real
//! [`RedbStore`] in a directory of disks that lose what was not synced
//! ([`CrashDir`]), its compaction worked one step at a time
//! ([`RedbStore::stepped`]) with writes between the steps, crashed at a
//! random write, length change, sync, removal or rename, anywhere from the
//! compaction's first step to the write after its finish, then opened again
//! from what the disks kept ([`disk`](super::disk)). Checked, for every seed:
//! - the store opens again (redb repairs it), and holds one state the writes
//!   went through: the last made durable (by a durable write, or by a
//!   compaction's finish, which makes the relaxed log's batches durable
//!   first), or one of those applied after it without fsync, or the write
//!   the crash struck, whole (a prefix, never a hole);
//! - its payloads, in the body and apart, read back byte for byte;
//! - the reopened store compacts, and writes, and holds the same again.

use std::sync::atomic::{AtomicU64, Ordering};

use hourglass_embedded::{Mutation, RedbStore, Store};

use super::disk::CrashDir;
use super::held::{apply, apply_to, opened, payload, read, some_writes, writes_after_a_restart, Held};
use crate::stored_task as task;
use hourglass_queue::limits::PAYLOAD_INLINE_MAX;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

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

/// The writes of a seed, up to the compaction: tasks enqueued with payloads
/// of both homes, most deleted, some of the rest rescheduled; the last
/// batches without fsync. Returns the states the store went through since
/// the last durable batch (the first is that one's).
fn fill(store: &RedbStore, rng: &mut StdRng) -> Vec<Held> {
    let mut held = Held::default();
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
    let mut doomed: Vec<u64> = held.tasks.keys().copied().filter(|_| !rng.random_bool(keep)).collect();
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
                // A finished compaction made everything durable: the
                // relaxed log's batches first, then the copy.
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
    states.last().and_then(|held| held.tasks.keys().last()).map_or(1, |id| id + 1) + 1_000
}

fn run_seed(seed: u64) {
    // How many operations the compaction of this seed takes, to crash within
    // them: the same writes in a directory that does not crash.
    let ops = {
        let dir = CrashDir::empty();
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
    let dir = CrashDir::empty();
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
    writes_after_a_restart(store, &dir, &held, true, seed);
}

#[test]
fn crash_simulator_of_compactions() {
    let started = std::time::Instant::now();
    let seeds = super::run_share("compaction crash simulator", SEEDS_ONE_IN, run_seed);
    println!(
        "compaction crash simulator: {} seeds passed in {:.1?}: {} crashes in the middle of a compaction, {} in the write after one; {} writes between its steps",
        seeds,
        started.elapsed(),
        MID_COMPACTION.load(Ordering::Relaxed),
        AFTER_COMPACTION.load(Ordering::Relaxed),
        WRITES_DURING.load(Ordering::Relaxed),
    );
}
