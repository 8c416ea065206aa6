//! The embedded store: one redb database file, with a table of task bodies,
//! one of state records, and one of the payloads too large to keep in memory.
//!
//! redb commits atomically with checksummed pages and two commit slots, so a
//! `kill -9` at any moment leaves either the previous or the new commit, never
//! a torn one. Freed pages are reused, but the file keeps the size of its
//! peak: so it is compacted once it is mostly free ([`Compaction`]).
//!
//! **Disk given back.** The store keeps an estimate of its live bytes (every
//! entry of the task tables: key, value and [`ENTRY_OVERHEAD_BYTES`]),
//! counted by the start's load and kept by every write from the sizes redb
//! hands back. The writer asks between commits ([`Store::compact_if_due`]);
//! once the file is mostly free, its live data is copied into a new file in
//! the background and put in its place, the writer held only for the last
//! step, whatever the store holds: [`compaction`] has how, and why a crash
//! at any point of it loses nothing.
//!
//! **Damage is never trusted, and a start costs what the metadata costs.**
//! After an unclean shutdown redb repairs the file and verifies every page's
//! checksum on its own. After a clean one it trusts the file, so every record
//! carries a checksum of its own ([`record`]): each body and state is verified
//! as the start loads it, each payload kept apart when it is read. A start
//! therefore reads the bodies and states, not the payloads: redb's full check
//! of an 8 GB file of 4 KiB payloads took 10 to 12 s, the load alone 0.5 s.
//! [`RedbStore::open_checked`] runs redb's full check anyway, and an open that
//! panics on a file damaged outside redb is reported as an error.
//!
//! A failed write (a full disk, say) leaves redb refusing every later
//! operation until the database is opened again, and redb may report a commit
//! failing after it reached the file. So the store reopens the database at
//! once and reads the batch back ([`landed`]): the answer is what the disk
//! holds, and the server serves again once there is room.
//!
//! **The relaxed mode writes a log first.** A batch that need not be
//! durable (`--fsync-every-ms`) is appended to [`relaxed_log`] and reaches
//! redb with many others: a crash of the process loses none of them, and a
//! batch costs one `write` rather than a redb commit.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use hourglass_queue::Failure;
use parking_lot::{Mutex, RwLock};
use redb::{Database, Durability, ReadOnlyTable, ReadTransaction, ReadableDatabase, ReadableTable, TableDefinition};

use super::error::StoreError;
use super::interface::{Compacted, Loaded, Mutation, PausedQueue, Snapshot, Store};
use super::record::{self, PayloadIn};
use super::schedule_record;
use super::settings_record;
use super::ENTRY_OVERHEAD_BYTES;
use hourglass_queue::Payload;
use hourglass_queue::QueueSettings;
use hourglass_queue::Schedule;
use hourglass_queue::Task;

mod compaction;
mod files;
mod landed;
mod relaxed_log;

use compaction::{Compaction, Job, LIVE_UNKNOWN};
pub use compaction::{
    COMPACT_FILE_MIN_BYTES, COMPACT_RETRY_PAUSE, COPY_STEP_BYTES, COPY_STEP_ENTRIES, DIRTY_KEYS_MAX, FILE_PER_LIVE_MAX,
    FINISH_DIRTY_BYTES, FINISH_DIRTY_MAX, SYNC_STEP_BYTES, SYNC_STEP_KEYS,
};
pub use files::{Directory, LogFile, Promotion, StoreFile, StoreFiles, COPY_SUFFIX, LOG_FILE_NAME};
use landed::landed;
use relaxed_log::{Apart, RelaxedLog};
pub use relaxed_log::{APPLY_BYTES, APPLY_MUTATIONS, LOG_BYTES_MAX};

/// Task id to the task's body, written once, with its payload if small (see
/// [`record`]).
const TASKS: TableDefinition<'_, u64, &[u8]> = TableDefinition::new("tasks");
/// Task id to what changed since (due time, attempts, dead), for tasks that
/// changed: a change rewrites this small record, never the body.
const STATES: TableDefinition<'_, u64, &[u8]> = TableDefinition::new("states");
/// Task id to its payload, for payloads kept apart from their bodies
/// ([`record::apart`]): a start reads the bodies only.
const PAYLOADS: TableDefinition<'_, u64, &[u8]> = TableDefinition::new("payloads");
/// Counters that outlive tasks; one for now, `next_id`.
const META: TableDefinition<'_, &str, u64> = TableDefinition::new("meta");
/// Schedules by name: see [`schedule_record`].
const SCHEDULES: TableDefinition<'_, &str, &[u8]> = TableDefinition::new("schedules");
/// The names of the paused queues (the value is unused: 1).
const PAUSED: TableDefinition<'_, &str, u8> = TableDefinition::new("paused_queues");
/// When the pauses that end by themselves end, Unix ms, by queue name.
const PAUSE_ENDS: TableDefinition<'_, &str, u64> = TableDefinition::new("pause_ends");
/// Queues' settings by name, for queues with other than the defaults: see
/// [`settings_record`].
const SETTINGS: TableDefinition<'_, &str, &[u8]> = TableDefinition::new("queue_settings");
const NEXT_ID: &str = "next_id";
/// The relaxed log's generation: its records of this generation are not yet
/// durable here ([`relaxed_log`]).
const LOG_GENERATION: &str = "log_generation";
/// The database's file name inside the data directory.
pub const FILE_NAME: &str = "tasks.redb";
/// redb's page cache. The engine keeps every task in memory and mostly
/// writes (it reads payloads kept apart once per delivery, and the bodies at
/// start), so a large cache would mostly hold pages it never reads again:
/// redb's 1 GiB default cost 140 bytes per task after a start.
const CACHE_BYTES: usize = 32 << 20;

