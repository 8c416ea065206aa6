//! The engine's state, owned in one place: every task by id, each queue's
//! indexes, the side tables, and one timing wheel ticked in Unix milliseconds
//! that holds both due times and lease expiries.
//!
//! A task is *filed* where its phase says (a queue's ready set or the wheel
//! for a scheduled task, the wheel for a leased one, a queue's dead set) and is
//! counted there, unless it is *pending*: a change of it is on its way to the
//! store, and it is filed nowhere until the change is settled. Every change of
//! a filed task goes through [`unfile`](State::unfile) and
//! [`file`](State::file), which keep the counts, the ready sets and the timers
//! in step; [`check`](State::check) verifies all of it.

use std::collections::HashMap;
use std::num::NonZeroU64;
use std::sync::Arc;

use hourglass::{Key, Wheel};
use rustc_hash::{FxHashMap, FxHashSet};

use super::queue::QueueState;
use super::reads::Reads;
use super::ready::Place;
use super::schedules::Schedules;
use super::settle::{Settlement, Why};
use super::slot::{Phase, Slot, NO_TIMER};
use super::tasks::Tasks;
use crate::store::{footprint, Mutation, Sizes};
use hourglass_queue::limits::{
    error_bytes, payload_inline, task_memory_bytes, terms_bytes, Limits, ANSWER_PAYLOAD_BYTES_MAX, ATTEMPTS_UNLIMITED,
    LIST_SCAN_MAX, PRIORITY_DEFAULT, QUEUES_MAX,
};
use hourglass_queue::retry::backoff_ms;
use hourglass_queue::QueueError;
use hourglass_queue::Totals;
use hourglass_queue::{Claimed, Lease, Status, Task, TaskInfo, TaskState};
use hourglass_queue::{Cursor, ListRequest, Page};

/// What a task with a priority other than the default, or a lease of its
/// own, keeps in a side table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Terms {
    pub(crate) priority: u32,
    pub(crate) lease_ms: Option<u32>,
}

impl Terms {
    /// A task's terms, if it has any but the defaults.
    fn of(task: &Task) -> Option<Terms> {
        let terms = Terms { priority: task.priority, lease_ms: task.lease_ms };
        (terms != Terms::DEFAULT).then_some(terms)
    }

    const DEFAULT: Terms = Terms { priority: PRIORITY_DEFAULT, lease_ms: None };
}

#[derive(Debug, Clone, Copy)]
pub(crate) struct Leased {
    pub(crate) lease: Lease,
    pub(crate) until_ms: u64,
}

pub(crate) struct State {
    pub(crate) tasks: Tasks<Slot>,
    /// The period of each repeating task. (Tables keyed by task id use the
    /// Fx hash: ids are the engine's, not a client's.)
    pub(crate) repeats: FxHashMap<u64, u64>,
    /// When each task that expires does so (Unix ms).
    pub(crate) expiries: FxHashMap<u64, u64>,
    /// Dead tasks that died because they expired.
    pub(crate) expired: FxHashSet<u64>,
    /// The last error of each task that has one (a nack's reason, or a
    /// lease that expired).
    pub(crate) errors: FxHashMap<u64, Box<str>>,
    /// The priority and own lease of each task that has other than the
    /// defaults (beanstalkd's jobs all have a time-to-run).
    pub(crate) terms: FxHashMap<u64, Terms>,
    pub(crate) queues: Vec<QueueState>,
    pub(crate) queue_index: HashMap<Arc<str>, u32>,
    pub(crate) leases: FxHashMap<u64, Leased>,
    /// The key of each task that has one.
    pub(crate) keys: FxHashMap<u64, Box<str>>,
    pub(crate) wheel: Wheel<NonZeroU64>,
    /// Never reused: persisted with every enqueue, so acked ids stay retired
    /// across restarts.
    pub(crate) next_id: u64,
    /// Tasks whose enqueue is not yet durable (see [`Slot::fresh`]).
    pub(crate) fresh: usize,
    /// What the memory budget counts: [`task_memory_bytes`] of every task.
    pub(crate) memory_bytes: u64,
    /// What the disk budget counts: the [`footprint`] of every task.
    pub(crate) disk_bytes: u64,
    pub(crate) totals: Totals,
    pub(crate) schedules: Schedules,
    /// The time (Unix ms) the timer thread sleeps to, as its last look at
    /// the wheel found it (`u64::MAX`: none): a timer added for later needs
    /// no wake-up.
    pub(crate) timers_wake_ms: u64,
}

