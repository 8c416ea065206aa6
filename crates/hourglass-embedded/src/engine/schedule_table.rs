//! The engine's schedules: each one as stored, whether a change of it is on
//! its way to the store, and a timeline of their next occurrences. (Firing an
//! occurrence, which enqueues its tasks and moves the schedule on in one
//! write, is the state's: see `state/firing.rs`.)
//!
//! A schedule follows the tasks' rules: a change (a put, a delete, a firing)
//! marks it *pending* and takes it off the timeline; requests that would
//! change it wait; reads see the version stored; the change takes effect
//! when the writer settles it. So nobody sees a schedule, or an occurrence's
//! task, that is not durable, and one occurrence is never enqueued twice.

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Bound::{Excluded, Unbounded};

use hourglass_queue::{Schedule, Timetable};

/// A schedule as stored, read.
#[derive(Debug, Clone)]
pub(crate) struct Armed {
    pub(crate) schedule: Schedule,
    pub(crate) timetable: Timetable,
}

struct Entry {
    /// As stored; `None` while its first put is being written.
    current: Option<Armed>,
    /// A change is on its way to the store.
    pending: bool,
    /// Where it is on the timeline, if it is.
    armed_at: Option<u64>,
}

/// Every schedule, by name.
#[derive(Default)]
pub(crate) struct ScheduleTable {
    entries: BTreeMap<Box<str>, Entry>,
    timeline: BTreeSet<(u64, Box<str>)>,
    /// What the memory budget counts for the stored schedules: [`bytes_of`].
    memory_bytes: u64,
}

/// What a stored schedule is charged in memory: the bytes of its text.
pub(crate) fn bytes_of(schedule: &Schedule) -> u64 {
    let rule = match &schedule.rule {
        hourglass_queue::Rule::Cron { expression, time_zone } => expression.len() + time_zone.len(),
        hourglass_queue::Rule::Every { .. } => 0,
    };
    (schedule.name.len() + schedule.queue.len() + schedule.payload.len() + rule) as u64
}

impl ScheduleTable {
    /// Schedules stored, or being put for the first time.
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    /// Schedules stored (a first put still being written is not).
    pub(crate) fn stored(&self) -> usize {
        self.entries.values().filter(|entry| entry.current.is_some()).count()
    }

    pub(crate) fn memory_bytes(&self) -> u64 {
        self.memory_bytes
    }

    /// A schedule loaded from the store at a start.
    pub(crate) fn load(&mut self, armed: Armed) {
        let name = armed.schedule.name.clone();
        self.memory_bytes += bytes_of(&armed.schedule);
        self.entries.insert(name.clone(), Entry { current: Some(armed), pending: false, armed_at: None });
        self.arm(&name, None);
    }

    /// The stored version, pending or not.
    pub(crate) fn get(&self, name: &str) -> Option<&Armed> {
        self.entries.get(name).and_then(|entry| entry.current.as_ref())
    }

    /// Whether a change of the schedule is on its way; `None` if there is no
    /// such schedule, stored or being put.
    pub(crate) fn pending(&self, name: &str) -> Option<bool> {
        self.entries.get(name).map(|entry| entry.pending)
    }

    /// Up to `limit` stored schedules after `after` of the queues `shown`
    /// accepts, by name, and whether more of them follow.
    pub(crate) fn page(&self, after: Option<&str>, limit: usize, shown: &dyn Fn(&str) -> bool) -> (Vec<Armed>, bool) {
        let range = match after {
            Some(after) => self.entries.range::<str, _>((Excluded(after), Unbounded)),
            None => self.entries.range::<str, _>(..),
        };
        let mut stored =
            range.filter_map(|(_, entry)| entry.current.as_ref()).filter(|armed| shown(&armed.schedule.queue));
        let page: Vec<Armed> = stored.by_ref().take(limit).cloned().collect();
        let more = stored.next().is_some();
        (page, more)
    }

    /// When the earliest armed schedule is due.
    pub(crate) fn next_due(&self) -> Option<u64> {
        self.timeline.first().map(|&(at, _)| at)
    }

    /// Marks the schedule pending (making an entry for a new one) and takes
    /// it off the timeline.
    pub(crate) fn hide(&mut self, name: &str) {
        if let Some(at) = self.entries.get(name).and_then(|entry| entry.armed_at) {
            self.timeline.remove(&(at, name.into()));
        }
        if !self.entries.contains_key(name) {
            self.entries.insert(name.into(), Entry { current: None, pending: false, armed_at: None });
        }
        let entry = self.entries.get_mut(name).expect("made above");
        debug_assert!(!entry.pending, "schedule {name} hidden twice");
        entry.pending = true;
        entry.armed_at = None;
    }