/// A key's bytes: every task table is keyed by the task's id.
const KEY_BYTES: u64 = 8;

/// Tasks in a redb database in a data directory.
pub struct RedbStore {
    /// `None` while it is being reopened after a failed write. Snapshots
    /// hold it too: a compaction puts another in its place while they read.
    db: RwLock<Option<Arc<Database>>>,
    /// A write failed on I/O: redb refuses everything until reopened.
    failed_io: AtomicBool,
    /// A compaction's copy became the store's file, but not yet durably:
    /// no write may be made durable before it is ([`Promotion::Unsynced`]).
    promotion_owed: AtomicBool,
    /// The live bytes, estimated ([`LIVE_UNKNOWN`] until the load): written
    /// by the writer (and the load) only.
    live: AtomicU64,
    last_compaction: Mutex<Option<Compaction>>,
    /// No compaction begins before this, after one was given up.
    retry_at: Mutex<Option<std::time::Instant>>,
    /// Compactions given up, being closed and their copies removed off the
    /// writer: bounded (a worker's step, a close), and waited for before a
    /// new copy takes the name, or the file is opened again.
    giving_up: Mutex<Option<std::thread::JoinHandle<()>>>,
    /// Old files being closed off the writer once no snapshot reads them:
    /// never waited for (a snapshot may be held by a request that waits for
    /// the writer: `Engine::change` reads its answer's payload after its
    /// commit).
    closing: Mutex<Option<std::thread::JoinHandle<()>>>,
    /// The compaction under way. Held through every apply, so that a commit
    /// and the marking of its keys are one step for a compaction beginning.
    job: Mutex<Option<Job>>,
    /// Compactions worked by the writer, one step an ask, rather than by a
    /// thread of their own ([`RedbStore::stepped`]).
    stepped: bool,
    files: Arc<dyn StoreFiles>,
    /// The relaxed mode's log, used by whoever commits (the writer thread,
    /// or a request's), under its lock.
    log: Mutex<RelaxedLog>,
    /// The payloads kept apart that the log holds and redb does not yet.
    apart: Apart,
    /// Times the database was opened again after a failed write: each
    /// dropped its commits without fsync.
    reopens: AtomicU64,
}

fn db_error(error: impl Into<redb::Error>) -> StoreError {
    let error = error.into();
    let full = matches!(&error, redb::Error::Io(io) if relaxed_log::is_full(io));
    let failure = Failure::new("redb", error);
    if full {
        StoreError::Full(failure)
    } else {
        StoreError::Database(failure)
    }
}

/// "No space left on device" on Linux, for errors that come without a kind.
const ENOSPC: i32 = 28;

/// The relaxed log's generation `db` holds (0 before the first).
fn stored_generation(db: &Database) -> Result<u64, StoreError> {
    let txn = db.begin_read().map_err(db_error)?;
    let Some(meta) = existing(&txn, META).map_err(db_error)? else { return Ok(0) };
    Ok(meta.get(LOG_GENERATION).map_err(db_error)?.map_or(0, |value| value.value()))
}

/// Opens (or creates) `file` of `files` and its tables; with `check`,
/// redb verifies every page first.
fn open(files: &dyn StoreFiles, file: StoreFile, check: bool) -> Result<Database, StoreError> {
    let what = || format!("cannot open {}", files.name().display());
    // redb may panic on a file damaged outside it (only its full check
    // promises an error instead): refuse to start either way.
    let opened = catch_unwind(AssertUnwindSafe(|| {
        let mut builder = Database::builder();
        builder.set_cache_size(CACHE_BYTES).set_check_integrity_on_open(check);
        files.open(file, &builder)
    }));
    let db = match opened {
        Ok(Ok(db)) => db,
        Ok(Err(error)) => return Err(StoreError::Database(Failure::new(what(), error))),
        Err(_) => {
            return Err(StoreError::Database(Failure::msg(format!(
                "{}: the file is damaged (redb panicked reading it); redb's full check \
                 (RedbStore::open_checked) reports where",
                what()
            ))))
        }
    };
    let txn = db.begin_write().map_err(db_error)?;
    txn.open_table(TASKS).map_err(db_error)?;
    txn.open_table(STATES).map_err(db_error)?;
    txn.open_table(PAYLOADS).map_err(db_error)?;
    txn.open_table(META).map_err(db_error)?;
    txn.commit().map_err(db_error)?;
    Ok(db)
}

/// What one entry of `value_bytes` adds to the live estimate.
fn entry_bytes(value_bytes: usize) -> i64 {
    (KEY_BYTES + ENTRY_OVERHEAD_BYTES + value_bytes as u64) as i64
}

/// What an entry redb hands back as replaced or removed took from the live
/// estimate: nothing if there was none.
fn gone(entry: Option<redb::AccessGuard<'_, &'static [u8]>>) -> i64 {
    entry.map_or(0, |entry| entry_bytes(entry.value().len()))
}

impl RedbStore {
    /// Opens (or creates) the store in directory `dir`. A file that was not
    /// shut down cleanly is repaired and verified by redb; records are
    /// verified against their checksums as they are read.
    ///
    /// # Errors
    /// [`StoreError::Database`] if the directory cannot be made or the file is
    /// damaged, with the path in the message.
    pub fn open(dir: &Path) -> Result<RedbStore, StoreError> {
        Self::open_with(dir, false)
    }

    /// [`open`](RedbStore::open), with redb's full check of every page first:
    /// slower, in proportion to the whole file (payloads included).
    ///
    /// # Errors
    /// As [`open`](RedbStore::open); a damaged file is refused.
    pub fn open_checked(dir: &Path) -> Result<RedbStore, StoreError> {
        Self::open_with(dir, true)
    }