impl State {
    pub(crate) fn new(now_ms: u64) -> State {
        let mut wheel = Wheel::new();
        wheel.advance(now_ms);
        State {
            tasks: Tasks::new(),
            repeats: FxHashMap::default(),
            expiries: FxHashMap::default(),
            expired: FxHashSet::default(),
            errors: FxHashMap::default(),
            terms: FxHashMap::default(),
            queues: Vec::new(),
            queue_index: HashMap::new(),
            leases: FxHashMap::default(),
            keys: FxHashMap::default(),
            wheel,
            next_id: 1,
            fresh: 0,
            memory_bytes: 0,
            disk_bytes: 0,
            totals: Totals::default(),
            schedules: Schedules::default(),
            timers_wake_ms: 0,
        }
    }

    /// The index of `queue`, creating its state if new.
    pub(crate) fn queue_id(&mut self, queue: &str) -> Result<u32, QueueError> {
        if let Some(&id) = self.queue_index.get(queue) {
            return Ok(id);
        }
        if self.queues.len() >= QUEUES_MAX {
            return Err(QueueError::Invalid(format!("there are already {QUEUES_MAX} queues")));
        }
        let name: Arc<str> = Arc::from(queue);
        let id = self.queues.len() as u32;
        self.queues.push(QueueState::new(name.clone()));
        self.queue_index.insert(name, id);
        Ok(id)
    }

    pub(crate) fn queue(&self, name: &str) -> Option<&QueueState> {
        self.queue_id_of(name).map(|id| &self.queues[id as usize])
    }

    /// The queue of task `id`, which must exist.
    pub(crate) fn queue_of(&mut self, id: u64) -> &mut QueueState {
        &mut self.queues[self.tasks[&id].queue as usize]
    }

    /// Whether a change of the task is on its way to the store; `None` for no
    /// such task.
    pub(crate) fn pending(&self, id: u64) -> Option<bool> {
        self.tasks.get(&id).map(|slot| slot.pending)
    }

    /// Tasks held, as others may see them: without those whose enqueue is
    /// still being written.
    pub(crate) fn held(&self) -> usize {
        self.tasks.len() - self.fresh
    }

    /// The task without its payload, put back together from its slot and the
    /// side tables.
    pub(crate) fn task(&self, id: u64) -> Task {
        let slot = &self.tasks[&id];
        let state = match slot.phase {
            Phase::Scheduled => TaskState::Scheduled,
            Phase::Leased => {
                let leased = self.leases[&id];
                TaskState::Leased { lease: leased.lease, until_ms: leased.until_ms }
            }
            Phase::Dead => TaskState::Dead,
        };
        let terms = self.terms(id);
        Task {
            id,
            queue: self.queues[slot.queue as usize].name.clone(),
            run_at_ms: slot.run_at_ms,
            attempt: u32::from(slot.attempt),
            max_attempts: u32::from(slot.max_attempts),
            priority: terms.priority,
            lease_ms: terms.lease_ms,
            key: if slot.keyed { self.keys.get(&id).cloned() } else { None },
            every_ms: self.repeats.get(&id).copied(),
            expires_at_ms: self.expiries.get(&id).copied(),
            expired: self.expired.contains(&id),
            last_error: self.errors.get(&id).cloned(),
            state,
            created_ms: slot.created_ms,
        }
    }

    /// A task's priority and own lease.
    pub(crate) fn terms(&self, id: u64) -> Terms {
        self.terms.get(&id).copied().unwrap_or(Terms::DEFAULT)
    }

