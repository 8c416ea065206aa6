//! The embedded store: one redb database file, one table of encoded tasks.
//!
//! redb commits atomically with checksummed pages and two commit slots, so a
//! `kill -9` at any moment leaves either the previous or the new commit, never
//! a torn one; freed pages are reused, so the file stays bounded by the live
//! tasks. It is opened with an integrity check, so a file damaged outside redb
//! fails to open with a clear error instead of being trusted.

use std::path::{Path, PathBuf};

use redb::{Database, Durability, ReadableDatabase, ReadableTable, TableDefinition};

use super::record;
use super::{Mutation, Store};
use crate::error::StoreError;
use crate::model::Task;

/// Task id to the task's body and payload, written once (see [`record`]).
const TASKS: TableDefinition<'_, u64, &[u8]> = TableDefinition::new("tasks");
/// Task id to what changed since (due time, attempts, dead), for tasks that
/// changed: a change rewrites these 12 bytes, never the body.
const STATES: TableDefinition<'_, u64, &[u8]> = TableDefinition::new("states");
/// Counters that outlive tasks; one for now, `next_id`.
const META: TableDefinition<'_, &str, u64> = TableDefinition::new("meta");
const NEXT_ID: &str = "next_id";
/// The database's file name inside the data directory.
pub const FILE_NAME: &str = "tasks.redb";
/// redb's page cache. The engine keeps every task in memory and only writes
/// (and reads at start), so a large cache would only hold pages it never
/// reads again: redb's 1 GiB default cost 140 bytes per task after a start.
const CACHE_BYTES: usize = 32 << 20;

/// Tasks in a redb database in a data directory.
pub struct RedbStore {
    db: Database,
    path: PathBuf,
}

fn db_error(error: impl std::fmt::Display) -> StoreError {
    StoreError::Database(error.to_string())
}

impl RedbStore {
    /// Opens (or creates) the store in directory `dir`, checking the integrity
    /// of an existing file.
    ///
    /// # Errors
    /// [`StoreError::Database`] if the directory cannot be made or the file is
    /// damaged, with the path in the message.
    pub fn open(dir: &Path) -> Result<RedbStore, StoreError> {
        std::fs::create_dir_all(dir).map_err(|error| {
            StoreError::Database(format!("cannot create data directory {}: {error}", dir.display()))
        })?;
        let path = dir.join(FILE_NAME);
        let db = Database::builder()
            .set_cache_size(CACHE_BYTES)
            .set_check_integrity_on_open(true)
            .create(&path)
            .map_err(|error| StoreError::Database(format!("cannot open {}: {error}", path.display())))?;
        let txn = db.begin_write().map_err(db_error)?;
        txn.open_table(TASKS).map_err(db_error)?;
        txn.open_table(STATES).map_err(db_error)?;
        txn.open_table(META).map_err(db_error)?;
        txn.commit().map_err(db_error)?;
        Ok(RedbStore { db, path })
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Bytes of live data (bodies, states and their B-tree pages), as redb
    /// counts them; the file is larger by what redb has allocated ahead.
    ///
    /// # Errors
    /// [`StoreError::Database`].
    pub fn stored_bytes(&self) -> Result<u64, StoreError> {
        let txn = self.db.begin_write().map_err(db_error)?;
        let stats = txn.stats().map_err(db_error)?;
        txn.abort().map_err(db_error)?;
        Ok(stats.stored_bytes() + stats.metadata_bytes())
    }
}

impl Store for RedbStore {
    fn load(&self, visit: &mut dyn FnMut(Task, Box<str>)) -> Result<u64, StoreError> {
        let txn = self.db.begin_read().map_err(db_error)?;
        let table = txn.open_table(TASKS).map_err(db_error)?;
        let states = txn.open_table(STATES).map_err(db_error)?;
        // Both tables are in id order: walk them side by side.
        let mut states = states.iter().map_err(db_error)?.peekable();
        for item in table.iter().map_err(db_error)? {
            let (id, bytes) = item.map_err(db_error)?;
            let id = id.value();
            let corrupt = |reason| StoreError::Corrupt { id, reason };
            let (mut task, payload) = record::decode(id, bytes.value()).map_err(corrupt)?;
            while let Some(entry) = states.next_if(|entry| entry.as_ref().is_ok_and(|(key, _)| key.value() <= id)) {
                let (key, bytes) = entry.map_err(db_error)?;
                if key.value() == id {
                    record::apply_state(&mut task, bytes.value()).map_err(corrupt)?;
                }
            }
            visit(task, payload);
        }
        let meta = txn.open_table(META).map_err(db_error)?;
        let next_id = meta.get(NEXT_ID).map_err(db_error)?.map_or(0, |value| value.value());
        Ok(next_id)
    }

    fn apply(&self, batch: &[Mutation], durable: bool) -> Result<(), StoreError> {
        let mut txn = self.db.begin_write().map_err(db_error)?;
        txn.set_durability(if durable { Durability::Immediate } else { Durability::None }).map_err(db_error)?;
        {
            let mut table = txn.open_table(TASKS).map_err(db_error)?;
            let mut states = txn.open_table(STATES).map_err(db_error)?;
            let mut next_id = None;
            for mutation in batch {
                match mutation {
                    Mutation::Insert { task, payload } => {
                        table.insert(task.id, record::encode(task, payload).as_slice()).map_err(db_error)?;
                    }
                    Mutation::Update(task) => {
                        states.insert(task.id, record::encode_state(task).as_slice()).map_err(db_error)?;
                    }
                    Mutation::Delete(id) => {
                        table.remove(*id).map_err(db_error)?;
                        states.remove(*id).map_err(db_error)?;
                    }
                    Mutation::NextId(id) => next_id = next_id.max(Some(*id)),
                }
            }
            if let Some(next_id) = next_id {
                let mut meta = txn.open_table(META).map_err(db_error)?;
                let stored = meta.get(NEXT_ID).map_err(db_error)?.map_or(0, |value| value.value());
                meta.insert(NEXT_ID, next_id.max(stored)).map_err(db_error)?;
            }
        }
        txn.commit().map_err(db_error)
    }

    fn sync(&self) -> Result<(), StoreError> {
        // An empty durable commit makes every earlier non-durable one durable.
        let mut txn = self.db.begin_write().map_err(db_error)?;
        txn.set_durability(Durability::Immediate).map_err(db_error)?;
        txn.commit().map_err(db_error)
    }
}