    fn open_with(dir: &Path, check: bool) -> Result<RedbStore, StoreError> {
        std::fs::create_dir_all(dir).map_err(|error| {
            StoreError::Database(Failure::new(format!("cannot create data directory {}", dir.display()), error))
        })?;
        Self::at(Arc::new(Directory::new(dir, FILE_NAME)), check)
    }

    /// A store in `files` (the crash simulator's, say), its relaxed log
    /// among them. Their main file must be the same storage at every open:
    /// the store opens it again after a failed write.
    ///
    /// # Errors
    /// As [`open`](RedbStore::open).
    pub fn on_files(files: impl StoreFiles) -> Result<RedbStore, StoreError> {
        Self::at(Arc::new(files), false)
    }

    fn at(files: Arc<dyn StoreFiles>, check: bool) -> Result<RedbStore, StoreError> {
        // A copy left by a crash in the middle of a compaction is scratch:
        // the main file holds every write (see `compaction`).
        files.remove_copy().map_err(|error| {
            StoreError::Database(Failure::new(
                format!("cannot remove a compaction's copy beside {}", files.name().display()),
                error,
            ))
        })?;
        let db = open(&*files, StoreFile::Main, check)?;
        let file = files.open_log().map_err(|error| {
            StoreError::Database(Failure::new(
                format!("cannot open the relaxed log beside {}", files.name().display()),
                error,
            ))
        })?;
        let (mut log, left) = RelaxedLog::open(file, stored_generation(&db)?)?;
        if log.undurable() {
            // Answered before a crash: committed before anything is read,
            // with no guess at what a failed commit left (the open fails,
            // and the log stays).
            let batches = left.len();
            let changes: Vec<Mutation> = left.into_iter().flatten().collect();
            let generation = log.next_generation();
            Self::try_apply(&db, &changes, true, &mut None, Some(generation)).map_err(db_error)?;
            log.committed(generation);
            tracing::info!(batches, changes = changes.len(), "committed the relaxed log's batches left by a crash");
        }
        Ok(RedbStore {
            db: RwLock::new(Some(Arc::new(db))),
            failed_io: AtomicBool::new(false),
            promotion_owed: AtomicBool::new(false),
            live: AtomicU64::new(LIVE_UNKNOWN),
            last_compaction: Mutex::new(None),
            retry_at: Mutex::new(None),
            giving_up: Mutex::new(None),
            closing: Mutex::new(None),
            job: Mutex::new(None),
            stepped: false,
            files,
            apart: log.apart(),
            log: Mutex::new(log),
            reopens: AtomicU64::new(0),
        })
    }

    /// This store, with its compactions worked by the caller of
    /// [`compact_if_due`](Store::compact_if_due), one bounded step an ask,
    /// rather than by a thread of their own: each run the same, for a
    /// simulator. The writer asks only between commits, so a compaction
    /// then advances only while writes come.
    #[must_use]
    pub fn stepped(mut self) -> RedbStore {
        self.stepped = true;
        self
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        self.files.name()
    }

    /// The bytes of the database's file.
    ///
    /// # Errors
    /// [`StoreError::Database`] if its length cannot be read.
    pub fn file_bytes(&self) -> Result<u64, StoreError> {
        self.files.len(StoreFile::Main).map_err(|error| {
            StoreError::Database(Failure::new(format!("cannot read the length of {}", self.path().display()), error))
        })
    }

    /// The live bytes as the store estimates them (see the module's docs);
    /// `None` before [`load`](Store::load) counted them.
    pub fn live_bytes(&self) -> Option<u64> {
        Some(self.live.load(Ordering::Acquire)).filter(|&live| live != LIVE_UNKNOWN)
    }

    /// Adds `delta` to the live estimate, if it is known.
    fn add_live(&self, delta: i64) {
        let live = self.live.load(Ordering::Acquire);
        if live != LIVE_UNKNOWN {
            self.live.store(live.saturating_add_signed(delta).min(LIVE_UNKNOWN - 1), Ordering::Release);
        }
    }

    /// Compacts the database now, whatever its size, and waits for it: the
    /// compaction under way, or a new one. The copy is worked by its thread
    /// (or here, for a [`stepped`](RedbStore::stepped) store); the finish
    /// holds the writer as [`compact_if_due`](Store::compact_if_due)'s does:
    /// call it from the writer's thread, between commits.
    ///
    /// # Errors
    /// [`StoreError::Database`] if the compaction failed: what was stored is
    /// still there, and its copy removed (or, if the relaxed log could not be
    /// made durable before the finish, kept for the next try).
    pub fn compact(&self) -> Result<Compacted, StoreError> {
        loop {
            let mut job = self.job.lock();
            self.begin_under(&mut job)?;
            let ready = job.as_ref().map_or(Ok(()), Job::wait_ready);
            if let Err(error) = ready {
                self.give_up(job.take(), "it failed");
                return Err(error);
            }
            drop(job);
            if let Some(done) = self.finish_ready()? {
                return Ok(done);
            }
        }
    }

    /// Begins a compaction now, whatever the file's size, unless one is
    /// under way: [`compact_if_due`](Store::compact_if_due) works it (for a
    /// [`stepped`](RedbStore::stepped) store) and finishes it.
    ///
    /// # Errors
    /// [`StoreError::Database`] if its copy cannot be made.
    pub fn begin_compaction(&self) -> Result<(), StoreError> {
        self.begin_under(&mut self.job.lock())
    }

    /// Begins a compaction in `job` (the job's lock held) unless one is there.
    fn begin_under(&self, job: &mut Option<Job>) -> Result<(), StoreError> {
        if job.is_none() {
            *job = Some(self.start_job()?);
        }
        Ok(())
    }

