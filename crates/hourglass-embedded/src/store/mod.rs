//! Durable storage of one node's tasks, behind a trait: the embedded backend
//! writes through it, in order, from one writer thread.

mod commit_stats;
mod committer;
mod error;
mod interface;
mod log_record;
pub(crate) mod record;
mod redb_store;
pub(crate) mod schedule_record;
mod sealed;
mod settings_record;
mod target_record;

pub use committer::Fsync;
pub(crate) use committer::{Committer, Reply, Settler};
pub(crate) use error::to_queue_error;
pub use error::StoreError;
pub use interface::{Compacted, Loaded, Mutation, PausedQueue, Snapshot, Store};
pub(crate) use record::Sizes;
pub use redb_store::{
    Directory, LogFile, Promotion, RedbStore, StoreFile, StoreFiles, APPLY_BYTES, APPLY_MUTATIONS,
    COMPACT_FILE_MIN_BYTES, COMPACT_RETRY_PAUSE, COPY_STEP_BYTES, COPY_STEP_ENTRIES, COPY_SUFFIX, DIRTY_KEYS_MAX,
    FILE_PER_LIVE_MAX, FINISH_DIRTY_BYTES, FINISH_DIRTY_MAX, LOG_BYTES_MAX, LOG_FILE_NAME, SYNC_STEP_BYTES,
    SYNC_STEP_KEYS,
};
pub(crate) use target_record::encoded_bytes as target_bytes;

/// Bytes a task of these sizes takes in the store, as near as can be told
/// without writing it: what the disk budget counts. Its body, its payload,
/// the state record it may get, and its share of redb's B-tree pages
/// ([`ENTRY_OVERHEAD_BYTES`]).
pub(crate) fn footprint(sizes: Sizes) -> u64 {
    let apart = if record::apart(sizes.payload) { sizes.payload } else { 0 };
    (record::body_bytes(sizes) + apart + record::STATE_BYTES) as u64 + ENTRY_OVERHEAD_BYTES
}

/// What redb adds to a task's encoded bytes: its share of B-tree pages,
/// measured as file bytes over encoded bytes (`tests/budgets.rs` prints it).
const ENTRY_OVERHEAD_BYTES: u64 = 64;
