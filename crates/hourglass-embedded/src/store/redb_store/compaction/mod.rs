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
//! | begin | writer, between commits | a read snapshot of the store; the copy created empty; from now on every row a commit changes is marked dirty (`Dirty`) | creating a file |
//! | copy | worker | the snapshot's tables into the copy, [`COPY_STEP_ENTRIES`] (or [`COPY_STEP_BYTES`]) at a time, each step a durable commit of the copy's own | no |
//! | catch up | worker | [`SYNC_STEP_KEYS`] dirty keys (or [`SYNC_STEP_BYTES`] of payloads) at a time: each dirty row's value now in the store written to the copy, or removed from it; a durable commit each | no |
//! | finish | writer, between commits, once at most [`FINISH_DIRTY_MAX`] keys and [`FINISH_DIRTY_BYTES`] are dirty, and again after the relaxed log is made durable | the log's batches committed durably to the store (their rows dirty: if that leaves more than the bounds, the finish waits for the next ask); the worker's step in flight; the last dirty rows and one durable commit of the copy; the copy renamed over the store's file and the directory synced | the log's commit, one worker step, [`FINISH_DIRTY_MAX`] keys, two fsyncs and a rename |
//!
//! The old file is closed, and a copy given up closed and removed, off the
//! writer (redb's close commits and syncs). The worker's commits are
//! durable so that the finish's commit has only its own rows to sync.
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
//! While one runs, the copy adds about the live bytes beside it, and the
//! store's file grows by what is written meanwhile (the snapshot keeps
//! redb from reusing pages freed after it). A compaction given up (its copy
//! could not be written, or writes outran it: more than [`DIRTY_KEYS_MAX`]
//! keys dirty) is tried again [`COMPACT_RETRY_PAUSE`] later, if still due.

mod dirty;
mod job;
mod tables;

pub(super) use job::Job;

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
/// Payload bytes the worker syncs in one step, at most (or one payload, if
/// larger).
pub const SYNC_STEP_BYTES: usize = 4 << 20;
/// The writer finishes a compaction once at most this many keys are dirty:
/// what bounds the keys it syncs itself.
pub const FINISH_DIRTY_MAX: usize = 4_096;
/// ... and at most this many payload bytes (a larger payload is synced by
/// the worker's step first).
pub const FINISH_DIRTY_BYTES: usize = 4 << 20;
/// After a compaction is given up (its copy could not be written, or writes
/// outran it), the next waits this long.
pub const COMPACT_RETRY_PAUSE: std::time::Duration = std::time::Duration::from_secs(60);
/// Dirty keys a compaction may track: past this, writes outrun the worker,
/// and the compaction is given up (its copy removed) rather than hold an
/// unbounded set. About 64 bytes a key. Writes that keep every commit full
/// (8,192 mutations, more than [`FINISH_DIRTY_MAX`]) for long enough get
/// there: the compaction is then tried again after [`COMPACT_RETRY_PAUSE`].
pub const DIRTY_KEYS_MAX: usize = 1 << 20;
/// The live estimate before the start's load has counted it: no compaction.
pub(super) const LIVE_UNKNOWN: u64 = u64::MAX;
const _: () = assert!(FILE_PER_LIVE_MAX >= 2, "a file compacted is at least half free: compaction gives back");
const _: () = assert!(FINISH_DIRTY_MAX <= DIRTY_KEYS_MAX && SYNC_STEP_KEYS <= DIRTY_KEYS_MAX);
const _: () = assert!(
    SYNC_STEP_KEYS >= FINISH_DIRTY_MAX && SYNC_STEP_BYTES >= FINISH_DIRTY_BYTES,
    "a step can always bring the dirty keys within the finish"
);

/// The last compaction: the file's bytes after it and the live bytes then.
/// One that could not bring the file within the bound (its pages fuller
/// than the estimate says) is not run again and again for nothing: the
/// next waits until the file has grown past `FILE_PER_LIVE_MAX` times what
/// it left, or the live bytes fallen below a `FILE_PER_LIVE_MAX`th. One
/// that did is no reason to wait.
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
                let within = last.after_bytes < last.live_bytes.saturating_mul(FILE_PER_LIVE_MAX);
                within
                    || len >= last.after_bytes.saturating_mul(FILE_PER_LIVE_MAX)
                    || live.saturating_mul(FILE_PER_LIVE_MAX) < last.live_bytes
            })
    }
}

#[cfg(test)]
mod tests;