    /// A compaction's job: a snapshot of the store, and an empty copy
    /// beside it. Under the job's lock, so between two commits.
    fn start_job(&self) -> Result<Job, StoreError> {
        // A copy given up must be gone before a new one takes its name.
        Self::wait(&self.giving_up);
        let before = (self.file_bytes()?, self.live_bytes().unwrap_or(0));
        let main = self.with_db(|db| Ok(db.clone()))?;
        let copy_error = |error: std::io::Error| {
            StoreError::Database(Failure::new(
                format!("cannot make a compaction's copy beside {}", self.path().display()),
                error,
            ))
        };
        self.files.remove_copy().map_err(copy_error)?;
        let copy = open(&*self.files, StoreFile::Copy, false)?;
        Job::begin(main, copy, !self.stepped, before)
    }

    /// Gives a compaction up: `job` (if it was begun) is closed and its copy
    /// removed off the writer, and the next is not begun before
    /// [`COMPACT_RETRY_PAUSE`].
    fn give_up(&self, job: Option<Job>, why: &str) {
        *self.retry_at.lock() = Some(std::time::Instant::now() + COMPACT_RETRY_PAUSE);
        tracing::warn!(why, "gave a compaction up; the store holds what it held");
        self.retire(&self.giving_up, move |files| {
            drop(job);
            if let Err(error) = files.remove_copy() {
                tracing::warn!(%error, "cannot remove a compaction's copy: the next compaction or start removes it");
            }
        });
    }

    /// Runs `what` off the writer, after what `slot` ran before: closing a
    /// database (redb's close commits and syncs), removing a copy. If no
    /// thread can be started, what `what` holds is dropped here (a database
    /// closed on the writer) and a copy it would have removed is removed by
    /// the next compaction's begin, or the next start.
    fn retire(
        &self,
        slot: &Mutex<Option<std::thread::JoinHandle<()>>>,
        what: impl FnOnce(&dyn StoreFiles) + Send + 'static,
    ) {
        let mut slot = slot.lock();
        let before = slot.take();
        let files = self.files.clone();
        let spawned = std::thread::Builder::new().name("hourglass-retire".into()).spawn(move || {
            if let Some(before) = before {
                let _ = before.join();
            }
            what(&*files);
        });
        match spawned {
            Ok(thread) => *slot = Some(thread),
            Err(error) => tracing::warn!(%error, "no thread to retire a compaction's leftovers: dropped on the writer"),
        }
    }

    /// Waits for what `slot` runs to be done.
    fn wait(slot: &Mutex<Option<std::thread::JoinHandle<()>>>) {
        let thread = slot.lock().take();
        if let Some(thread) = thread {
            let _ = thread.join();
        }
    }

    /// Finishes the compaction under way, which is ready. The relaxed log
    /// is made durable first, in redb with its next generation, and its lock
    /// held through the finish: the copy then holds every batch the log
    /// held, and the generation that says so. A copy that held some of the
    /// log's batches durably under the log's own generation (committed to
    /// redb without fsync, then copied) would have a replay, after a power
    /// loss kept a shorter prefix of the log, apply that prefix again over
    /// their later changes (the relaxed log's crash simulator found a task
    /// deleted by a later batch come back); and one that held an older
    /// generation than redb's would have a replay leave out the records
    /// written since. If the log cannot be made durable, the compaction
    /// waits for the next ask; if its commit left more dirty rows than the
    /// finish syncs with the writer held, `None`: the worker syncs them first.
    fn finish_ready(&self) -> Result<Option<Compacted>, StoreError> {
        let mut log = self.log.lock();
        if log.undurable() {
            self.commit_log(&mut log, &[], true)?;
        }
        let mut job = self.job.lock();
        let Some(under_way) = job.as_ref() else {
            return Err(StoreError::Database(Failure::msg(
                "the compaction was given up meanwhile (a failed write, or writes that outran it)",
            )));
        };
        // The log's commit marked its rows dirty: the finish waits for the
        // worker if that left more than it syncs with the writer held.
        match under_way.ready() {
            Ok(true) => {}
            Ok(false) => return Ok(None),
            Err(error) => {
                self.give_up(job.take(), "it failed");
                return Err(error);
            }
        }
        let ready = job.take().expect("a compaction under way");
        self.finish_compaction(ready).map(Some)
    }

    /// Finishes `job` on the writer: the last dirty keys and a durable
    /// commit of the copy, which then takes the store's place.
    fn finish_compaction(&self, mut job: Job) -> Result<Compacted, StoreError> {
        let (before_bytes, live_bytes) = (job.before_bytes, job.live_bytes);
        let (copy, finish_keys) = match job.finish() {
            Ok(finished) => finished,
            Err(error) => {
                self.give_up(Some(job), "its finish failed");
                return Err(error);
            }
        };
        let promotion = self.files.promote_copy();
        let unsynced = match promotion {
            Promotion::Done => None,
            Promotion::Unsynced(error) => Some(error),
            Promotion::Failed(error) => {
                drop(copy);
                self.give_up(Some(job), "its copy could not be put in place");
                return Err(StoreError::Database(Failure::new(
                    format!("cannot put a compaction's copy in place of {}", self.path().display()),
                    error,
                )));
            }
        };
        // Owed before the copy serves a single write.
        if unsynced.is_some() {
            self.promotion_owed.store(true, Ordering::Release);
        }
        // The copy is the store's file now: every write goes to it.
        let old = self.db.write().replace(copy);
        // The job's thread is stopped and its copy is the store's: dropping
        // it drops only references. The old database is closed off the
        // writer, once no snapshot reads it; a stepped store closes it here
        // if none does, so that its disk sees the same operations in the
        // same order on every run.
        drop(job);
        let old = match old {
            Some(old) if self.stepped => match Arc::try_unwrap(old) {
                Ok(unread) => {
                    drop(unread);
                    None
                }
                Err(still_read) => Some(still_read),
            },
            old => old,
        };
        if let Some(mut old) = old {
            self.retire(&self.closing, move |_| loop {
                match Arc::try_unwrap(old) {
                    Ok(old) => return drop(old),
                    Err(still_read) => old = still_read,
                }
                std::thread::sleep(std::time::Duration::from_millis(1));
            });
        }
        // Judged against the live bytes now: they may have moved while it ran.
        let after_bytes = self.file_bytes().unwrap_or(0);
        let live_now = self.live_bytes().unwrap_or(live_bytes);
        *self.last_compaction.lock() = Some(Compaction { after_bytes, live_bytes: live_now });
        if let Some(error) = unsynced {
            return Err(StoreError::Database(Failure::new(
                format!("the compaction's copy is in place of {}, but not durably yet", self.path().display()),
                error,
            )));
        }
        Ok(Compacted { before_bytes, after_bytes, live_bytes, finish_keys })
    }