    /// Where a due task stands in its queue's claim order.
    fn place(&self, id: u64, run_at_ms: u64) -> Place {
        Place { priority: self.terms(id).priority, run_at_ms, id }
    }

    /// `task` (as stored, or as a change will make it) as a read shows it,
    /// as item `at` of an answer: its payload copied, or noted in `reads` if
    /// it is in the store.
    pub(crate) fn info(&self, task: Task, now_ms: u64, reads: &mut Reads, at: usize) -> TaskInfo {
        let status = status(&task, now_ms);
        let payload = reads.payload(&self.tasks[&task.id], task.id, at);
        TaskInfo { task, payload, status }
    }

    /// What a task of these sizes costs the budgets: (memory, disk) bytes.
    pub(crate) fn charges(sizes: Sizes) -> (u64, u64) {
        (task_memory_bytes(sizes.payload, sizes.key), footprint(sizes))
    }

    /// The sizes of a stored task, read off its slot and the side tables
    /// without putting the task together.
    pub(crate) fn sizes(&self, id: u64) -> Sizes {
        let slot = &self.tasks[&id];
        Sizes {
            queue: self.queues[slot.queue as usize].name.len(),
            key: self.keys.get(&id).map(|key| key.len()),
            repeats: self.repeats.contains_key(&id),
            payload: slot.payload_bytes as usize,
        }
    }

    /// Stores a new task, pending and fresh: filed nowhere and not counted
    /// until [`reveal`](State::reveal). Its key is taken at once, so that a
    /// second enqueue with it waits. `payload` is `None` for a payload kept
    /// only in the store: one larger than
    /// [`PAYLOAD_INLINE_MAX`](hourglass_queue::limits::PAYLOAD_INLINE_MAX) bytes.
    pub(crate) fn insert(&mut self, task: &Task, payload: Option<Box<str>>, payload_bytes: usize, queue: u32) {
        let id = task.id;
        debug_assert_eq!(payload.is_some(), payload_inline(payload_bytes));
        let (memory, disk) = Self::charges(Sizes::of(task, payload_bytes));
        self.memory_bytes += memory;
        self.disk_bytes += disk;
        self.next_id = self.next_id.max(id + 1);
        if let Some(key) = task.key.clone() {
            self.queues[queue as usize].keys.insert(key.clone(), id);
            self.keys.insert(id, key);
        }
        let slot = Slot {
            run_at_ms: 0,
            created_ms: task.created_ms,
            timer: NO_TIMER,
            payload,
            queue,
            payload_bytes: u32::try_from(payload_bytes).unwrap_or(u32::MAX),
            attempt: 0,
            max_attempts: 0,
            phase: Phase::Scheduled,
            pending: true,
            fresh: true,
            keyed: task.key.is_some(),
        };
        self.fresh += 1;
        self.tasks.insert(id, slot);
        self.write_back(task);
    }

    /// `Ok` if what the state holds, grown from `memory_before` and
    /// `disk_before` (the tasks' bytes) by one request, is within the budgets.
    /// Stored schedules count against the memory budget too.
    pub(crate) fn within_budgets(
        &self,
        limits: &Limits,
        memory_before: u64,
        disk_before: u64,
    ) -> Result<(), QueueError> {
        let max = limits.memory_bytes_max;
        let schedules = self.schedules.memory_bytes();
        if self.memory_bytes + schedules > max {
            let adding = self.memory_bytes - memory_before;
            return Err(QueueError::OverMemoryBudget { held: memory_before + schedules, adding, max });
        }
        match limits.disk_bytes_max {
            Some(max) if self.disk_bytes > max => {
                let adding = self.disk_bytes - disk_before;
                Err(QueueError::OverDiskBudget { stored: disk_before, adding, max })
            }
            _ => Ok(()),
        }
    }

