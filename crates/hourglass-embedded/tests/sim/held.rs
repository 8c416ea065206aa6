//! What a [`RedbStore`] holds, as the simulators of its own files model
//! it: each task's due time and payload, the next id stored, and the writes
//! that change them.

use std::collections::BTreeMap;

use hourglass_embedded::{Mutation, RedbStore, Store};
use hourglass_queue::Payload;
use rand::rngs::StdRng;
use rand::Rng;

use super::disk::CrashDir;
use crate::stored_task as task;

/// What the store holds.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Held {
    /// Each task's due time and payload, by id.
    pub tasks: BTreeMap<u64, (u64, Payload)>,
    /// The largest [`Mutation::NextId`] stored (0 if none).
    pub next_id: u64,
}

impl Held {
    /// Tasks held.
    pub fn len(&self) -> usize {
        self.tasks.len()
    }
}

/// Payload `id` of `bytes` bytes: its id, then padding.
pub fn payload(id: u64, bytes: usize) -> Payload {
    let mut text = format!("{id}:");
    let pad = bytes.saturating_sub(text.len());
    text.extend(std::iter::repeat_n('x', pad));
    text.into()
}

pub fn apply(store: &RedbStore, held: &mut Held, batch: &[Mutation], durable: bool) -> Result<(), String> {
    let result = store.apply(batch, durable).map_err(|error| error.to_string());
    if result.is_ok() {
        apply_to(held, batch);
    }
    result
}

/// What `batch` makes of `held`.
pub fn apply_to(held: &mut Held, batch: &[Mutation]) {
    for mutation in batch {
        match mutation {
            Mutation::Insert { task, payload } => {
                held.tasks.insert(task.id, (task.run_at_ms, payload.clone()));
            }
            Mutation::Update(task) => held.tasks.get_mut(&task.id).expect("updates a task held").0 = task.run_at_ms,
            Mutation::Delete(id) => {
                held.tasks.remove(id);
            }
            Mutation::NextId(next_id) => held.next_id = held.next_id.max(*next_id),
            _ => {}
        }
    }
}

/// Everything `store` holds, payloads read back.
pub fn read(store: &RedbStore) -> Held {
    let mut tasks = Vec::new();
    let next_id = store.load(&mut |task, _| tasks.push(task)).expect("load");
    let mut snapshot = store.snapshot().expect("snapshot");
    let tasks = tasks
        .into_iter()
        .map(|task| (task.id, (task.run_at_ms, snapshot.payload(task.id).expect("payload"))))
        .collect();
    Held { tasks, next_id }
}

/// A fresh store in `dir`, its compactions stepped, loaded (so that its
/// live bytes are counted).
pub fn opened(dir: &CrashDir) -> RedbStore {
    let store = RedbStore::on_files(dir.clone()).expect("open").stepped();
    store.load(&mut |_, _| {}).expect("load");
    store
}

/// A random batch: `changes` tasks held rescheduled or deleted, then one
/// enqueued with a payload of `bytes`, and now and then the next id raised.
pub fn some_writes(
    held: &Held,
    next_id: &mut u64,
    changes: std::ops::Range<usize>,
    bytes: usize,
    rng: &mut StdRng,
) -> Vec<Mutation> {
    let mut ids: Vec<u64> = held.tasks.keys().copied().collect();
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
    // Now and then the next id stored is raised past it, as the engine
    // reserves ids ahead.
    if rng.random_ratio(1, 16) {
        batch.push(Mutation::NextId(*next_id + rng.random_range(0..1_000)));
    }
    batch
}

/// After a restart: `store` (opened on `dir`) holding `held` takes one more
/// write, durable or not, and the store opened again holds it with the rest.
pub fn writes_after_a_restart(store: RedbStore, dir: &CrashDir, held: &Held, durable: bool, seed: u64) {
    let id = held.tasks.keys().last().map_or(1, |id| id + 1);
    let mut after = held.clone();
    apply(&store, &mut after, &[Mutation::Insert { task: task(id, 10), payload: payload(id, 10) }], durable)
        .expect("a write after the restart");
    drop(store);
    assert_eq!(read(&opened(dir)), after, "seed {seed}: what the reopened store was given");
}
