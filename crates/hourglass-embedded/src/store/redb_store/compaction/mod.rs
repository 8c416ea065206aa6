//! Compaction: the file's free space given back, with the writer held for a
//! bounded time whatever the store holds.
//!
//! redb reuses freed pages, but its file keeps the size of its peak. redb's
//! own `Database::compact` moves the live pages down in place and holds the
//! writer until it is done: about 1.2 ms per MB of the largest file the
//! store ever reached (304 to 648 ms in BENCHMARKS.md's churn rounds). So a
//! compaction here copies the live data into a new file beside the store
//! instead ([`StoreFile::Copy`](super::StoreFile::Copy)), while the writer
//! goes on, and puts it in the store's place at the end:
//!
//! | step | who | what | the writer waits |
//! |---|---|---|---|
//! | begin | writer, between commits | a read snapshot of the store; the copy created empty; from now on every key a commit changes is marked dirty ([`Dirty`]) | creating a file |
//! | copy | worker | the snapshot's tables into the copy, [`COPY_STEP_ENTRIES`] (or [`COPY_STEP_BYTES`]) at a time, each a commit of the copy's own, without fsync | no |
//! | catch up | worker | [`SYNC_STEP_KEYS`] dirty keys at a time: each key's value now in the store written to the copy, or removed from it | no |
//! | finish | writer, between commits, once at most [`FINISH_DIRTY_MAX`] keys are dirty | the worker's step in flight; the last dirty keys and one durable commit of the copy; the copy renamed over the store's file and the directory synced | one worker step, [`FINISH_DIRTY_MAX`] keys, two fsyncs and a rename |
//!
//! The worker is a thread of the compaction's own, or (for a deterministic
//! simulator) the writer itself, one step per ask
//! ([`RedbStore::stepped`](super::RedbStore::stepped)).
//!
//! **Why the copy ends equal to the store.** Every key changed after the
//! snapshot is dirty, so the snapshot's value of every key that is not dirty
//! is its value now. A dirty key is copied from what the store holds when it
//! is synced; a commit that changes it again marks it again, after the
//! commit, so it is synced again. Writing a key's value now is the same
//! however often it is done. The finish syncs what is left with the writer
//! still: nothing is dirty, the copy equals the store.
//!
//! **Crashes.** Until the rename, the store's file is what it was, and every
//! acknowledged write is in it: a start removes a copy it finds. The rename
//! follows the copy's durable commit, which holds every write. Between the
//! rename and the directory's sync either file may come back after a crash,
//! both holding the same, and no write is made durable until that sync has
//! returned ([`Promotion::Unsynced`](super::Promotion::Unsynced)).
//! `tests/sim/compaction.rs` crashes every step at random, with writes in
//! between.
//!
//! **Disk.** A compaction begins once the file is at least
//! [`COMPACT_FILE_MIN_BYTES`] and [`FILE_PER_LIVE_MAX`] times the live bytes:
//! between compactions the file stays within `FILE_PER_LIVE_MAX` times the
//! live data plus `COMPACT_FILE_MIN_BYTES` (and what one commit group adds).
//! While one runs, the copy adds about the live bytes beside it.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::thread::JoinHandle;

use parking_lot::{Condvar, Mutex};
use redb::{Database, Durability, ReadTransaction, ReadableDatabase, TableDefinition, WriteTransaction};

use super::{db_error, existing, META, NEXT_ID, PAUSED, PAUSE_ENDS, PAYLOADS, SCHEDULES, SETTINGS, STATES, TASKS};
use crate::store::error::StoreError;
use crate::store::interface::Mutation;

