//! Whether a commit that redb reported failing reached the disk anyway:
//! read back after the store opened redb again, so that the answer to a
//! write is what the disk holds, not a guess.

use std::collections::HashMap;

use redb::{Database, ReadOnlyTable, ReadableDatabase};

use super::super::interface::Mutation;
use super::super::{record, schedule_record, settings_record};
use super::{added_later, db_error, META, NEXT_ID, PAUSED, PAUSE_ENDS, SCHEDULES, SETTINGS, STATES, TASKS};
use crate::store::error::StoreError;
use hourglass_queue::QueueSettings;

/// Whether `batch`, whose commit was reported failing, is in the database
/// anyway. A batch lands whole or not at all: it landed if the database
/// holds what the batch leaves in every key it touches, its last word on
/// each (a batch of the group commit may change one task many times: claimed,
/// then acked). A batch that leaves everything as it was cannot tell, and
/// counts as landed: the database is as the batch would have left it.
pub(super) fn landed(db: &Database, batch: &[Mutation]) -> Result<bool, StoreError> {
    let left = Left::of(batch);
    let txn = db.begin_read().map_err(db_error)?;
    let tasks = txn.open_table(TASKS).map_err(db_error)?;
    let states = txn.open_table(STATES).map_err(db_error)?;
    let meta = txn.open_table(META).map_err(db_error)?;
    let holds = |stored: Option<redb::AccessGuard<'_, &'static [u8]>>, expected: &Option<Vec<u8>>| {
        stored.map(|bytes| bytes.value().to_vec()) == *expected
    };
    for (id, body) in &left.bodies {
        if !holds(tasks.get(id).map_err(db_error)?, body) {
            return Ok(false);
        }
    }
    for (id, state) in &left.states {
        if !holds(states.get(id).map_err(db_error)?, state) {
            return Ok(false);
        }
    }
    if let Some(next_id) = left.next_id {
        if meta.get(NEXT_ID).map_err(db_error)?.map_or(0, |value| value.value()) < next_id {
            return Ok(false);
        }
    }
    if !left.schedules.is_empty() && !holds_named(added_later(&txn, SCHEDULES)?, &left.schedules)? {
        return Ok(false);
    }
    if !left.pauses.is_empty() {
        let (paused, ends) = (added_later(&txn, PAUSED)?, added_later(&txn, PAUSE_ENDS)?);
        for (queue, (pause, until_ms)) in &left.pauses {
            let stored = match &paused {
                Some(table) => table.get(*queue).map_err(db_error)?.is_some(),
                None => false,
            };
            let end = match &ends {
                Some(table) => table.get(*queue).map_err(db_error)?.map(|until| until.value()),
                None => None,
            };
            // An unpause, or a pause with no end, removes the end.
            if stored != *pause || end != until_ms.filter(|_| *pause) {
                return Ok(false);
            }
        }
    }
    if !left.settings.is_empty() && !holds_named(added_later(&txn, SETTINGS)?, &left.settings)? {
        return Ok(false);
    }
    Ok(true)
}

/// Whether `table` (`None`: not in the store yet) holds `expected`'s rows:
/// each name's bytes, or none.
fn holds_named(
    table: Option<ReadOnlyTable<&'static str, &'static [u8]>>,
    expected: &HashMap<&str, Option<Vec<u8>>>,
) -> Result<bool, StoreError> {
    for (name, bytes) in expected {
        let stored = match &table {
            Some(table) => table.get(*name).map_err(db_error)?.map(|stored| stored.value().to_vec()),
            None => None,
        };
        if stored != *bytes {
            return Ok(false);
        }
    }
    Ok(true)
}

/// What a batch leaves in each key it touches, as stored: its last word on
/// each (`None` for a key it removes).
#[derive(Default)]
struct Left<'a> {
    bodies: HashMap<u64, Option<Vec<u8>>>,
    states: HashMap<u64, Option<Vec<u8>>>,
    next_id: Option<u64>,
    schedules: HashMap<&'a str, Option<Vec<u8>>>,
    pauses: HashMap<&'a str, (bool, Option<u64>)>,
    settings: HashMap<&'a str, Option<Vec<u8>>>,
}

impl<'a> Left<'a> {
    /// What `batch` leaves, as [`RedbStore::try_apply`] writes it.
    fn of(batch: &'a [Mutation]) -> Left<'a> {
        let mut left = Left::default();
        for mutation in batch {
            match mutation {
                Mutation::Insert { task, payload } => {
                    left.bodies.insert(task.id, Some(record::encode(task, payload)));
                }
                Mutation::Update(task) => {
                    left.states.insert(task.id, Some(record::encode_state(task)));
                }
                Mutation::Delete(id) => {
                    left.bodies.insert(*id, None);
                    left.states.insert(*id, None);
                }
                Mutation::NextId(id) => left.next_id = left.next_id.max(Some(*id)),
                Mutation::PutSchedule(schedule) => {
                    left.schedules.insert(&schedule.name, Some(schedule_record::encode(schedule)));
                }
                Mutation::DeleteSchedule(name) => {
                    left.schedules.insert(name, None);
                }
                Mutation::PauseQueue { queue, paused, until_ms } => {
                    left.pauses.insert(queue, (*paused, *until_ms));
                }
                Mutation::PutSettings { queue, settings } => {
                    let stored = (*settings != QueueSettings::default()).then(|| settings_record::encode(settings));
                    left.settings.insert(queue, stored);
                }
            }
        }
        left
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::task;
    use super::super::{RedbStore, Store};
    use super::*;

    fn landed_in(store: &RedbStore, batch: &[Mutation]) -> bool {
        store.with_db(|db| landed(db, batch)).unwrap()
    }

    /// A batch of the group commit that changes one task several times
    /// (rescheduled, then claimed, then acked): before it, it has not
    /// landed, whichever of its changes is read; after it, it has, though
    /// none of its updates is there to read.
    #[test]
    fn a_batch_that_changes_one_task_twice_is_read_back_by_its_last_word() {
        let dir = tempfile::tempdir().unwrap();
        let store = RedbStore::open(dir.path()).unwrap();
        let insert = |id| Mutation::Insert { task: task(id, 10), payload: "p".into() };
        store.apply(&[insert(1), insert(2)], true).unwrap();
        let batch = [
            Mutation::Update(task(1, 20)),
            Mutation::Update(task(1, 30)),
            Mutation::Delete(1),
            Mutation::Update(task(2, 40)),
            Mutation::Update(task(2, 50)),
            insert(3),
            Mutation::Delete(3),
        ];
        assert!(!landed_in(&store, &batch), "not applied yet");
        store.apply(&batch, true).unwrap();
        assert!(landed_in(&store, &batch), "applied: its last word on each task is there");
        assert!(!landed_in(&store, &[Mutation::Update(task(2, 40))]), "an update replaced since is not there");
    }
}