    /// Takes a filed task out of every index while a change of it is written.
    pub(crate) fn hide(&mut self, id: u64) {
        self.unfile(id);
        self.tasks.get_mut(&id).expect("hiding a known task").pending = true;
    }

    /// Files a pending task again, as it now is: its change is settled.
    pub(crate) fn reveal(&mut self, id: u64, now_ms: u64) {
        let slot = self.tasks.get_mut(&id).expect("revealing a known task");
        debug_assert!(slot.pending, "task {id} revealed but not hidden");
        slot.pending = false;
        if std::mem::take(&mut slot.fresh) {
            self.fresh -= 1;
        }
        self.file(id, now_ms);
    }

    /// Copies what may change about a task into its slot and side tables.
    pub(crate) fn write_back(&mut self, task: &Task) {
        match task.every_ms {
            Some(every_ms) => self.repeats.insert(task.id, every_ms),
            None => self.repeats.remove(&task.id),
        };
        match task.expires_at_ms {
            Some(expires_at_ms) => self.expiries.insert(task.id, expires_at_ms),
            None => self.expiries.remove(&task.id),
        };
        if task.expired && task.state == TaskState::Dead {
            self.expired.insert(task.id);
        } else {
            self.expired.remove(&task.id);
        }
        let terms = Terms::of(task);
        if self.terms.get(&task.id) != terms.as_ref() {
            let old = match terms {
                Some(terms) => self.terms.insert(task.id, terms),
                None => self.terms.remove(&task.id),
            };
            // Charged apart from the task's sizes, like a last error.
            let (memory, disk) = terms_bytes();
            match (old, terms) {
                (None, Some(_)) => {
                    (self.memory_bytes, self.disk_bytes) = (self.memory_bytes + memory, self.disk_bytes + disk)
                }
                (Some(_), None) => {
                    (self.memory_bytes, self.disk_bytes) = (self.memory_bytes - memory, self.disk_bytes - disk)
                }
                _ => {}
            }
        }
        if self.errors.get(&task.id) != task.last_error.as_ref() {
            // Charged apart from the task's sizes, which do not change.
            let old = match task.last_error.clone() {
                Some(error) => self.errors.insert(task.id, error),
                None => self.errors.remove(&task.id),
            };
            self.charge_error(old.as_deref(), task.last_error.as_deref());
        }
        let slot = self.tasks.get_mut(&task.id).expect("a known task");
        slot.run_at_ms = task.run_at_ms;
        // Attempts are bounded by MAX_ATTEMPTS_MAX, far below u16::MAX.
        slot.attempt = u16::try_from(task.attempt).unwrap_or(u16::MAX);
        slot.max_attempts = u16::try_from(task.max_attempts).unwrap_or(u16::MAX);
        slot.phase = match task.state {
            TaskState::Scheduled => Phase::Scheduled,
            TaskState::Leased { .. } => Phase::Leased,
            TaskState::Dead => Phase::Dead,
        };
        match task.state {
            TaskState::Leased { lease, until_ms } => {
                self.leases.insert(task.id, Leased { lease, until_ms });
            }
            TaskState::Scheduled | TaskState::Dead => {
                self.leases.remove(&task.id);
            }
        }
    }

    /// Moves the budgets' counts from a task's last error `old` to `new`.
    fn charge_error(&mut self, old: Option<&str>, new: Option<&str>) {
        if let Some(old) = old {
            let (memory, disk) = error_bytes(old.len());
            self.memory_bytes -= memory;
            self.disk_bytes -= disk;
        }
        if let Some(new) = new {
            let (memory, disk) = error_bytes(new.len());
            self.memory_bytes += memory;
            self.disk_bytes += disk;
        }
    }

