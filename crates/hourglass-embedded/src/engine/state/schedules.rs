//! The state's schedules: read, put and deleted under the lock (see
//! [`ScheduleTable`](crate::engine::schedule_table::ScheduleTable) for their pending changes), and the firing of an
//! occurrence: the due schedules are taken off the timeline (pending), each
//! enqueues what its misfire and overlap policies ask for and moves to its
//! next occurrence, in one write.

use super::slot::Phase;
use super::State;
use crate::engine::schedule_table::{bytes_of, Armed};
use crate::engine::settlement::Settlement;
use crate::store::Mutation;
use hourglass_queue::limits::{payload_inline, Limits, PRIORITY_DEFAULT, SCHEDULE_RETRY_MS};
use hourglass_queue::DeadReason;
use hourglass_queue::QueueError;
use hourglass_queue::{occurrence_key, Due, Overlap, Schedule};
use hourglass_queue::{Task, TaskState};

/// What became of a due schedule: a write to send, or a refusal to try again
/// after.
pub(crate) enum Firing {
    Write(Vec<Mutation>, Settlement),
    Refused { name: Box<str>, error: QueueError },
}

impl State {
    /// The stored version of schedule `name`, pending or not.
    pub(crate) fn schedule(&self, name: &str) -> Option<&Armed> {
        self.schedules.get(name)
    }

    /// Whether a change of schedule `name` is on its way; `None` if there is
    /// no such schedule, stored or being put.
    pub(crate) fn schedule_pending(&self, name: &str) -> Option<bool> {
        self.schedules.pending(name)
    }

    /// Schedules stored, or being put for the first time.
    pub(crate) fn schedule_count(&self) -> usize {
        self.schedules.len()
    }

    /// Up to `limit` stored schedules after `after` of the queues `shown`
    /// accepts, by name, and whether more of them follow.
    pub(crate) fn schedules_page(
        &self,
        after: Option<&str>,
        limit: usize,
        shown: &dyn Fn(&str) -> bool,
    ) -> (Vec<Armed>, bool) {
        self.schedules.page(after, limit, shown)
    }

    /// Marks schedule `name` pending while a change of it is written (making
    /// an entry for a new one). Settled by a
    /// [`Settlement::PutSchedule`] or a [`Settlement::DeleteSchedule`].
    pub(crate) fn hide_schedule(&mut self, name: &str) {
        self.schedules.hide(name);
    }

    /// A schedule loaded from the store at a start.
    pub(crate) fn load_schedule(&mut self, armed: Armed) {
        self.schedules.load(armed);
    }

    /// `Ok` if `schedule`, in place of the stored version of its name, keeps
    /// the memory budget of `limits`.
    ///
    /// # Errors
    /// [`QueueError::OverMemoryBudget`].
    pub(crate) fn schedule_fits(&self, schedule: &Schedule, limits: &Limits) -> Result<(), QueueError> {
        let old_bytes = self.schedules.get(&schedule.name).map_or(0, |old| bytes_of(&old.schedule));
        let held = self.memory_bytes + self.schedules.memory_bytes() - old_bytes;
        let adding = bytes_of(schedule);
        let max = limits.memory_bytes_max;
        if held + adding > max {
            return Err(QueueError::OverMemoryBudget { held, adding, max });
        }
        Ok(())
    }

    /// Fires every schedule whose occurrence has come: each enqueues what its
    /// misfire and overlap policies ask for, and moves to its next occurrence,
    /// in one write, to be sent under this lock.
    pub(crate) fn fire_schedules(&mut self, now_ms: u64, limits: &Limits) -> Vec<Firing> {
        let due = self.schedules.take_due(now_ms);
        due.into_iter().map(|name| self.fire(name, now_ms, limits)).collect()
    }

    fn fire(&mut self, name: Box<str>, now_ms: u64, limits: &Limits) -> Firing {
        let armed = self.schedules.get(&name).expect("a due schedule is stored");
        let first = armed.schedule.next_ms.expect("an armed schedule has a next occurrence");
        let Due { mut runs, mut skipped, next_ms } = armed.timetable.due(first, now_ms, armed.schedule.misfire);
        // The timetable stays where it is: only the schedule's text is copied.
        let schedule = armed.schedule.clone();
        if schedule.overlap == Overlap::Forbid {
            let previous_alive = schedule.last.is_some_and(|(_, id)| {
                self.tasks.get(&id).is_some_and(|slot| slot.pending || slot.phase != Phase::Dead)
            });
            let keep = if previous_alive { 0 } else { runs.len().min(1) };
            skipped += (runs.len() - keep) as u64;
            runs.drain(..runs.len() - keep);
        }
        if let Some(deadline_ms) = schedule.expires_after_ms {
            // Too late to start: skipped, not enqueued to die.
            let before = runs.len();
            runs.retain(|&occurrence_ms| occurrence_ms.saturating_add(deadline_ms) > now_ms);
            skipped += (before - runs.len()) as u64;
        }
        let queue_id = match self.queue_id(&schedule.queue) {
            Ok(queue_id) => queue_id,
            Err(error) => return Firing::Refused { name, error },
        };
        let queue = self.queues[queue_id as usize].name.clone();
        let (memory_before, disk_before) = (self.memory_bytes, self.disk_bytes);
        let mut mutations = Vec::with_capacity(runs.len() + 2);
        let mut ids = Vec::with_capacity(runs.len());
        let mut last = schedule.last;
        for occurrence_ms in runs {
            let key = occurrence_key(&name, occurrence_ms);
            if let Some(&id) = self.queues[queue_id as usize].keys.get(key.as_str()) {
                // Enqueued already (by a client with the same key): it stands for the occurrence.
                last = Some((occurrence_ms, id));
                continue;
            }
            let task = Task {
                id: self.next_id,
                queue: queue.clone(),
                run_at_ms: occurrence_ms,
                attempt: 0,
                max_attempts: schedule.max_attempts,
                priority: PRIORITY_DEFAULT,
                lease_ms: None,
                key: Some(key.into()),
                every_ms: None,
                expires_at_ms: schedule.expires_after_ms.map(|deadline_ms| occurrence_ms.saturating_add(deadline_ms)),
                dead_reason: DeadReason::Attempts,
                last_error: None,
                http: None,
                state: TaskState::Scheduled,
                created_ms: now_ms,
            };
            let payload = schedule.payload.clone();
            let bytes = payload.len();
            let held = payload_inline(bytes).then(|| payload.as_bytes().into());
            self.insert(&task, held, bytes, queue_id);
            last = Some((occurrence_ms, task.id));
            ids.push(task.id);
            mutations.push(Mutation::Insert { task, payload });
        }
        let refusal = if self.tasks.len() > limits.tasks_max {
            Some(QueueError::TooManyTasks { max: limits.tasks_max })
        } else {
            self.within_budgets(limits, memory_before, disk_before).err()
        };
        if let Some(error) = refusal {
            for id in ids {
                self.forget(id);
            }
            return Firing::Refused { name, error };
        }
        mutations.push(Mutation::PutSchedule(Schedule { next_ms, last, ..schedule }));
        if !ids.is_empty() {
            mutations.push(self.next_id_mutation());
        }
        Firing::Write(mutations, Settlement::Fire { name, next_ms, last, ids, skipped })
    }

    /// A schedule whose occurrence could not be enqueued: tried again later.
    pub(crate) fn retry_schedule(&mut self, name: &str, now_ms: u64) {
        self.schedules.restore(name, Some(now_ms + SCHEDULE_RETRY_MS));
    }
}