    /// Pays a promotion still owed: before any write is made durable.
    fn pay_promotion(&self) -> Result<(), StoreError> {
        if self.promotion_owed.load(Ordering::Acquire) {
            self.files.sync_promotion().map_err(|error| {
                StoreError::Database(Failure::new(
                    format!("cannot make the compaction of {} durable", self.path().display()),
                    error,
                ))
            })?;
            self.promotion_owed.store(false, Ordering::Release);
        }
        Ok(())
    }

    /// Runs `f` on the database; an error if it is being reopened.
    fn with_db<R>(&self, f: impl FnOnce(&Arc<Database>) -> Result<R, StoreError>) -> Result<R, StoreError> {
        match &*self.db.read() {
            Some(db) => f(db),
            None => Err(self.reopening()),
        }
    }

    fn reopening(&self) -> StoreError {
        StoreError::Database(Failure::msg(format!("{} is being reopened after a failed write", self.path().display())))
    }

    /// After a failed write redb refuses everything until reopened: drops the
    /// database and opens it again (redb repairs and verifies it, as after a
    /// crash). Fails while a snapshot still holds the old one; the next write
    /// tries again. A compaction under way is given up first: it reads the
    /// old one.
    fn reopen(&self, job: &mut Option<Job>) -> Result<(), StoreError> {
        if job.is_some() {
            self.give_up(job.take(), "a write failed");
        }
        // The job read the database through an `Arc` of its own.
        Self::wait(&self.giving_up);
        let mut db = self.db.write();
        self.reopens.fetch_add(1, Ordering::AcqRel);
        drop(db.take());
        *db = Some(Arc::new(open(&*self.files, StoreFile::Main, false)?));
        tracing::info!(path = %self.path().display(), "reopened the store after a failed write");
        Ok(())
    }

    /// Bytes of live data (bodies, states, payloads and their B-tree pages),
    /// as redb counts them; the file is larger by what redb has allocated
    /// ahead.
    ///
    /// # Errors
    /// [`StoreError::Database`].
    pub fn stored_bytes(&self) -> Result<u64, StoreError> {
        self.with_db(|db| {
            let txn = db.begin_write().map_err(db_error)?;
            let stats = txn.stats().map_err(db_error)?;
            txn.abort().map_err(db_error)?;
            Ok(stats.stored_bytes() + stats.metadata_bytes())
        })
    }

    /// Commits `batch` to redb: durably if `durable`, storing the relaxed
    /// log's `generation` if given: what the log holds, and the durable
    /// batch after it ([`commit_log`](RedbStore::commit_log)).
    fn apply_now(&self, batch: &[Mutation], durable: bool, generation: Option<u64>) -> Result<(), StoreError> {
        let mut job = self.job.lock();
        self.pay_promotion()?;
        if self.failed_io.load(Ordering::Acquire) {
            self.reopen(&mut job)?;
            self.failed_io.store(false, Ordering::Release);
        }
        let mut delta = None;
        let error = match self.with_db(|db| Ok(Self::try_apply(db, batch, durable, &mut delta, generation))) {
            Ok(Ok(())) => {
                self.add_live(delta.unwrap_or(0));
                if job.as_ref().is_some_and(|job| !job.mark(batch, generation.is_some())) {
                    self.give_up(job.take(), "writes outran it: too many keys changed since it began");
                }
                return Ok(());
            }
            Ok(Err(error)) => error,
            Err(reopening) => return Err(reopening),
        };
        if !matches!(error, redb::Error::Io(_) | redb::Error::PreviousIo) {
            return Err(db_error(error));
        }
        // redb may fail a commit on I/O after its pages and header reached
        // the file. Reopen now and read the batch back, so that the answer
        // is what the disk holds, not a guess.
        self.failed_io.store(true, Ordering::Release);
        for _ in 0..REOPEN_TRIES {
            if self.reopen(&mut job).is_ok() {
                self.failed_io.store(false, Ordering::Release);
                if self.with_db(|db| landed(db, batch)).unwrap_or(false) {
                    tracing::warn!(%error, "a commit reported failing but reached the disk: it counts as done");
                    // It failed in its commit, after every change was counted.
                    match delta {
                        Some(delta) => self.add_live(delta),
                        None => self.live.store(LIVE_UNKNOWN, Ordering::Release),
                    }
                    return Ok(());
                }
                break;
            }
            // A snapshot still holds the old database; they last microseconds.
            std::thread::sleep(REOPEN_PAUSE);
        }
        Err(db_error(error))
    }

    /// The relaxed log's generation redb holds (0 before the first).
    fn stored_generation(&self) -> Result<u64, StoreError> {
        self.with_db(|db| stored_generation(db))
    }