/// A file smaller than this is never compacted: what compaction could give
/// back is at most this much. The constant in the file's bound (see the
/// module's docs), and below beanstalkd's 10 MiB binlog file.
pub const COMPACT_FILE_MIN_BYTES: u64 = 8 << 20;
/// A file this many times the live bytes, or more, is compacted: it is at
/// least half free.
pub const FILE_PER_LIVE_MAX: u64 = 2;
/// Entries the worker copies from the snapshot in one step (one commit of
/// the copy), at most.
pub const COPY_STEP_ENTRIES: usize = 4_096;
/// Value bytes the worker copies in one step, at most (a step ends at the
/// entry that passes it).
pub const COPY_STEP_BYTES: usize = 4 << 20;
/// Dirty keys the worker syncs in one step, at most.
pub const SYNC_STEP_KEYS: usize = 4_096;
/// The writer finishes a compaction once at most this many keys are dirty:
/// what bounds the keys it syncs itself.
pub const FINISH_DIRTY_MAX: usize = 4_096;
/// Dirty keys a compaction may track: past this, writes outrun the worker,
/// and the compaction is given up (its copy removed) rather than hold an
/// unbounded set. About 64 bytes a key.
pub const DIRTY_KEYS_MAX: usize = 1 << 20;
/// The live estimate before the start's load has counted it: no compaction.
pub(super) const LIVE_UNKNOWN: u64 = u64::MAX;
const _: () = assert!(FILE_PER_LIVE_MAX >= 2, "a file compacted is at least half free: compaction gives back");
const _: () = assert!(FINISH_DIRTY_MAX <= DIRTY_KEYS_MAX && SYNC_STEP_KEYS <= DIRTY_KEYS_MAX);
const _: () = assert!(SYNC_STEP_KEYS >= FINISH_DIRTY_MAX, "a step can always bring the dirty keys within the finish");

/// The last compaction (or one given up): the file's bytes after it and the
/// live bytes then. Another is due only once the file has grown past
/// `FILE_PER_LIVE_MAX` times what it left, or the live bytes fallen below a
/// `FILE_PER_LIVE_MAX`th: a file that compaction could not bring within the
/// bound (its pages fuller than estimated) is not compacted again and again
/// for nothing.
#[derive(Debug, Clone, Copy)]
pub(super) struct Compaction {
    pub(super) after_bytes: u64,
    pub(super) live_bytes: u64,
}

impl Compaction {
    /// Whether a file of `len` bytes with `live` bytes live is to be
    /// compacted, after this compaction (`None`: none yet).
    pub(super) fn due(last: Option<Compaction>, len: u64, live: u64) -> bool {
        let mostly_free =
            live != LIVE_UNKNOWN && len >= COMPACT_FILE_MIN_BYTES && len >= live.saturating_mul(FILE_PER_LIVE_MAX);
        mostly_free
            && last.is_none_or(|last| {
                len >= last.after_bytes.saturating_mul(FILE_PER_LIVE_MAX)
                    || live.saturating_mul(FILE_PER_LIVE_MAX) < last.live_bytes
            })
    }
}

/// The keys changed since the snapshot and not yet synced to the copy.
/// Each [`Mutation`] changes the rows of one key: a task's id (its body,
/// state and payload), a name (a schedule's, or a queue's pause and
/// settings: every table keyed by a name is synced for it), or the meta row.
#[derive(Debug, Default)]
pub(super) struct Dirty {
    ids: BTreeSet<u64>,
    names: BTreeSet<Box<str>>,
    meta: bool,
}

impl Dirty {
    fn len(&self) -> usize {
        self.ids.len() + self.names.len() + usize::from(self.meta)
    }

    fn mark(&mut self, batch: &[Mutation]) {
        for mutation in batch {
            match mutation {
                Mutation::Insert { task, .. } | Mutation::Update(task) => {
                    self.ids.insert(task.id);
                }
                Mutation::Delete(id) => {
                    self.ids.insert(*id);
                }
                Mutation::NextId(_) => self.meta = true,
                Mutation::PutSchedule(schedule) => self.mark_name(&schedule.name),
                Mutation::DeleteSchedule(name)
                | Mutation::PauseQueue { queue: name, .. }
                | Mutation::PutSettings { queue: name, .. } => self.mark_name(name),
            }
        }
    }

    fn mark_name(&mut self, name: &str) {
        if !self.names.contains(name) {
            self.names.insert(name.into());
        }
    }