    /// Removes the task from everything; `false` if there was no such task.
    pub(crate) fn forget(&mut self, id: u64) -> bool {
        let Some(pending) = self.pending(id) else { return false };
        if !pending {
            self.unfile(id);
        }
        let (memory, disk) = Self::charges(self.sizes(id));
        self.memory_bytes -= memory;
        self.disk_bytes -= disk;
        let slot = self.tasks.remove(&id).expect("a known task");
        if slot.fresh {
            self.fresh -= 1;
        }
        self.leases.remove(&id);
        self.repeats.remove(&id);
        self.expiries.remove(&id);
        self.expired.remove(&id);
        let error = self.errors.remove(&id);
        self.charge_error(error.as_deref(), None);
        if self.terms.remove(&id).is_some() {
            let (memory, disk) = terms_bytes();
            self.memory_bytes -= memory;
            self.disk_bytes -= disk;
        }
        if let Some(key) = self.keys.remove(&id) {
            self.queues[slot.queue as usize].keys.remove(&key);
        }
        true
    }

    /// Changes a filed task at once, keeping counts and timers right; returns
    /// it as it now is.
    pub(crate) fn transition(&mut self, id: u64, now_ms: u64, change: impl FnOnce(&mut Task)) -> Task {
        self.unfile(id);
        let mut task = self.task(id);
        change(&mut task);
        self.write_back(&task);
        self.file(id, now_ms);
        task
    }

    /// Puts the task where its state says: the ready set, the wheel, or the dead set.
    fn file(&mut self, id: u64, now_ms: u64) {
        let lease_until_ms = self.leases.get(&id).map(|leased| leased.until_ms);
        let expires_at_ms = self.expiries.get(&id).copied();
        let priority = self.terms(id).priority;
        let slot = self.tasks.get_mut(&id).expect("filing a known task");
        let (queue, run_at_ms, phase) = (slot.queue, slot.run_at_ms, slot.phase);
        let due = phase == Phase::Scheduled && run_at_ms <= now_ms;
        let timer_at = match phase {
            Phase::Scheduled if !due => Some(run_at_ms),
            // Due, it waits in the ready set until a claim or its expiry.
            Phase::Scheduled => expires_at_ms,
            Phase::Leased => lease_until_ms,
            Phase::Dead => None,
        };
        let wheel_id = NonZeroU64::new(id).expect("ids start at 1");
        slot.timer = timer_at
            .map_or(NO_TIMER, |at| self.wheel.insert(at, wheel_id).expect("below the wheel's capacity").into_raw());
        let q = &mut self.queues[queue as usize];
        match phase {
            Phase::Scheduled => {
                q.scheduled += 1;
                if due {
                    q.ready.insert(Place { priority, run_at_ms, id });
                    q.notify.notify_waiters();
                }
            }
            Phase::Leased => q.leased += 1,
            Phase::Dead => {
                q.dead.insert(id);
            }
        }
    }

    /// Undoes [`file`](State::file).
    fn unfile(&mut self, id: u64) {
        let priority = self.terms(id).priority;
        let slot = self.tasks.get_mut(&id).expect("unfiling a known task");
        debug_assert!(!slot.pending, "task {id} unfiled while pending");
        if slot.timer != NO_TIMER {
            self.wheel.remove(Key::from_raw(slot.timer));
            slot.timer = NO_TIMER;
        }
        let q = &mut self.queues[slot.queue as usize];
        match slot.phase {
            Phase::Scheduled => {
                q.scheduled -= 1;
                q.ready.remove(&Place { priority, run_at_ms: slot.run_at_ms, id });
            }
            Phase::Leased => q.leased -= 1,
            Phase::Dead => {
                q.dead.remove(&id);
            }
        }
    }

