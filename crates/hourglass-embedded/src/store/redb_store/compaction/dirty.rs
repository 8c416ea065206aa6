//! The rows changed since a compaction's snapshot and not yet synced to its
//! copy ([`Dirty`]), marked by the writer after each commit and taken by
//! the worker a step at a time.

use std::collections::BTreeMap;

use redb::{ReadTransaction, WriteTransaction};

use super::super::{LOG_GENERATION, META, NEXT_ID, PAUSED, PAUSE_ENDS, PAYLOADS, SCHEDULES, SETTINGS, STATES, TASKS};
use super::tables::{sync_table, Table};
use crate::store::interface::Mutation;

/// The rows of a task id that changed: its body (and its payload kept
/// apart, written with it), its state; and the payload bytes an insert
/// brought, what syncing the body costs.
#[derive(Debug, Default, Clone, Copy)]
struct IdRows {
    body: bool,
    state: bool,
    bytes: usize,
}

/// The keys changed since the snapshot and not yet synced, with the rows of
/// each that changed. A [`Mutation`] changes: an insert, a body and its
/// payload; an update, a state; a delete, all three; a schedule, a pause or
/// settings, the rows of a name (every table keyed by a name is synced for
/// it: they are few and small, but a schedule's payload, counted); the next
/// id, and a commit that stores the relaxed log's generation, the meta
/// rows. `bytes` adds up what syncing them all would write, as far as the
/// marks tell (payloads; the records around them are small).
#[derive(Debug, Default)]
pub(crate) struct Dirty {
    ids: BTreeMap<u64, IdRows>,
    names: BTreeMap<Box<str>, usize>,
    meta: bool,
    bytes: usize,
}

impl Dirty {
    /// The keys dirty.
    pub(crate) fn len(&self) -> usize {
        self.ids.len() + self.names.len() + usize::from(self.meta)
    }

    /// The payload bytes syncing them would write.
    pub(crate) fn bytes(&self) -> usize {
        self.bytes
    }

    /// Marks the rows `batch` changed.
    pub(crate) fn mark(&mut self, batch: &[Mutation]) {
        for mutation in batch {
            match mutation {
                Mutation::Insert { task, payload } => {
                    let rows = self.ids.entry(task.id).or_default();
                    rows.body = true;
                    grow(&mut self.bytes, &mut rows.bytes, payload.len());
                }
                Mutation::Update(task) => self.ids.entry(task.id).or_default().state = true,
                Mutation::Delete(id) => {
                    let rows = self.ids.entry(*id).or_default();
                    (rows.body, rows.state) = (true, true);
                }
                Mutation::NextId(_) => self.meta = true,
                Mutation::PutSchedule(schedule) => self.mark_name(&schedule.name, schedule.payload.len()),
                Mutation::DeleteSchedule(name)
                | Mutation::PauseQueue { queue: name, .. }
                | Mutation::PutSettings { queue: name, .. } => self.mark_name(name, 0),
            }
        }
    }

    /// Marks the meta rows: a commit stored the relaxed log's generation.
    pub(crate) fn mark_generation(&mut self) {
        self.meta = true;
    }

    fn mark_name(&mut self, name: &str, bytes: usize) {
        let marked = match self.names.get_mut(name) {
            Some(marked) => marked,
            None => self.names.entry(name.into()).or_default(),
        };
        grow(&mut self.bytes, marked, bytes);
    }

    /// Takes keys out, at least one if any is dirty, until `max_keys` or
    /// `max_bytes` is reached.
    pub(crate) fn take(&mut self, max_keys: usize, max_bytes: usize) -> Dirty {
        let mut taken = Dirty { meta: std::mem::take(&mut self.meta), ..Dirty::default() };
        while taken.len() < max_keys && (taken.bytes < max_bytes || taken.len() == 0) {
            if let Some((id, rows)) = self.ids.pop_first() {
                taken.bytes += rows.bytes;
                taken.ids.insert(id, rows);
            } else if let Some((name, bytes)) = self.names.pop_first() {
                taken.bytes += bytes;
                taken.names.insert(name, bytes);
            } else {
                break;
            }
        }
        self.bytes -= taken.bytes;
        taken
    }

    /// Writes each dirty row's value in `from` to `to`, or removes it there.
    pub(crate) fn sync(&self, from: &ReadTransaction, to: &WriteTransaction) -> Result<(), redb::Error> {
        let bodies = || self.ids.iter().filter(|(_, rows)| rows.body).map(|(id, _)| *id);
        let states = || self.ids.iter().filter(|(_, rows)| rows.state).map(|(id, _)| *id);
        let names = || self.names.keys().map(|name| &**name);
        for table in Table::ALL {
            match table {
                Table::Tasks => sync_table(from, to, TASKS, bodies())?,
                Table::Payloads => sync_table(from, to, PAYLOADS, bodies())?,
                Table::States => sync_table(from, to, STATES, states())?,
                Table::Meta => {
                    sync_table(from, to, META, self.meta.then_some([NEXT_ID, LOG_GENERATION]).into_iter().flatten())?
                }
                Table::Schedules => sync_table(from, to, SCHEDULES, names())?,
                Table::Settings => sync_table(from, to, SETTINGS, names())?,
                Table::Paused => sync_table(from, to, PAUSED, names())?,
                Table::PauseEnds => sync_table(from, to, PAUSE_ENDS, names())?,
            }
        }
        Ok(())
    }
}

/// Raises a key's marked bytes to `bytes`, and the total with it.
fn grow(total: &mut usize, marked: &mut usize, bytes: usize) {
    if bytes > *marked {
        *total += bytes - *marked;
        *marked = bytes;
    }
}