    /// Takes up to `max` keys out.
    fn take(&mut self, max: usize) -> Dirty {
        let mut taken = Dirty { meta: std::mem::take(&mut self.meta), ..Dirty::default() };
        while taken.len() < max {
            if let Some(id) = self.ids.pop_first() {
                taken.ids.insert(id);
            } else if let Some(name) = self.names.pop_first() {
                taken.names.insert(name);
            } else {
                break;
            }
        }
        taken
    }

    /// Writes each key's value in `from` to `to`, or removes it there.
    fn sync(&self, from: &ReadTransaction, to: &WriteTransaction) -> Result<(), redb::Error> {
        let ids = || self.ids.iter().copied();
        sync_table(from, to, TASKS, ids())?;
        sync_table(from, to, STATES, ids())?;
        sync_table(from, to, PAYLOADS, ids())?;
        let names = || self.names.iter().map(|name| &**name);
        sync_table(from, to, SCHEDULES, names())?;
        sync_table(from, to, SETTINGS, names())?;
        sync_table(from, to, PAUSED, names())?;
        sync_table(from, to, PAUSE_ENDS, names())?;
        if self.meta {
            sync_table(from, to, META, std::iter::once(NEXT_ID))?;
        }
        Ok(())
    }
}

/// Each of `keys`' value in `from`'s `table` written to `to`'s, or removed.
fn sync_table<'k, K: redb::Key + 'static, V: redb::Value + 'static>(
    from: &ReadTransaction,
    to: &WriteTransaction,
    table: TableDefinition<'_, K, V>,
    keys: impl Iterator<Item = K::SelfType<'k>>,
) -> Result<(), redb::Error> {
    let source = existing(from, table)?;
    let mut target = to.open_table(table)?;
    for key in keys {
        match source.as_ref().map(|source| source.get(&key)).transpose()?.flatten() {
            Some(value) => target.insert(&key, value.value())?,
            None => target.remove(&key)?,
        };
    }
    Ok(())
}

/// The tables a copy goes through, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Table {
    Tasks,
    States,
    Payloads,
    Meta,
    Schedules,
    Settings,
    Paused,
    PauseEnds,
}

impl Table {
    const ALL: [Table; 8] = [
        Table::Tasks,
        Table::States,
        Table::Payloads,
        Table::Meta,
        Table::Schedules,
        Table::Settings,
        Table::Paused,
        Table::PauseEnds,
    ];
}

/// Where the copy of the snapshot stands: the table, and the key to go on
/// from (ids or names, as the table is keyed).
#[derive(Debug, Default)]
struct Cursor {
    table: usize,
    from_id: u64,
    from_name: String,
}

/// Copies one step of `from`'s `table` to `to`, from key `start` on: the
/// first key left for the next step (`resume` says it), or `None` once the
/// table is done.
fn copy_step<'k, K, V>(
    from: &ReadTransaction,
    to: &WriteTransaction,
    table: TableDefinition<'_, K, V>,
    start: K::SelfType<'k>,
    resume: impl Fn(K::SelfType<'_>) -> Resume,
) -> Result<Option<Resume>, redb::Error>
where
    K: redb::Key + 'static,
    V: redb::Value + 'static,
{
    let Some(source) = existing(from, table)? else { return Ok(None) };
    let mut target = to.open_table(table)?;
    let (mut entries, mut bytes) = (0, 0);
    for entry in source.range::<K::SelfType<'k>>(start..)? {
        let (key, value) = entry?;
        if entries == COPY_STEP_ENTRIES || bytes >= COPY_STEP_BYTES {
            return Ok(Some(resume(key.value())));
        }
        target.insert(key.value(), value.value())?;
        entries += 1;
        bytes += V::as_bytes(&value.value()).as_ref().len();
    }
    Ok(None)
}

/// The key a copy step goes on from.
enum Resume {
    Id(u64),
    Name(String),
}

/// What a worker's step did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Step {
    /// Copied part of the snapshot, or synced dirty keys.
    Worked,
    /// Nothing to do until a commit marks keys dirty.
    Idle,
}