    /// Makes every batch the log holds durable in redb; whether it held any.
    fn commit_logged(&self) -> Result<bool, StoreError> {
        let mut log = self.log.lock();
        if !log.undurable() {
            return Ok(false);
        }
        self.commit_log(&mut log, &[], true)?;
        Ok(true)
    }

    /// Commits every batch `log` holds that redb does not, then `batch`, in
    /// one transaction: durably if `durable`, with the log's next generation
    /// if it holds any, after which it starts again. If the commit fails,
    /// what the log held waits again.
    ///
    /// If redb was opened again meanwhile (a failed write), it dropped its
    /// commits without fsync: a durable commit landed if redb holds its
    /// generation, and otherwise every batch of the log waits again, read
    /// back from the file (now, or before the next commit takes them if the
    /// file cannot be read now). If redb's generation cannot be read, the
    /// log takes no append until a durable commit lands.
    fn commit_log(&self, log: &mut RelaxedLog, batch: &[Mutation], durable: bool) -> Result<(), StoreError> {
        let generation = (durable && log.undurable()).then(|| log.next_generation());
        let reopens = self.reopens.load(Ordering::Acquire);
        let mut all = log.take()?;
        let waiting = all.len();
        all.extend_from_slice(batch);
        let result = self.apply_now(&all, durable, generation);
        if self.reopens.load(Ordering::Acquire) != reopens {
            let stored = generation.map(|_| self.stored_generation());
            if let (Some(generation), Some(Ok(stored))) = (generation, &stored) {
                if *stored == generation {
                    log.committed(generation);
                    return Ok(());
                }
            }
            log.redb_dropped(matches!(stored, Some(Err(_))));
            // Owed until it succeeds: the next commit reads the file first.
            // Its failure is not this commit's, which may have landed.
            if let Err(error) = log.reload() {
                tracing::warn!(%error, "cannot read the relaxed log back yet: the next commit reads it first");
            }
            return match (result, stored) {
                (_, Some(Err(error))) => Err(error),
                (Ok(()), Some(_)) => Err(StoreError::Database(Failure::msg(
                    "a durable commit of the relaxed log did not land: its batches wait again",
                ))),
                (result, _) => result,
            };
        }
        match result {
            Ok(()) => {
                match generation {
                    Some(generation) => log.committed(generation),
                    None => log.applied(),
                }
                Ok(())
            }
            Err(error) => {
                all.truncate(waiting);
                log.put_back(all);
                Err(error)
            }
        }
    }

    /// Applies `batch` in one transaction, with the relaxed log's
    /// `generation` if given; sets `delta` to what it changes the live
    /// estimate by once all of it is written, before the commit.
    fn try_apply(
        db: &Database,
        batch: &[Mutation],
        durable: bool,
        delta: &mut Option<i64>,
        generation: Option<u64>,
    ) -> Result<(), redb::Error> {
        let mut live = 0i64;
        let mut txn = db.begin_write()?;
        txn.set_durability(if durable { Durability::Immediate } else { Durability::None })?;
        {
            let mut table = txn.open_table(TASKS)?;
            let mut states = txn.open_table(STATES)?;
            // Opened only by a transaction that touches a payload kept apart:
            // opened by every one, it raised lateness p99 at 10 k tasks/s
            // from a median 2.3 ms to 7.5 ms (BENCHMARKS.md, "Payloads on disk").
            let mut payloads = None;
            let mut next_id = None;
            for mutation in batch {
                match mutation {
                    Mutation::Insert { task, payload } => {
                        let body = record::encode(task, payload);
                        live += entry_bytes(body.len()) - gone(table.insert(task.id, body.as_slice())?);
                        if record::apart(payload.len()) {
                            let payload = record::encode_payload(payload);
                            let replaced = opened(&mut payloads, &txn)?.insert(task.id, payload.as_slice())?;
                            live += entry_bytes(payload.len()) - gone(replaced);
                        }
                    }
                    Mutation::Update(task) => {
                        let state = record::encode_state(task);
                        live += entry_bytes(state.len()) - gone(states.insert(task.id, state.as_slice())?);
                    }
                    Mutation::Delete(id) => {
                        let body = table.remove(*id)?;
                        let apart = body.as_ref().is_some_and(|body| record::keeps_payload_apart(body.value()));
                        live -= gone(body);
                        live -= gone(states.remove(*id)?);
                        if apart {
                            live -= gone(opened(&mut payloads, &txn)?.remove(*id)?);
                        }
                    }
                    Mutation::NextId(id) => next_id = next_id.max(Some(*id)),
                    Mutation::PutSchedule(schedule) => {
                        let mut schedules = txn.open_table(SCHEDULES)?;
                        schedules.insert(&*schedule.name, schedule_record::encode(schedule).as_slice())?;
                    }
                    Mutation::DeleteSchedule(name) => {
                        txn.open_table(SCHEDULES)?.remove(&**name)?;
                    }
                    Mutation::PauseQueue { queue, paused, until_ms } => {
                        if *paused {
                            txn.open_table(PAUSED)?.insert(&**queue, 1)?;
                        } else {
                            txn.open_table(PAUSED)?.remove(&**queue)?;
                        }
                        let mut ends = txn.open_table(PAUSE_ENDS)?;
                        match until_ms {
                            Some(until_ms) if *paused => ends.insert(&**queue, until_ms)?,
                            _ => ends.remove(&**queue)?,
                        };
                    }
                    Mutation::PutSettings { queue, settings } => {
                        let mut table = txn.open_table(SETTINGS)?;
                        if *settings == QueueSettings::default() {
                            table.remove(&**queue)?;
                        } else {
                            table.insert(&**queue, settings_record::encode(settings).as_slice())?;
                        }
                    }
                }
            }
            if let Some(next_id) = next_id {
                let mut meta = txn.open_table(META)?;
                let stored = meta.get(NEXT_ID)?.map_or(0, |value| value.value());
                meta.insert(NEXT_ID, next_id.max(stored))?;
            }
            if let Some(generation) = generation {
                txn.open_table(META)?.insert(LOG_GENERATION, generation)?;
            }
        }
        *delta = Some(live);
        Ok(txn.commit()?)
    }
}

