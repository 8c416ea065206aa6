//! A [`Store`] that keeps what was made durable apart from what was only
//! applied, fails writes on demand, and "crashes": like redb's `CrashBackend`.
//!
//! - A durable apply (and [`Store::sync`]) moves everything applied so far, then
//!   the batch, into the durable image. A non-durable apply (the relaxed mode,
//!   `--fsync-every-ms`) only queues the batch.
//! - [`CrashStore::crash`] fails every later write, as a dead process would,
//!   and keeps of the batches not yet durable a prefix of a seeded length,
//!   none to all: storage may have taken any prefix of the order of changes,
//!   never a later batch without the earlier ones. In the torn variant the
//!   crash strikes *during* the next durable apply or sync: that batch reaches
//!   the durable image whole (the [`Store`] contract is one atomic batch, so
//!   "torn" here means written but never acknowledged), and its caller hears
//!   an error; a sync struck keeps a prefix as a crash does.
//! - [`CrashStore::restart`] is the machine coming back: the durable image is all
//!   that is left, and the store works again.
//! - The writer asks it to compact between commits; one ask in
//!   [`COMPACT_ONE_IN`] compacts, as redb's does: everything applied becomes
//!   durable, and nothing stored changes. A torn crash strikes there too, if
//!   that comes before a durable apply: what was applied since the last
//!   durable apply is then durable or not, all of it or none (redb's
//!   compaction begins with a durable commit), and the writer hears an
//!   error. What a crash in the middle of a compaction leaves of redb's own
//!   file is `compaction.rs`'s to check.
//!
//! Every state a task ever had durably is kept in a history, so a test can ask
//! whether something a client saw was ever durable; and every state it had
//! in a committed batch, durable or not, in a second, for the relaxed mode's
//! promise: visible once committed. Batches committed are counted, and so
//! are those the crash left durable ([`CrashStore::kept`]): a change answered
//! when `n` batches were committed must have survived if `n` were kept.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use hourglass_embedded::{Compacted, Loaded, Mutation, Snapshot, Store, StoreError};
use hourglass_queue::{Payload, QueueSettings, Schedule, Task};
use parking_lot::{Condvar, Mutex};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// One ask in this many compacts.
pub const COMPACT_ONE_IN: u32 = 8;

#[derive(Default)]
struct Image {
    tasks: BTreeMap<u64, (Task, Payload)>,
    next_id: u64,
    schedules: BTreeMap<Box<str>, Schedule>,
    paused: BTreeMap<Box<str>, Option<u64>>,
    settings: BTreeMap<Box<str>, QueueSettings>,
}

impl Image {
    fn apply(&mut self, batch: &[Mutation], history: &mut History, disorder: &mut Vec<String>) {
        history.record_batch(batch);
        for mutation in batch {
            match mutation {
                Mutation::Insert { task, payload } => {
                    self.tasks.insert(task.id, (task.clone(), payload.clone()));
                }
                Mutation::Update(task) => match self.tasks.get_mut(&task.id) {
                    Some(stored) => stored.0 = task.clone(),
                    None => disorder.push(format!("an update of task {}, which is not stored", task.id)),
                },
                Mutation::Delete(id) => {
                    self.tasks.remove(id);
                }
                Mutation::NextId(next) => self.next_id = self.next_id.max(*next),
                Mutation::PutSchedule(schedule) => {
                    self.schedules.insert(schedule.name.clone(), schedule.clone());
                }
                Mutation::DeleteSchedule(name) => {
                    self.schedules.remove(name);
                }
                Mutation::PauseQueue { queue, paused, until_ms } => {
                    if *paused {
                        self.paused.insert(queue.clone(), *until_ms);
                    } else {
                        self.paused.remove(queue);
                    }
                }
                Mutation::PutSettings { queue, settings } => {
                    if *settings == QueueSettings::default() {
                        self.settings.remove(queue);
                    } else {
                        self.settings.insert(queue.clone(), settings.clone());
                    }
                }
            }
        }
    }
}

/// What was ever durable: task ids, (id, due time) pairs, schedules'
/// (name, next occurrence) pairs, and the task each occurrence key was
/// first stored with.
#[derive(Default, Clone)]
pub struct History {
    pub ids: HashSet<u64>,
    pub due: HashSet<(u64, u64)>,
    pub schedules: HashSet<(Box<str>, Option<u64>)>,
    /// (queue, paused) pairs: every queue starts durably resumed.
    pub paused: HashSet<(Box<str>, bool)>,
    /// Every queue's settings as they were ever durable: every queue starts
    /// with the defaults.
    pub settings: Vec<(Box<str>, QueueSettings)>,
    pub keys: HashMap<Box<str>, u64>,
    /// Keys of schedules' occurrences stored with two tasks: an occurrence
    /// enqueued twice.
    pub twice: Vec<String>,
}