    /// Leases up to `max` due tasks of `queue` (each for its own lease if it
    /// has one, else for `lease_ms`), with at most
    /// [`ANSWER_PAYLOAD_BYTES_MAX`] of payloads among them (at least one
    /// task); returns them, their payloads still to read noted in `reads`,
    /// and what must be recorded (the new attempt counts, never the payloads).
    pub(crate) fn claim(
        &mut self,
        queue: u32,
        max: usize,
        now_us: u64,
        lease_ms: u64,
        reads: &mut Reads,
    ) -> (Vec<Claimed>, Vec<Mutation>) {
        let now_ms = now_us / 1_000;
        let mut claimed = Vec::new();
        let mut updates = Vec::new();
        if self.queues[queue as usize].is_paused(now_ms) {
            return (claimed, updates);
        }
        let mut bytes = 0;
        // Due tasks past their expiry stay for the timer thread, which makes
        // them dead: never delivered late.
        let mut unexpired = Vec::new();
        if !self.expiries.is_empty() {
            let ready = self.queues[queue as usize].ready.iter();
            let expired = |id: &u64| self.expiries.get(id).is_some_and(|&at| at <= now_ms);
            unexpired.extend(ready.filter(|place| !expired(&place.id)).take(max).copied());
            unexpired.reverse();
        }
        while claimed.len() < max {
            let next =
                if self.expiries.is_empty() { self.queues[queue as usize].ready.first() } else { unexpired.pop() };
            let Some(Place { run_at_ms, id, .. }) = next else { break };
            bytes += self.tasks[&id].payload_bytes as usize;
            if bytes > ANSWER_PAYLOAD_BYTES_MAX && !claimed.is_empty() {
                break;
            }
            let (task, lease, until_ms) = self.lease(id, now_ms, lease_ms);
            self.queues[queue as usize].delivered(now_us.saturating_sub(run_at_ms * 1_000));
            claimed.push(Claimed {
                id,
                queue: task.queue.clone(),
                payload: reads.payload(&self.tasks[&id], id, claimed.len()),
                attempt: task.attempt,
                lease,
                lease_until_ms: until_ms,
                run_at_ms,
            });
            updates.push(Mutation::Update(task));
        }
        self.totals.delivered += claimed.len() as u64;
        (claimed, updates)
    }

    /// Hands filed task `id` out under a new lease, for its own length if it
    /// has one, else `lease_ms`: one more attempt. Returns the task as it now
    /// is, the lease and its end.
    pub(crate) fn lease(&mut self, id: u64, now_ms: u64, lease_ms: u64) -> (Task, Lease, u64) {
        let lease = Lease(rand::random());
        let until_ms = now_ms + self.terms(id).lease_ms.map_or(lease_ms, u64::from);
        let task = self.transition(id, now_ms, |task| {
            task.attempt += 1;
            task.state = TaskState::Leased { lease, until_ms };
        });
        (task, lease, until_ms)
    }

    /// The task a claim of `queue` at `now_ms` would take first, if any:
    /// none if the queue is paused; never one due but past its expiry (those
    /// wait for the timer thread to make them dead).
    pub(crate) fn next_claimable(&self, queue: u32, now_ms: u64) -> Option<Place> {
        let q = &self.queues[queue as usize];
        if q.is_paused(now_ms) {
            return None;
        }
        let expired = |id: &u64| self.expiries.get(id).is_some_and(|&at| at <= now_ms);
        q.ready.iter().find(|place| !expired(&place.id)).copied()
    }

    /// The index of `queue`, if it has state.
    pub(crate) fn queue_id_of(&self, queue: &str) -> Option<u32> {
        self.queue_index.get(queue).copied()
    }

    /// `Ok` if `lease` is the task's current one. The task must not be pending.
    pub(crate) fn check_lease(&self, id: u64, lease: Lease) -> Result<(), QueueError> {
        match self.leases.get(&id) {
            Some(leased) if leased.lease == lease => Ok(()),
            _ if self.tasks.get(&id).is_none() => Err(QueueError::NotFound(id)),
            _ => Err(QueueError::StaleLease(id)),
        }
    }