impl Store for RedbStore {
    fn load(&self, visit: &mut dyn FnMut(Task, Loaded)) -> Result<u64, StoreError> {
        let txn = self.with_db(|db| db.begin_read().map_err(db_error))?;
        let table = txn.open_table(TASKS).map_err(db_error)?;
        let states = txn.open_table(STATES).map_err(db_error)?;
        // Both tables are in id order: walk them side by side. The live
        // bytes are counted on the way (a payload kept apart from its size).
        let mut live = 0i64;
        let mut states = states.iter().map_err(db_error)?.peekable();
        for item in table.iter().map_err(db_error)? {
            let (id, bytes) = item.map_err(db_error)?;
            let id = id.value();
            live += entry_bytes(bytes.value().len());
            let corrupt = |reason| StoreError::Corrupt { id, reason };
            let (mut task, payload) = record::decode(id, bytes.value()).map_err(corrupt)?;
            while let Some(entry) = states.next_if(|entry| entry.as_ref().is_ok_and(|(key, _)| key.value() <= id)) {
                let (key, bytes) = entry.map_err(db_error)?;
                live += entry_bytes(bytes.value().len());
                if key.value() == id {
                    record::apply_state(&mut task, bytes.value()).map_err(corrupt)?;
                }
            }
            let payload = match payload {
                PayloadIn::Body(payload) => Loaded::of(payload),
                PayloadIn::Apart(bytes) => {
                    live += entry_bytes(record::stored_payload_bytes(bytes));
                    Loaded::Apart(bytes)
                }
            };
            visit(task, payload);
        }
        for entry in states {
            live += entry_bytes(entry.map_err(db_error)?.1.value().len());
        }
        self.live.store(live as u64, Ordering::Release);
        let meta = txn.open_table(META).map_err(db_error)?;
        let next_id = meta.get(NEXT_ID).map_err(db_error)?.map_or(0, |value| value.value());
        Ok(next_id)
    }

    fn load_schedules(&self) -> Result<Vec<Schedule>, StoreError> {
        let txn = self.with_db(|db| db.begin_read().map_err(db_error))?;
        // A store from before schedules has none.
        let Some(table) = added_later(&txn, SCHEDULES)? else { return Ok(Vec::new()) };
        let mut schedules = Vec::new();
        for item in table.iter().map_err(db_error)? {
            let (name, bytes) = item.map_err(db_error)?;
            let name = name.value();
            let schedule = schedule_record::decode(name, bytes.value())
                .map_err(|reason| StoreError::CorruptSchedule { name: name.to_owned(), reason })?;
            schedules.push(schedule);
        }
        Ok(schedules)
    }

    fn load_paused(&self) -> Result<Vec<PausedQueue>, StoreError> {
        let txn = self.with_db(|db| db.begin_read().map_err(db_error))?;
        // A store from before queues could be paused has none paused, and
        // one from before pauses could end, no ends.
        let Some(table) = added_later(&txn, PAUSED)? else { return Ok(Vec::new()) };
        let ends = added_later(&txn, PAUSE_ENDS)?;
        let mut paused = Vec::new();
        for item in table.iter().map_err(db_error)? {
            let name = item.map_err(db_error)?.0;
            let until_ms = match &ends {
                Some(ends) => ends.get(name.value()).map_err(db_error)?.map(|until| until.value()),
                None => None,
            };
            paused.push((name.value().into(), until_ms));
        }
        Ok(paused)
    }

    fn load_settings(&self) -> Result<Vec<(Box<str>, QueueSettings)>, StoreError> {
        let txn = self.with_db(|db| db.begin_read().map_err(db_error))?;
        // A store from before queues had settings has none.
        let Some(table) = added_later(&txn, SETTINGS)? else { return Ok(Vec::new()) };
        let mut all = Vec::new();
        for item in table.iter().map_err(db_error)? {
            let (queue, bytes) = item.map_err(db_error)?;
            let queue = queue.value();
            let settings = settings_record::decode(bytes.value())
                .map_err(|reason| StoreError::CorruptSettings { queue: queue.to_owned(), reason })?;
            all.push((queue.into(), settings));
        }
        Ok(all)
    }

    fn apply(&self, batch: &[Mutation], durable: bool) -> Result<(), StoreError> {
        let mut log = self.log.lock();
        if durable {
            return self.commit_log(&mut log, batch, true);
        }
        // What the log gathered goes first, so that a batch refused here
        // leaves no trace in it.
        if log.full() {
            self.commit_log(&mut log, &[], true)?;
        } else if log.apply_due() {
            self.commit_log(&mut log, &[], false)?;
        }
        log.append(batch)
    }

    fn sync(&self) -> Result<(), StoreError> {
        if self.commit_logged()? {
            return Ok(());
        }
        self.pay_promotion()?;
        // An empty durable commit makes every earlier non-durable one durable.
        self.with_db(|db| {
            let mut txn = db.begin_write().map_err(db_error)?;
            txn.set_durability(Durability::Immediate).map_err(db_error)?;
            txn.commit().map_err(db_error)
        })
    }

