//! A compaction under way ([`Job`]): begun by the writer, worked by a
//! thread of its own (or by the writer, a step an ask), finished by the
//! writer. See the module above for the steps and why they are enough.

use std::sync::Arc;
use std::thread::JoinHandle;

use hourglass_queue::Failure;
use parking_lot::{Condvar, Mutex};
use redb::{Database, Durability, ReadTransaction, ReadableDatabase};

use super::super::db_error;
use super::dirty::Dirty;
use super::tables::Cursor;
use super::{DIRTY_KEYS_MAX, FINISH_DIRTY_BYTES, FINISH_DIRTY_MAX, SYNC_STEP_BYTES, SYNC_STEP_KEYS};
use crate::store::error::StoreError;
use crate::store::interface::Mutation;

/// What a worker's step did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Step {
    /// Copied part of the snapshot, or synced dirty keys.
    Worked,
    /// Nothing to do until a commit marks keys dirty.
    Idle,
}

/// What the worker works with: held by the worker for a step at a time.
struct Worker {
    /// The store's database: what dirty keys are read from. It stays the
    /// store's while the job lives: a reopen after a failed write gives the
    /// job up first, and only the job's finish puts the copy in its place.
    main: Arc<Database>,
    copy: Arc<Database>,
    /// The store when the compaction began; dropped once copied.
    snapshot: Option<ReadTransaction>,
    cursor: Cursor,
}

impl Worker {
    /// One step: a part of the snapshot copied, or dirty keys synced. Each
    /// is a durable commit of the copy, made off the writer, so that the
    /// finish's commit has only its own keys to make durable.
    fn step(&mut self, shared: &Shared) -> Result<Step, StoreError> {
        if let Some(snapshot) = &self.snapshot {
            let mut txn = self.copy.begin_write().map_err(db_error)?;
            txn.set_durability(Durability::Immediate).map_err(db_error)?;
            let done = self.cursor.copy_step(snapshot, &txn).map_err(db_error)?;
            txn.commit().map_err(db_error)?;
            if done {
                self.snapshot = None;
                shared.state.lock().copied = true;
                shared.changed.notify_all();
            }
            return Ok(Step::Worked);
        }
        let keys = shared.state.lock().dirty.take(SYNC_STEP_KEYS, SYNC_STEP_BYTES);
        if keys.len() == 0 {
            return Ok(Step::Idle);
        }
        let from = self.main.begin_read().map_err(db_error)?;
        let mut txn = self.copy.begin_write().map_err(db_error)?;
        txn.set_durability(Durability::Immediate).map_err(db_error)?;
        keys.sync(&from, &txn).map_err(db_error)?;
        txn.commit().map_err(db_error)?;
        shared.changed.notify_all();
        Ok(Step::Worked)
    }
}

/// What the writer and the worker share.
#[derive(Default)]
pub(crate) struct Shared {
    pub(crate) state: Mutex<State>,
    /// Keys marked, a step done, the worker stopped or failed.
    changed: Condvar,
}

#[derive(Default)]
pub(crate) struct State {
    dirty: Dirty,
    pub(crate) copied: bool,
    stop: bool,
    failed: Option<StoreError>,
}

impl State {
    /// Whether the writer may finish now: all copied, and few enough keys
    /// dirty that syncing them is bounded; the worker's error if it failed.
    fn ready(&self) -> Result<bool, StoreError> {
        match &self.failed {
            Some(error) => Err(error.clone()),
            None => Ok(self.copied && self.dirty.len() <= FINISH_DIRTY_MAX && self.dirty.bytes() <= FINISH_DIRTY_BYTES),
        }
    }
}

/// A compaction under way: begun by the writer, worked by a thread of its
/// own (or by the writer, one step per ask), finished by the writer.
pub(crate) struct Job {
    pub(crate) shared: Arc<Shared>,
    worker: Arc<Mutex<Worker>>,
    thread: Option<JoinHandle<()>>,
    /// The file's bytes and the live bytes when it began.
    pub(crate) before_bytes: u64,
    pub(crate) live_bytes: u64,
}