impl History {
    /// Notes every state `batch` gives.
    fn record_batch(&mut self, batch: &[Mutation]) {
        for mutation in batch {
            match mutation {
                Mutation::Insert { task, .. } | Mutation::Update(task) => self.record(task),
                Mutation::PutSchedule(schedule) => {
                    self.schedules.insert((schedule.name.clone(), schedule.next_ms));
                }
                Mutation::PauseQueue { queue, paused, .. } => {
                    self.paused.insert((queue.clone(), *paused));
                }
                Mutation::PutSettings { queue, settings } => self.settings.push((queue.clone(), settings.clone())),
                Mutation::Delete(_) | Mutation::NextId(_) | Mutation::DeleteSchedule(_) => {}
            }
        }
    }

    fn record(&mut self, task: &Task) {
        self.ids.insert(task.id);
        self.due.insert((task.id, task.run_at_ms));
        if let Some(key) = task.key.as_ref().filter(|key| key.starts_with("schedule:")) {
            let first = *self.keys.entry(key.clone()).or_insert(task.id);
            if first != task.id {
                self.twice.push(format!("{key} as task {first} and task {}", task.id));
            }
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Crash {
    /// Not crashed.
    No,
    /// The next durable apply (or sync) is written, then the process dies.
    Torn,
    /// Dead: every write fails.
    Dead,
}

struct Inner {
    /// While closed, writes wait (the writer thread blocks in `apply`).
    gate_closed: bool,
    /// Writes waiting at the gate.
    at_gate: usize,
    durable: Image,
    /// Applied without fsync, in order: a crash keeps a prefix of them.
    unsynced: Vec<Vec<Mutation>>,
    crash: Crash,
    /// What was ever durable.
    history: History,
    /// What was ever in a committed batch, durable or not.
    committed: History,
    /// Batches committed (applied and answered `Ok`), and how many of them
    /// are durable: the first `durable_through`, in order.
    applied: u64,
    durable_through: u64,
    /// The committed batch (numbered from 0, as `applied` counts them) that
    /// first inserted each task, and that first deleted it.
    inserted: HashMap<u64, u64>,
    deleted: HashMap<u64, u64>,
    /// Chance that one apply fails with nothing written.
    fail_probability: f64,
    rng: StdRng,
    /// Writes that could not be in order: an update of a task not stored.
    disorder: Vec<String>,
    /// Compactions done, and whether the crash struck during one.
    compactions: u64,
    crashed_compacting: bool,
}

impl Inner {
    /// Makes the first `count` batches not yet durable durable, in order.
    fn make_durable(&mut self, count: usize) {
        let rest = self.unsynced.split_off(count.min(self.unsynced.len()));
        for unsynced in std::mem::replace(&mut self.unsynced, rest) {
            self.durable.apply(&unsynced, &mut self.history, &mut self.disorder);
            self.durable_through += 1;
        }
    }

    /// Makes every batch committed durable.
    fn sync_all(&mut self) {
        self.make_durable(self.unsynced.len());
    }

    /// Dies: a seeded prefix of what was not durable reached the disk, the
    /// rest is lost, and every later write fails.
    fn die(&mut self) {
        let kept = if self.unsynced.is_empty() { 0 } else { self.rng.random_range(0..=self.unsynced.len()) };
        self.make_durable(kept);
        self.unsynced.clear();
        self.crash = Crash::Dead;
    }
}

/// A handle; clones share the store.
#[derive(Clone)]
pub struct CrashStore {
    inner: Arc<Mutex<Inner>>,
    gate: Arc<Condvar>,
}

impl CrashStore {
    pub fn new(seed: u64, fail_probability: f64) -> CrashStore {
        CrashStore {
            inner: Arc::new(Mutex::new(Inner {
                gate_closed: false,
                at_gate: 0,
                durable: Image::default(),
                unsynced: Vec::new(),
                crash: Crash::No,
                history: History::default(),
                committed: History::default(),
                applied: 0,
                durable_through: 0,
                inserted: HashMap::new(),
                deleted: HashMap::new(),
                fail_probability,
                rng: StdRng::seed_from_u64(seed ^ 0x5eed_5707e),
                disorder: Vec::new(),
                compactions: 0,
                crashed_compacting: false,
            })),
            gate: Arc::new(Condvar::new()),
        }
    }

    /// Holds every write until the returned [`Gate`] is opened or dropped: a
    /// write that is on its way, for as long as a test needs, and no longer
    /// than the test lives (a test that panics drops the gate as it unwinds,
    /// so the writer is never left held).
    pub fn close_gate(&self) -> Gate {
        self.inner.lock().gate_closed = true;
        Gate { store: self.clone() }
    }

    /// Whether a write is held at the gate.
    pub fn held_at_gate(&self) -> bool {
        self.inner.lock().at_gate > 0
    }

    /// The chance that one write fails with nothing written.
    pub fn fail_with_probability(&self, p: f64) {
        self.inner.lock().fail_probability = p;
    }

    /// Kills the process now, or (`torn`) during the next durable apply or
    /// sync.
    pub fn crash(&self, torn: bool) {
        let mut inner = self.inner.lock();
        if torn && inner.crash == Crash::No {
            inner.crash = Crash::Torn;
        } else {
            inner.die();
        }
    }

    /// The machine is back: what was not durable is gone; writes work again.
    pub fn restart(&self) {
        let mut inner = self.inner.lock();
        inner.unsynced.clear();
        inner.crash = Crash::No;
    }

    /// Batches committed so far: a change answered now is in one of them.
    pub fn applied(&self) -> u64 {
        self.inner.lock().applied
    }

    /// The committed batch (numbered from 0) that first inserted task `id`.
    pub fn inserted_in(&self, id: u64) -> Option<u64> {
        self.inner.lock().inserted.get(&id).copied()
    }

    /// The committed batch (numbered from 0) that first deleted task `id`.
    pub fn deleted_in(&self, id: u64) -> Option<u64> {
        self.inner.lock().deleted.get(&id).copied()
    }

    /// Batches committed whose changes are durable: after a crash, those it
    /// kept. A change answered when [`applied`](CrashStore::applied) was at
    /// most this survived the crash.
    pub fn kept(&self) -> u64 {
        self.inner.lock().durable_through
    }

    pub fn crashed(&self) -> bool {
        self.inner.lock().crash != Crash::No
    }

    /// Compactions done, and whether the crash struck in the middle of one.
    pub fn compactions(&self) -> (u64, bool) {
        let inner = self.inner.lock();
        (inner.compactions, inner.crashed_compacting)
    }

    /// Task `id` as the durable image holds it.
    pub fn durable_task(&self, id: u64) -> Option<Task> {
        self.inner.lock().durable.tasks.get(&id).map(|(task, _)| task.clone())
    }

    /// The ids in the durable image.
    pub fn durable_ids(&self) -> HashSet<u64> {
        self.inner.lock().durable.tasks.keys().copied().collect()
    }

    /// Writes that arrived out of order, described.
    pub fn disorder(&self) -> Vec<String> {
        self.inner.lock().disorder.clone()
    }

    /// What was ever durable.
    pub fn with_history<R>(&self, f: impl FnOnce(&History) -> R) -> R {
        f(&self.inner.lock().history)
    }

    /// What was ever in a committed batch, durable or not: in the relaxed
    /// mode, what clients may see.
    pub fn with_committed<R>(&self, f: impl FnOnce(&History) -> R) -> R {
        f(&self.inner.lock().committed)
    }
}

/// The store's gate, closed: every write waits at it until this is opened
/// or dropped.
#[must_use = "the gate opens when this is dropped"]
pub struct Gate {
    store: CrashStore,
}

impl Gate {
    /// Lets the writes held, and every later one, through.
    pub fn open(self) {}
}

impl Drop for Gate {
    fn drop(&mut self) {
        self.store.inner.lock().gate_closed = false;
        self.store.gate.notify_all();
    }
}

/// A snapshot's payloads.
struct Payloads(HashMap<u64, Payload>);

impl Snapshot for Payloads {
    fn payload(&mut self, id: u64) -> Result<Payload, StoreError> {
        match self.0.get(&id) {
            None => Err(StoreError::Missing { id }),
            Some(payload) if super::world::damaged_payload(payload) => {
                Err(StoreError::Corrupt { id, reason: "checksum mismatch (the simulator's damage)".into() })
            }
            Some(payload) => Ok(payload.clone()),
        }
    }
}

fn refused(why: &str) -> StoreError {
    StoreError::Database(hourglass_queue::Failure::msg(why))
}

impl Store for CrashStore {
    fn load(&self, visit: &mut dyn FnMut(Task, Loaded)) -> Result<u64, StoreError> {
        let inner = self.inner.lock();
        assert!(inner.unsynced.is_empty(), "loaded from a store with unsynced writes: restart it first");
        for (task, payload) in inner.durable.tasks.values() {
            visit(task.clone(), Loaded::of(payload));
        }
        Ok(inner.durable.next_id)
    }

    fn load_schedules(&self) -> Result<Vec<Schedule>, StoreError> {
        let inner = self.inner.lock();
        assert!(inner.unsynced.is_empty(), "loaded from a store with unsynced writes: restart it first");
        Ok(inner.durable.schedules.values().cloned().collect())
    }

    fn load_paused(&self) -> Result<Vec<hourglass_embedded::PausedQueue>, StoreError> {
        let inner = self.inner.lock();
        assert!(inner.unsynced.is_empty(), "loaded from a store with unsynced writes: restart it first");
        Ok(inner.durable.paused.iter().map(|(name, until_ms)| (name.clone(), *until_ms)).collect())
    }

    fn load_settings(&self) -> Result<Vec<(Box<str>, QueueSettings)>, StoreError> {
        let inner = self.inner.lock();
        assert!(inner.unsynced.is_empty(), "loaded from a store with unsynced writes: restart it first");
        Ok(inner.durable.settings.iter().map(|(name, settings)| (name.clone(), settings.clone())).collect())
    }

    /// Everything applied: the durable image, then what is not yet synced.
    /// A copy, which is fine at the simulator's sizes.
    fn snapshot(&self) -> Result<Box<dyn Snapshot>, StoreError> {
        let inner = self.inner.lock();
        let mut payloads: HashMap<u64, Payload> =
            inner.durable.tasks.iter().map(|(id, (_, payload))| (*id, payload.clone())).collect();
        for mutation in inner.unsynced.iter().flatten() {
            match mutation {
                Mutation::Insert { task, payload } => {
                    payloads.insert(task.id, payload.clone());
                }
                Mutation::Delete(id) => {
                    payloads.remove(id);
                }
                Mutation::Update(_)
                | Mutation::NextId(_)
                | Mutation::PutSchedule(_)
                | Mutation::DeleteSchedule(_)
                | Mutation::PauseQueue { .. }
                | Mutation::PutSettings { .. } => {}
            }
        }
        Ok(Box::new(Payloads(payloads)))
    }

    fn apply(&self, batch: &[Mutation], durable: bool) -> Result<(), StoreError> {
        let mut inner = self.inner.lock();
        inner.at_gate += 1;
        while inner.gate_closed {
            self.gate.wait(&mut inner);
        }
        inner.at_gate -= 1;
        let inner = &mut *inner;
        match inner.crash {
            Crash::Dead => return Err(refused("crashed")),
            Crash::Torn if durable => {
                inner.sync_all();
                inner.committed.record_batch(batch);
                inner.durable.apply(batch, &mut inner.history, &mut inner.disorder);
                inner.crash = Crash::Dead;
                return Err(refused("crashed while writing"));
            }
            Crash::Torn | Crash::No => {}
        }
        if inner.fail_probability > 0.0 && inner.rng.random_bool(inner.fail_probability) {
            return Err(refused("injected write failure"));
        }
        inner.committed.record_batch(batch);
        let index = inner.applied;
        for mutation in batch {
            match mutation {
                Mutation::Insert { task, .. } => {
                    inner.inserted.entry(task.id).or_insert(index);
                }
                Mutation::Delete(id) => {
                    inner.deleted.entry(*id).or_insert(index);
                }
                _ => {}
            }
        }
        inner.applied += 1;
        inner.unsynced.push(batch.to_vec());
        if durable {
            inner.sync_all();
        }
        Ok(())
    }

    fn compact_if_due(&self) -> Result<Option<Compacted>, StoreError> {
        let mut inner = self.inner.lock();
        let inner = &mut *inner;
        match inner.crash {
            Crash::Dead => return Err(refused("crashed")),
            _ if !inner.rng.random_ratio(1, COMPACT_ONE_IN) => return Ok(None),
            Crash::Torn => {
                // redb's compaction begins with a durable commit: all of
                // what was applied since the last durable one, or none.
                if inner.rng.random_bool(0.5) {
                    inner.sync_all();
                }
                inner.unsynced.clear();
                inner.crash = Crash::Dead;
                inner.crashed_compacting = true;
                return Err(refused("crashed while compacting"));
            }
            Crash::No => {}
        }
        inner.sync_all();
        inner.compactions += 1;
        Ok(Some(Compacted { before_bytes: 0, after_bytes: 0, live_bytes: 0, finish_keys: 0 }))
    }

    fn sync(&self) -> Result<(), StoreError> {
        let mut inner = self.inner.lock();
        let inner = &mut *inner;
        match inner.crash {
            Crash::Dead => Err(refused("crashed")),
            Crash::Torn => {
                inner.die();
                Err(refused("crashed while syncing"))
            }
            Crash::No => {
                inner.sync_all();
                Ok(())
            }
        }
    }
}