/// What the worker works with: held by the worker for a step at a time.
struct Worker {
    /// The store's database now: what dirty keys are read from.
    main: Arc<Database>,
    copy: Arc<Database>,
    /// The store when the compaction began; dropped once copied.
    snapshot: Option<ReadTransaction>,
    cursor: Cursor,
}

impl Worker {
    fn step(&mut self, shared: &Shared) -> Result<Step, StoreError> {
        if let Some(snapshot) = &self.snapshot {
            let mut txn = self.copy.begin_write().map_err(db_error)?;
            txn.set_durability(Durability::None).map_err(db_error)?;
            let done = copy_one_step(&mut self.cursor, snapshot, &txn).map_err(db_error)?;
            txn.commit().map_err(db_error)?;
            if done {
                self.snapshot = None;
                shared.state.lock().copied = true;
                shared.changed.notify_all();
            }
            return Ok(Step::Worked);
        }
        let keys = shared.state.lock().dirty.take(SYNC_STEP_KEYS);
        if keys.len() == 0 {
            return Ok(Step::Idle);
        }
        let from = self.main.begin_read().map_err(db_error)?;
        let mut txn = self.copy.begin_write().map_err(db_error)?;
        txn.set_durability(Durability::None).map_err(db_error)?;
        keys.sync(&from, &txn).map_err(db_error)?;
        txn.commit().map_err(db_error)?;
        shared.changed.notify_all();
        Ok(Step::Worked)
    }
}

/// Copies one step of the snapshot `from` to `to`, from `cursor` on;
/// whether it is all copied.
fn copy_one_step(cursor: &mut Cursor, from: &ReadTransaction, to: &WriteTransaction) -> Result<bool, redb::Error> {
    let Some(&table) = Table::ALL.get(cursor.table) else { return Ok(true) };
    let by_id = |id: u64| Resume::Id(id);
    let by_name = |name: &str| Resume::Name(name.to_owned());
    let from_name = cursor.from_name.as_str();
    let resume = match table {
        Table::Tasks => copy_step(from, to, TASKS, cursor.from_id, by_id)?,
        Table::States => copy_step(from, to, STATES, cursor.from_id, by_id)?,
        Table::Payloads => copy_step(from, to, PAYLOADS, cursor.from_id, by_id)?,
        Table::Meta => copy_step(from, to, META, from_name, by_name)?,
        Table::Schedules => copy_step(from, to, SCHEDULES, from_name, by_name)?,
        Table::Settings => copy_step(from, to, SETTINGS, from_name, by_name)?,
        Table::Paused => copy_step(from, to, PAUSED, from_name, by_name)?,
        Table::PauseEnds => copy_step(from, to, PAUSE_ENDS, from_name, by_name)?,
    };
    match resume {
        Some(Resume::Id(id)) => cursor.from_id = id,
        Some(Resume::Name(name)) => cursor.from_name = name,
        None => *cursor = Cursor { table: cursor.table + 1, ..Cursor::default() },
    }
    Ok(cursor.table == Table::ALL.len())
}

/// What the writer and the worker share.
#[derive(Default)]
struct Shared {
    state: Mutex<State>,
    /// Keys marked, a step done, the worker stopped or failed.
    changed: Condvar,
}

#[derive(Default)]
struct State {
    dirty: Dirty,
    copied: bool,
    stop: bool,
    failed: Option<StoreError>,
}

/// A compaction under way: begun by the writer, worked by a thread of its
/// own (or by the writer, one step per ask), finished by the writer.
pub(super) struct Job {
    shared: Arc<Shared>,
    worker: Arc<Mutex<Worker>>,
    thread: Option<JoinHandle<()>>,
    /// The file's bytes and the live bytes when it began.
    pub(super) before_bytes: u64,
    pub(super) live_bytes: u64,
}