    /// Settles a pending schedule: it becomes `stored` (or is gone for
    /// `None`) and is armed at its next occurrence, or at `retry_at` if given.
    pub(crate) fn reveal(&mut self, name: &str, stored: Option<Armed>, retry_at: Option<u64>) {
        let entry = self.entries.get_mut(name).expect("revealing a known schedule");
        debug_assert!(entry.pending, "schedule {name} revealed but not hidden");
        let before = entry.current.as_ref().map_or(0, |armed| bytes_of(&armed.schedule));
        let after = stored.as_ref().map_or(0, |armed| bytes_of(&armed.schedule));
        self.memory_bytes = self.memory_bytes - before + after;
        entry.pending = false;
        entry.current = stored;
        if entry.current.is_none() {
            self.entries.remove(name);
            return;
        }
        self.arm(name, retry_at);
    }

    /// Settles a firing of a pending schedule: it moved to `next_ms`, having
    /// enqueued `last`, and is armed there.
    pub(crate) fn fired(&mut self, name: &str, next_ms: Option<u64>, last: Option<(u64, u64)>) {
        let entry = self.entries.get_mut(name).expect("a fired schedule is known");
        let armed = entry.current.as_mut().expect("a fired schedule is stored");
        (armed.schedule.next_ms, armed.schedule.last) = (next_ms, last);
        self.restore(name, None);
    }

    /// Settles a pending schedule as it was: arms it again (at `retry_at`, if
    /// given), or forgets it if it was never stored.
    pub(crate) fn restore(&mut self, name: &str, retry_at: Option<u64>) {
        let entry = self.entries.get_mut(name).expect("restoring a known schedule");
        debug_assert!(entry.pending, "schedule {name} restored but not hidden");
        entry.pending = false;
        if entry.current.is_none() {
            self.entries.remove(name);
            return;
        }
        self.arm(name, retry_at);
    }

    fn arm(&mut self, name: &str, at: Option<u64>) {
        let entry = self.entries.get_mut(name).expect("arming a known schedule");
        let current = entry.current.as_ref().filter(|armed| !armed.schedule.paused);
        let next = current.and_then(|armed| armed.schedule.next_ms);
        entry.armed_at = next.and(at).or(next);
        if let Some(at) = entry.armed_at {
            self.timeline.insert((at, name.into()));
        }
    }

    /// Takes the schedules due at `now_ms` off the timeline, pending.
    pub(crate) fn take_due(&mut self, now_ms: u64) -> Vec<Box<str>> {
        let mut due = Vec::new();
        while let Some((at, name)) = self.timeline.first().cloned() {
            if at > now_ms {
                break;
            }
            self.hide(&name);
            due.push(name);
        }
        due
    }

    /// Verifies the table's invariants: the timeline holds exactly the armed
    /// schedules that are not pending, and the bytes counted are the stored ones'.
    pub(crate) fn check(&self) -> Result<(), String> {
        let mut armed = 0;
        let mut bytes = 0;
        for (name, entry) in &self.entries {
            bytes += entry.current.as_ref().map_or(0, |armed| bytes_of(&armed.schedule));
            if entry.current.as_ref().is_some_and(|armed| armed.schedule.name != *name) {
                return Err(format!("schedule {name} is stored under another name"));
            }
            match (entry.pending, entry.armed_at) {
                (true, Some(_)) => return Err(format!("schedule {name} is pending but armed")),
                (false, None)
                    if entry.current.as_ref().is_some_and(|a| a.schedule.next_ms.is_some() && !a.schedule.paused) =>
                {
                    return Err(format!("schedule {name} has a next occurrence but is not armed"));
                }
                (_, Some(_)) if entry.current.as_ref().is_some_and(|a| a.schedule.paused) => {
                    return Err(format!("schedule {name} is paused but armed"));
                }
                (_, Some(at)) => {
                    armed += 1;
                    if !self.timeline.contains(&(at, name.clone())) {
                        return Err(format!("schedule {name} is armed at {at} but not on the timeline"));
                    }
                }
                _ => {}
            }
            if entry.current.is_none() && !entry.pending {
                return Err(format!("schedule {name} is neither stored nor being put"));
            }
        }
        if armed != self.timeline.len() {
            return Err(format!("{} timeline entries for {armed} armed schedules", self.timeline.len()));
        }
        if bytes != self.memory_bytes {
            return Err(format!("schedules hold {bytes} bytes, counted {}", self.memory_bytes));
        }
        Ok(())
    }
}
