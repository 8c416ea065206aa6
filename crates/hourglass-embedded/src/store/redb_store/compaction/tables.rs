//! The store's tables as a compaction goes through them: one list
//! ([`Table::ALL`]) for the copy of the snapshot and for the sync of dirty
//! keys, each `match` on it exhaustive, so a table added to the store and
//! to this list is copied and synced, or does not compile.

use redb::{ReadTransaction, TableDefinition, WriteTransaction};

use super::super::{existing, META, PAUSED, PAUSE_ENDS, PAYLOADS, SCHEDULES, SETTINGS, STATES, TASKS};
use super::{COPY_STEP_BYTES, COPY_STEP_ENTRIES};

/// Every table of the store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Table {
    Tasks,
    Payloads,
    States,
    Meta,
    Schedules,
    Settings,
    Paused,
    PauseEnds,
}

impl Table {
    pub(crate) const ALL: [Table; 8] = [
        Table::Tasks,
        Table::Payloads,
        Table::States,
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
pub(crate) struct Cursor {
    table: usize,
    from_id: u64,
    from_name: String,
}

impl Cursor {
    /// Copies one step of the snapshot `from` to `to`, from here on;
    /// whether it is all copied.
    pub(crate) fn copy_step(&mut self, from: &ReadTransaction, to: &WriteTransaction) -> Result<bool, redb::Error> {
        let Some(&table) = Table::ALL.get(self.table) else { return Ok(true) };
        let by_id = |id: u64| Resume::Id(id);
        let by_name = |name: &str| Resume::Name(name.to_owned());
        let (id, name) = (self.from_id, self.from_name.as_str());
        let resume = match table {
            Table::Tasks => copy_step(from, to, TASKS, id, by_id)?,
            Table::Payloads => copy_step(from, to, PAYLOADS, id, by_id)?,
            Table::States => copy_step(from, to, STATES, id, by_id)?,
            Table::Meta => copy_step(from, to, META, name, by_name)?,
            Table::Schedules => copy_step(from, to, SCHEDULES, name, by_name)?,
            Table::Settings => copy_step(from, to, SETTINGS, name, by_name)?,
            Table::Paused => copy_step(from, to, PAUSED, name, by_name)?,
            Table::PauseEnds => copy_step(from, to, PAUSE_ENDS, name, by_name)?,
        };
        match resume {
            Some(Resume::Id(id)) => self.from_id = id,
            Some(Resume::Name(name)) => self.from_name = name,
            None => *self = Cursor { table: self.table + 1, ..Cursor::default() },
        }
        Ok(self.table == Table::ALL.len())
    }
}

/// The key a copy step goes on from.
enum Resume {
    Id(u64),
    Name(String),
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

/// Each of `keys`' value in `from`'s `table` written to `to`'s, or removed.
pub(crate) fn sync_table<'k, K: redb::Key + 'static, V: redb::Value + 'static>(
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