    /// The wall clock stepped back: moves every timer to a new wheel that
    /// stands at `now_ms`, each at its deadline, so that none expires before
    /// its time on the clock as it now reads.
    pub(crate) fn rebase_timers(&mut self, now_ms: u64) {
        let mut wheel = Wheel::new();
        wheel.advance(now_ms);
        let old = std::mem::replace(&mut self.wheel, wheel);
        let ids: Vec<u64> = self.tasks.ids().collect();
        for id in ids {
            let slot = self.tasks.get_mut(&id).expect("a listed task");
            if slot.timer == NO_TIMER {
                continue;
            }
            let deadline = old.deadline(Key::from_raw(slot.timer)).expect("a task's timer is in the wheel");
            let wheel_id = NonZeroU64::new(id).expect("ids start at 1");
            slot.timer = self.wheel.insert(deadline, wheel_id).expect("below the wheel's capacity").into_raw();
        }
    }

    /// Advances the wheel: files tasks that came due, and hides each task whose
    /// lease expired until its next form (scheduled again after a backoff, or
    /// dead) is durable. Returns those writes, to be sent under this lock.
    pub(crate) fn expire(&mut self, now_ms: u64) -> Vec<(Mutation, Settlement)> {
        self.wheel.advance(now_ms);
        let mut writes = Vec::new();
        while let Some(expired) = self.wheel.pop_expired() {
            let id = expired.value.get();
            let Some(slot) = self.tasks.get_mut(&id) else { continue };
            debug_assert!(!slot.pending, "task {id} had a timer while pending");
            slot.timer = NO_TIMER;
            match slot.phase {
                Phase::Scheduled if self.expiries.get(&id).is_some_and(|&at| at <= now_ms) => {
                    // Not delivered by its expiry: dead, not late.
                    let mut task = self.task(id);
                    task.state = TaskState::Dead;
                    task.expired = true;
                    self.hide(id);
                    writes.push((Mutation::Update(task.clone()), Settlement::Change { task, why: Why::Expired }));
                }
                Phase::Scheduled => {
                    let (queue, run_at_ms) = (slot.queue, slot.run_at_ms);
                    let place = self.place(id, run_at_ms);
                    let q = &mut self.queues[queue as usize];
                    q.ready.insert(place);
                    q.notify.notify_waiters();
                    if let Some(&expires_at_ms) = self.expiries.get(&id) {
                        let wheel_id = NonZeroU64::new(id).expect("ids start at 1");
                        let timer = self.wheel.insert(expires_at_ms, wheel_id).expect("below the wheel's capacity");
                        self.tasks.get_mut(&id).expect("a known task").timer = timer.into_raw();
                    }
                }
                Phase::Leased => {
                    let mut task = self.task(id);
                    fail_attempt(&mut task, now_ms, None);
                    task.last_error = Some(LEASE_EXPIRED.into());
                    // The wheel has consumed the timer; unfile sees none.
                    self.hide(id);
                    writes.push((Mutation::Update(task.clone()), Settlement::Change { task, why: Why::Expire }));
                }
                Phase::Dead => {}
            }
        }
        writes
    }