    fn snapshot(&self) -> Result<Box<dyn Snapshot>, StoreError> {
        // Taken under the engine's lock: never wait for a reopen, which may
        // take a while (redb verifies the file). A compaction's copy taking
        // the store's place is waited for: it swaps one pointer.
        // Before the read transaction: a payload kept apart that the log
        // holds now is in this map, and one it held before had been
        // committed by then, so the transaction sees it. (The other way
        // round, a commit and the map's reset could both fall between them.)
        let apart = self.apart.lock().clone();
        let Some(db) = self.db.try_read_for(SWAP_WAIT_MAX) else { return Err(self.reopening()) };
        let db = db.as_ref().ok_or_else(|| self.reopening())?.clone();
        let txn = db.begin_read().map_err(db_error)?;
        Ok(Box::new(RedbSnapshot { tables: None, txn, apart, _db: db }))
    }

    fn compact_if_due(&self) -> Result<Option<Compacted>, StoreError> {
        let mut job = self.job.lock();
        let Some(under_way) = job.as_ref() else {
            let live = self.live.load(Ordering::Acquire);
            let paused = self.retry_at.lock().is_some_and(|at| std::time::Instant::now() < at);
            if !paused && Compaction::due(*self.last_compaction.lock(), self.file_bytes()?, live) {
                match self.start_job() {
                    Ok(begun) => *job = Some(begun),
                    Err(error) => {
                        self.give_up(None, "it could not begin");
                        return Err(error);
                    }
                }
            }
            return Ok(None);
        };
        let ready = match self.stepped {
            true => under_way.step().and_then(|_| under_way.ready()),
            false => under_way.ready(),
        };
        match ready {
            Ok(false) => Ok(None),
            Ok(true) => {
                // The log's lock is taken before the job's, as a write takes them.
                drop(job);
                self.finish_ready()
            }
            Err(error) => {
                self.give_up(job.take(), "it failed");
                Err(error)
            }
        }
    }

    fn compacting(&self) -> bool {
        self.job.lock().is_some()
    }
}

impl Drop for RedbStore {
    /// A compaction under way is given up (its copy removed), and the copies
    /// given up are waited for, so that the directory holds the store's file
    /// alone once this returns. An old file still read by a snapshot is
    /// closed when the snapshot is dropped: it is no longer in the directory.
    fn drop(&mut self) {
        if let Some(job) = self.job.get_mut().take() {
            drop(job);
            let _ = self.files.remove_copy();
        }
        Self::wait(&self.giving_up);
    }
}

/// How long a snapshot waits for the lock that a compaction's swap (a
/// pointer's write) or a reopen (redb's repair: far longer) holds.
const SWAP_WAIT_MAX: std::time::Duration = std::time::Duration::from_millis(1);

/// Tries to reopen the database after a failed commit, to learn what became
/// of it, and the pause between tries (while a snapshot holds the old one).
const REOPEN_TRIES: usize = 100;
const REOPEN_PAUSE: std::time::Duration = std::time::Duration::from_millis(10);

/// A table that stores written by earlier versions lack: `None` there.
fn added_later<K: redb::Key + 'static, V: redb::Value + 'static>(
    txn: &ReadTransaction,
    table: TableDefinition<'_, K, V>,
) -> Result<Option<ReadOnlyTable<K, V>>, StoreError> {
    existing(txn, table).map_err(db_error)
}

/// `table` in `txn`, or `None` if it was never made.
fn existing<K: redb::Key + 'static, V: redb::Value + 'static>(
    txn: &ReadTransaction,
    table: TableDefinition<'_, K, V>,
) -> Result<Option<ReadOnlyTable<K, V>>, redb::TableError> {
    match txn.open_table(table) {
        Ok(table) => Ok(Some(table)),
        Err(redb::TableError::TableDoesNotExist(_)) => Ok(None),
        Err(error) => Err(error),
    }
}

/// The payloads table of `txn`, opened at the first call.
fn opened<'s, 'txn>(
    table: &'s mut Option<redb::Table<'txn, u64, &'static [u8]>>,
    txn: &'txn redb::WriteTransaction,
) -> Result<&'s mut redb::Table<'txn, u64, &'static [u8]>, redb::Error> {
    Ok(match table {
        Some(table) => table,
        None => table.insert(txn.open_table(PAYLOADS)?),
    })
}

/// A table of bytes by task id, read-only.
type ByIdTable = ReadOnlyTable<u64, &'static [u8]>;

/// A read transaction; its tables (payloads, then bodies) are opened at the
/// first read.
struct RedbSnapshot {
    tables: Option<(ByIdTable, ByIdTable)>,
    txn: ReadTransaction,
    /// The payloads kept apart that the log held, redb not yet.
    apart: Arc<std::collections::HashMap<u64, Arc<Payload>>>,
    /// The database read, kept open while the snapshot is: a compaction may
    /// put another in its place meanwhile.
    _db: Arc<Database>,
}

impl Snapshot for RedbSnapshot {
    fn payload(&mut self, id: u64) -> Result<Payload, StoreError> {
        if let Some(payload) = self.apart.get(&id) {
            return Ok(Payload::clone(payload));
        }
        let (payloads, tasks) = match &mut self.tables {
            Some(tables) => tables,
            None => {
                let payloads = self.txn.open_table(PAYLOADS).map_err(db_error)?;
                let tasks = self.txn.open_table(TASKS).map_err(db_error)?;
                self.tables.insert((payloads, tasks))
            }
        };
        let corrupt = |reason: String| StoreError::Corrupt { id, reason };
        if let Some(bytes) = payloads.get(id).map_err(db_error)? {
            return Ok(record::decode_payload(bytes.value()).map_err(corrupt)?.into());
        }
        // A small payload, or one written before payloads were kept apart.
        let body = tasks.get(id).map_err(db_error)?.ok_or(StoreError::Missing { id })?;
        match record::decode(id, body.value()).map_err(corrupt)?.1 {
            PayloadIn::Body(payload) => Ok(payload.into()),
            PayloadIn::Apart(_) => Err(corrupt("its payload is kept apart but missing".into())),
        }
    }
}

#[cfg(test)]
mod tests;