impl Job {
    /// Begins copying `main` as it is now into `copy` (new and empty);
    /// `background`: in a thread of its own, else one step per
    /// [`step`](Job::step). From now on every commit to `main` must be
    /// [`mark`](Job::mark)ed, in the order committed.
    pub(super) fn begin(
        main: Arc<Database>,
        copy: Database,
        background: bool,
        (before_bytes, live_bytes): (u64, u64),
    ) -> Result<Job, StoreError> {
        let snapshot = main.begin_read().map_err(db_error)?;
        let worker = Arc::new(Mutex::new(Worker {
            main,
            copy: Arc::new(copy),
            snapshot: Some(snapshot),
            cursor: Cursor::default(),
        }));
        let shared = Arc::new(Shared::default());
        let thread = if background {
            let (worker, shared) = (worker.clone(), shared.clone());
            let spawned = std::thread::Builder::new()
                .name("hourglass-compact".into())
                .spawn(move || work(&worker, &shared))
                .map_err(|error| {
                    StoreError::Database(hourglass_queue::Failure::new("cannot start compacting", error))
                })?;
            Some(spawned)
        } else {
            None
        };
        Ok(Job { shared, worker, thread, before_bytes, live_bytes })
    }

    /// Marks the keys a commit to the store changed; `false` if that makes
    /// more than [`DIRTY_KEYS_MAX`]: the job is to be given up.
    pub(super) fn mark(&self, batch: &[Mutation]) -> bool {
        let mut state = self.shared.state.lock();
        state.dirty.mark(batch);
        let within = state.dirty.len() <= DIRTY_KEYS_MAX;
        drop(state);
        self.shared.changed.notify_all();
        within
    }

    /// One step of the worker's, on the caller's thread (a job begun
    /// without a thread of its own).
    pub(super) fn step(&self) -> Result<Step, StoreError> {
        self.worker.lock().step(&self.shared)
    }

    /// Whether the job can be finished now; its error if its worker failed.
    pub(super) fn ready(&self) -> Result<bool, StoreError> {
        let state = self.shared.state.lock();
        match &state.failed {
            Some(error) => Err(error.clone()),
            None => Ok(state.copied && state.dirty.len() <= FINISH_DIRTY_MAX),
        }
    }

    /// Works (or waits for the worker) until the job can be finished.
    pub(super) fn wait_ready(&self) -> Result<(), StoreError> {
        if self.thread.is_none() {
            while !self.ready()? {
                self.step()?;
            }
            return Ok(());
        }
        let mut state = self.shared.state.lock();
        loop {
            if let Some(error) = &state.failed {
                return Err(error.clone());
            }
            if state.copied && state.dirty.len() <= FINISH_DIRTY_MAX {
                return Ok(());
            }
            self.shared.changed.wait(&mut state);
        }
    }

    /// Stops the worker, syncs the keys still dirty, and makes the copy
    /// durable: it then holds what the store holds. Called by the writer,
    /// between commits. Returns the copy, and the keys synced here.
    pub(super) fn finish(mut self) -> Result<(Arc<Database>, usize), StoreError> {
        self.stop();
        let worker = self.worker.lock();
        let keys = {
            let mut state = self.shared.state.lock();
            if let Some(error) = state.failed.take() {
                return Err(error);
            }
            let dirty = &mut state.dirty;
            std::mem::take(dirty)
        };
        let from = worker.main.begin_read().map_err(db_error)?;
        let mut txn = worker.copy.begin_write().map_err(db_error)?;
        txn.set_durability(Durability::Immediate).map_err(db_error)?;
        keys.sync(&from, &txn).map_err(db_error)?;
        txn.commit().map_err(db_error)?;
        Ok((worker.copy.clone(), keys.len()))
    }

    /// Stops the worker's thread, if it has one, after its step in flight.
    fn stop(&mut self) {
        self.shared.state.lock().stop = true;
        self.shared.changed.notify_all();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for Job {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The worker's thread: steps until stopped or failed, waiting while idle.
fn work(worker: &Mutex<Worker>, shared: &Shared) {
    loop {
        if shared.state.lock().stop {
            return;
        }
        let step = worker.lock().step(shared);
        match step {
            Ok(Step::Worked) => {}
            Ok(Step::Idle) => {
                let mut state = shared.state.lock();
                while !state.stop && state.dirty.len() == 0 {
                    shared.changed.wait(&mut state);
                }
            }
            Err(error) => {
                shared.state.lock().failed = Some(error);
                shared.changed.notify_all();
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests;