impl Job {
    /// Begins copying `main` as it is now into `copy` (new and empty);
    /// `background`: in a thread of its own, else one step per
    /// [`step`](Job::step). From now on every commit to `main` must be
    /// [`mark`](Job::mark)ed, in the order committed.
    pub(crate) fn begin(
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
                .map_err(|error| StoreError::Database(Failure::new("cannot start compacting", error)))?;
            Some(spawned)
        } else {
            None
        };
        Ok(Job { shared, worker, thread, before_bytes, live_bytes })
    }

    /// Marks the keys a commit to the store changed, the meta rows too if
    /// it stored the relaxed log's `generation`; `false` if that makes more
    /// than [`DIRTY_KEYS_MAX`]: the job is to be given up.
    pub(crate) fn mark(&self, batch: &[Mutation], generation: bool) -> bool {
        let mut state = self.shared.state.lock();
        state.dirty.mark(batch);
        if generation {
            state.dirty.mark_generation();
        }
        let within = state.dirty.len() <= DIRTY_KEYS_MAX;
        drop(state);
        self.shared.changed.notify_all();
        within
    }

    /// One step of the worker's, on the caller's thread (a job begun
    /// without a thread of its own).
    pub(crate) fn step(&self) -> Result<Step, StoreError> {
        self.worker.lock().step(&self.shared)
    }

    /// Whether the job can be finished now; its error if its worker failed.
    pub(crate) fn ready(&self) -> Result<bool, StoreError> {
        self.shared.state.lock().ready()
    }

    /// Works (or waits for the worker) until the job can be finished.
    pub(crate) fn wait_ready(&self) -> Result<(), StoreError> {
        if self.thread.is_none() {
            while !self.ready()? {
                self.step()?;
            }
            return Ok(());
        }
        let mut state = self.shared.state.lock();
        while !state.ready()? {
            self.shared.changed.wait(&mut state);
        }
        Ok(())
    }

    /// Stops the worker, syncs the keys still dirty, and makes the copy
    /// durable: it then holds what the store holds. Called by the writer,
    /// between commits. Returns the copy, and the keys synced here. The job
    /// then holds only references to databases the store holds too.
    pub(crate) fn finish(&mut self) -> Result<(Arc<Database>, usize), StoreError> {
        if !self.stop() {
            return Err(StoreError::Database(Failure::msg("the compaction's thread ended in a panic")));
        }
        let worker = self.worker.lock();
        let keys = {
            let mut state = self.shared.state.lock();
            if let Some(error) = state.failed.take() {
                return Err(error);
            }
            std::mem::take(&mut state.dirty)
        };
        let from = worker.main.begin_read().map_err(db_error)?;
        let mut txn = worker.copy.begin_write().map_err(db_error)?;
        txn.set_durability(Durability::Immediate).map_err(db_error)?;
        keys.sync(&from, &txn).map_err(db_error)?;
        txn.commit().map_err(db_error)?;
        Ok((worker.copy.clone(), keys.len()))
    }

    /// Stops the worker's thread, if it has one, after its step in flight;
    /// `false` if it had ended in a panic.
    fn stop(&mut self) -> bool {
        self.shared.state.lock().stop = true;
        self.shared.changed.notify_all();
        self.thread.take().is_none_or(|thread| thread.join().is_ok())
    }
}

impl Drop for Job {
    fn drop(&mut self) {
        let _ = self.stop();
    }
}

/// The worker's thread: steps until stopped or failed, waiting while idle.
/// A step that panics (redb may, on a file damaged outside it) fails the
/// job like an error, so that nobody waits for a thread that is gone.
fn work(worker: &Mutex<Worker>, shared: &Shared) {
    loop {
        if shared.state.lock().stop {
            return;
        }
        let step = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| worker.lock().step(shared)))
            .unwrap_or_else(|_| Err(StoreError::Database(Failure::msg("the compaction's thread panicked"))));
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