    /// A page of `queue`'s tasks. Due tasks are listed from the ready set in
    /// claim order, dead ones from the dead set by id; the others by walking
    /// ids upward, at most [`LIST_SCAN_MAX`] of them a page.
    pub(crate) fn list(&self, queue: u32, request: ListRequest, now_ms: u64, reads: &mut Reads) -> Page {
        let q = &self.queues[queue as usize];
        // A cursor comes from a client: whatever it says, nothing overflows.
        let after = request.after.unwrap_or_default();
        let first_id = after.id.saturating_add(1);
        let mut tasks = Vec::new();
        let mut bytes = 0;
        // Whether the page has room for task `id`, counting it in if so.
        let mut room = |id: u64, tasks: &Vec<TaskInfo>| {
            bytes += self.tasks[&id].payload_bytes as usize;
            tasks.len() < request.limit && (tasks.is_empty() || bytes <= ANSWER_PAYLOAD_BYTES_MAX)
        };
        // Takes tasks from `ids` until the page is full; whether any are left.
        let mut fill = |ids: &mut dyn Iterator<Item = u64>| {
            let mut ids = ids.peekable();
            while let Some(&id) = ids.peek() {
                if !room(id, &tasks) {
                    break;
                }
                let at = tasks.len();
                tasks.push(self.info(self.task(id), now_ms, reads, at));
                ids.next();
            }
            ids.peek().is_some()
        };
        let next = match request.status {
            Some(Status::Due) => {
                let from = Place { priority: after.priority, run_at_ms: after.run_at_ms, id: after.id };
                let more = fill(&mut q.ready.after(from).map(|place| place.id));
                let cursor =
                    |t: &TaskInfo| Cursor { priority: t.task.priority, run_at_ms: t.task.run_at_ms, id: t.task.id };
                more.then(|| tasks.last().map(cursor)).flatten()
            }
            Some(Status::Dead) => {
                let more = fill(&mut q.dead.range(first_id..).copied());
                more.then(|| tasks.last().map(|t| Cursor { id: t.task.id, ..Cursor::default() })).flatten()
            }
            // Leased tasks are few next to the others (deliveries in flight):
            // found through the lease table, not by walking a queue of a
            // million scheduled ones 100,000 ids a page.
            Some(Status::Leased) if self.leases.len() <= LIST_SCAN_MAX => {
                let mut ids: Vec<u64> = self
                    .leases
                    .keys()
                    .copied()
                    .filter(|&id| id >= first_id && self.tasks.get(&id).is_some_and(|s| s.queue == queue && !s.pending))
                    .collect();
                ids.sort_unstable();
                let more = fill(&mut ids.into_iter());
                more.then(|| tasks.last().map(|t| Cursor { id: t.task.id, ..Cursor::default() })).flatten()
            }
            status => {
                let end = first_id.saturating_add(LIST_SCAN_MAX as u64).min(self.next_id);
                let mut id = first_id;
                while id < end && tasks.len() < request.limit {
                    let listed = self.tasks.get(&id).is_some_and(|slot| {
                        !slot.pending
                            && slot.queue == queue
                            && status.is_none_or(|status| status == slot_status(slot, now_ms))
                    });
                    if listed {
                        if !room(id, &tasks) {
                            break;
                        }
                        let at = tasks.len();
                        tasks.push(self.info(self.task(id), now_ms, reads, at));
                    }
                    id += 1;
                }
                (id < self.next_id).then_some(Cursor { id: id - 1, ..Cursor::default() })
            }
        };
        Page { tasks, next }
    }
}

/// The status of a filed task's slot at `now_ms`, without putting the task together.
fn slot_status(slot: &Slot, now_ms: u64) -> Status {
    match slot.phase {
        Phase::Scheduled if slot.run_at_ms <= now_ms => Status::Due,
        Phase::Scheduled => Status::Scheduled,
        Phase::Leased => Status::Leased,
        Phase::Dead => Status::Dead,
    }
}

/// The status of a filed task read at `now_ms`.
pub(crate) fn status(task: &Task, now_ms: u64) -> Status {
    match task.state {
        TaskState::Scheduled if task.run_at_ms <= now_ms => Status::Due,
        TaskState::Scheduled => Status::Scheduled,
        TaskState::Leased { .. } => Status::Leased,
        TaskState::Dead => Status::Dead,
    }
}

/// The last error of a task whose lease ran out.
pub(crate) const LEASE_EXPIRED: &str = "lease expired";

/// A delivery failed: due again after `delay_ms` or a backoff, or dead if out
/// of attempts or past its expiry.
pub(crate) fn fail_attempt(task: &mut Task, now_ms: u64, delay_ms: Option<u64>) {
    let unlimited = task.max_attempts == ATTEMPTS_UNLIMITED;
    if task.expires_at_ms.is_some_and(|at| at <= now_ms) {
        task.state = TaskState::Dead;
        task.expired = true;
    } else if !unlimited && task.attempt >= task.max_attempts {
        task.state = TaskState::Dead;
    } else {
        task.state = TaskState::Scheduled;
        let backoff = || if unlimited { 0 } else { backoff_ms(task.attempt) };
        task.run_at_ms = now_ms + delay_ms.unwrap_or_else(backoff);
    }
}
