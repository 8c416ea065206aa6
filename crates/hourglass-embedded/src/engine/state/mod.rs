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
//!
//! The fields are this module's: the engine changes the state only through
//! its verbs, each of which keeps the invariants (`check.rs`). They are
//! grouped by what they act on: tasks here, and in files of their own
//! enqueues, claims, time, listings, queues, queue settings, schedules, and
//! settlements.

mod check;
mod claim;
pub(crate) mod enqueue;
mod list;
mod queue;
pub(crate) mod queues;
mod ready;
pub(crate) mod schedules;
pub(crate) mod settings;
mod settle;
mod slot;
mod slots;
mod timers;

use std::collections::HashMap;
use std::num::NonZeroU64;
use std::sync::Arc;

use hourglass::{Key, Wheel};
use rustc_hash::FxHashMap;
use tokio::sync::Notify;

use super::reads::Reads;
use super::schedule_table::ScheduleTable;
use crate::store::{footprint, target_bytes, Loaded, Mutation, Sizes};
use hourglass_queue::limits::{
    error_bytes, payload_inline, task_memory_bytes, terms_bytes, Limits, ATTEMPTS_UNLIMITED, LIST_SCAN_MAX,
    PRIORITY_DEFAULT, TARGET_OVERHEAD_BYTES,
};
use hourglass_queue::retry::backoff_ms;
use hourglass_queue::DeadReason;
use hourglass_queue::Payload;
use hourglass_queue::Totals;
use hourglass_queue::{Arrival, QueueError};
use hourglass_queue::{Delivery, HttpTarget, Lease, Status, Task, TaskInfo, TaskState};
use queue::QueueState;
use ready::Place;
use slot::{Phase, Slot, NO_TIMER};
use slots::Slots;

/// What a task with a priority other than the default, or a lease of its
/// own, keeps in a side table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Terms {
    priority: u32,
    lease_ms: Option<u32>,
}

impl Terms {
    /// A task's terms, if it has any but the defaults.
    fn of(task: &Task) -> Option<Terms> {
        let terms = Terms { priority: task.priority, lease_ms: task.lease_ms };
        (terms != Terms::DEFAULT).then_some(terms)
    }

    const DEFAULT: Terms = Terms { priority: PRIORITY_DEFAULT, lease_ms: None };
}

/// A task's current lease.
#[derive(Debug, Clone, Copy)]
struct Leased {
    lease: Lease,
    until_ms: u64,
}

/// Everything the engine holds in memory, under its one lock.
pub(crate) struct State {
    tasks: Slots<Slot>,
    /// The period of each repeating task. (Tables keyed by task id use the
    /// Fx hash: ids are the engine's, not a client's.)
    repeats: FxHashMap<u64, u64>,
    /// When each task that expires does so (Unix ms).
    expiries: FxHashMap<u64, u64>,
    /// Dead tasks that died because they expired.
    dead_reasons: FxHashMap<u64, DeadReason>,
    /// The last error of each task that has one (a nack's reason, or a
    /// lease that expired).
    errors: FxHashMap<u64, Box<str>>,
    /// The priority and own lease of each task that has other than the
    /// defaults (beanstalkd's jobs all have a time-to-run).
    terms: FxHashMap<u64, Terms>,
    /// The HTTP target of each task that has one of its own: delivered by
    /// push. Never changes while the task lives.
    targets: FxHashMap<u64, Arc<HttpTarget>>,
    /// Woken when a task for push claims is filed due (in any queue), or a
    /// queue's flow control lets more through.
    push_notify: Arc<Notify>,
    queues: Vec<QueueState>,
    queue_index: HashMap<Arc<str>, u32>,
    leases: FxHashMap<u64, Leased>,
    /// The key of each task that has one.
    keys: FxHashMap<u64, Box<str>>,
    wheel: Wheel<NonZeroU64>,
    /// Never reused: persisted with every enqueue, so acked ids stay retired
    /// across restarts.
    next_id: u64,
    /// In the relaxed mode, the ids below this are stored as handed out
    /// ([`IDS_RESERVED_AHEAD`] ahead of `next_id`); `None` with every commit
    /// durable. See [`next_id_mutation`](State::next_id_mutation).
    ids_reserved: Option<u64>,
    /// Tasks whose enqueue is not yet durable (see [`Slot::fresh`]).
    fresh: usize,
    /// What the memory budget counts: [`task_memory_bytes`] of every task.
    memory_bytes: u64,
    /// What the disk budget counts: the [`footprint`] of every task.
    disk_bytes: u64,
    totals: Totals,
    schedules: ScheduleTable,
}

impl State {
    pub(crate) fn new(now_ms: u64) -> State {
        let mut wheel = Wheel::new();
        wheel.advance(now_ms);
        State {
            tasks: Slots::new(),
            repeats: FxHashMap::default(),
            expiries: FxHashMap::default(),
            dead_reasons: FxHashMap::default(),
            errors: FxHashMap::default(),
            terms: FxHashMap::default(),
            targets: FxHashMap::default(),
            push_notify: Arc::new(Notify::new()),
            queues: Vec::new(),
            queue_index: HashMap::new(),
            leases: FxHashMap::default(),
            keys: FxHashMap::default(),
            wheel,
            next_id: 1,
            ids_reserved: None,
            fresh: 0,
            memory_bytes: 0,
            disk_bytes: 0,
            totals: Totals::default(),
            schedules: ScheduleTable::default(),
        }
    }

    /// The queue of task `id`, which must exist.
    fn queue_of(&mut self, id: u64) -> &mut QueueState {
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
            dead_reason: self.dead_reasons.get(&id).copied().unwrap_or_default(),
            last_error: self.errors.get(&id).cloned(),
            http: self.targets.get(&id).cloned(),
            state,
            created_ms: slot.created_ms,
        }
    }

    /// A task's priority and own lease.
    fn terms(&self, id: u64) -> Terms {
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
        let status = Status::of(&task, now_ms);
        // A payload found damaged is not read again: it shows empty, on a
        // task dead with `DeadReason::Corrupt` that says why.
        let payload = if task.state == TaskState::Dead && task.dead_reason == DeadReason::Corrupt {
            Payload::default()
        } else {
            self.payload(task.id, reads, at)
        };
        TaskInfo { task, payload, status }
    }

    /// Task `id`'s payload for item `at` of an answer: a copy if it is kept
    /// in memory, else noted in `reads` to read from the store.
    fn payload(&self, id: u64, reads: &mut Reads, at: usize) -> Payload {
        reads.payload(self.tasks[&id].payload.as_deref(), id, at)
    }

    /// What a task of these sizes costs the budgets: (memory, disk) bytes.
    fn charges(sizes: Sizes) -> (u64, u64) {
        let target = if sizes.target > 0 { TARGET_OVERHEAD_BYTES + sizes.target as u64 } else { 0 };
        (task_memory_bytes(sizes.payload, sizes.key) + target, footprint(sizes))
    }

    /// How task `id` of queue `queue` is delivered: by push if it has a
    /// target of its own or its queue has one.
    fn delivery_of(&self, id: u64, queue: u32) -> Delivery {
        Delivery::of(self.targets.contains_key(&id), self.queues[queue as usize].settings.push.is_some())
    }

    /// Files a due task of `queue` where claims of its delivery find it,
    /// and wakes them.
    fn make_ready(&mut self, queue: u32, place: Place) {
        let delivery = self.delivery_of(place.id, queue);
        let q = &mut self.queues[queue as usize];
        q.ready.insert(place, delivery);
        match delivery {
            Delivery::Pull => q.notify.notify_waiters(),
            Delivery::Push => self.push_notify.notify_waiters(),
        }
    }

    /// The sizes of a stored task, read off its slot and the side tables
    /// without putting the task together.
    fn sizes(&self, id: u64) -> Sizes {
        let slot = &self.tasks[&id];
        Sizes {
            queue: self.queues[slot.queue as usize].name.len(),
            key: self.keys.get(&id).map(|key| key.len()),
            repeats: self.repeats.contains_key(&id),
            payload: slot.payload_bytes as usize,
            target: self.targets.get(&id).map_or(0, |target| target_bytes(target)),
        }
    }

    /// Stores a new task, pending and fresh: filed nowhere and not counted
    /// until [`reveal`](State::reveal). Its key is taken at once, so that a
    /// second enqueue with it waits. `payload` is `None` for a payload kept
    /// only in the store: one larger than
    /// [`PAYLOAD_INLINE_MAX`](hourglass_queue::limits::PAYLOAD_INLINE_MAX) bytes.
    fn insert(&mut self, task: &Task, payload: Option<Box<[u8]>>, payload_bytes: usize, queue: u32) {
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
        if let Some(target) = task.http.clone() {
            self.targets.insert(id, target);
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
    fn within_budgets(&self, limits: &Limits, memory_before: u64, disk_before: u64) -> Result<(), QueueError> {
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
    fn reveal(&mut self, id: u64, now_ms: u64) {
        let slot = self.tasks.get_mut(&id).expect("revealing a known task");
        debug_assert!(slot.pending, "task {id} revealed but not hidden");
        slot.pending = false;
        if std::mem::take(&mut slot.fresh) {
            self.fresh -= 1;
        }
        self.file(id, now_ms);
    }

    /// Copies what may change about a task into its slot and side tables.
    fn write_back(&mut self, task: &Task) {
        match task.every_ms {
            Some(every_ms) => self.repeats.insert(task.id, every_ms),
            None => self.repeats.remove(&task.id),
        };
        match task.expires_at_ms {
            Some(expires_at_ms) => self.expiries.insert(task.id, expires_at_ms),
            None => self.expiries.remove(&task.id),
        };
        if task.dead_reason != DeadReason::Attempts && task.state == TaskState::Dead {
            self.dead_reasons.insert(task.id, task.dead_reason);
        } else {
            self.dead_reasons.remove(&task.id);
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
    fn forget(&mut self, id: u64) -> bool {
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
        self.dead_reasons.remove(&id);
        self.targets.remove(&id);
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
            Phase::Scheduled => q.scheduled += 1,
            Phase::Leased => q.leased += 1,
            Phase::Dead => {
                q.dead.insert(id);
            }
        }
        if due {
            self.make_ready(queue, Place { priority, run_at_ms, id });
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
            Phase::Leased => {
                q.leased -= 1;
                if q.settings.flow.max_in_flight.is_some() {
                    // A slot is free: claims held back by the cap look again.
                    q.notify.notify_waiters();
                    self.push_notify.notify_waiters();
                }
            }
            Phase::Dead => {
                q.dead.remove(&id);
            }
        }
    }

    /// `Ok` if `lease` is the task's current one. The task must not be pending.
    pub(crate) fn check_lease(&self, id: u64, lease: Lease) -> Result<(), QueueError> {
        match self.leases.get(&id) {
            Some(leased) if leased.lease == lease => Ok(()),
            _ if self.tasks.get(&id).is_none() => Err(QueueError::NotFound(id)),
            _ => Err(QueueError::StaleLease(id)),
        }
    }

    /// Whether task `id` is leased.
    pub(crate) fn is_leased(&self, id: u64) -> bool {
        self.leases.contains_key(&id)
    }

    /// The period of task `id`, if it repeats.
    pub(crate) fn every_ms(&self, id: u64) -> Option<u64> {
        self.repeats.get(&id).copied()
    }

    /// A task loaded from the store at a start, filed as it is at `now_ms`
    /// (leases do not survive a restart: the store holds none). The payload
    /// is kept in memory if it is small enough, whatever the store handed over.
    ///
    /// # Errors
    /// [`QueueError::Invalid`] if its queue would be one too many.
    pub(crate) fn load_task(&mut self, task: &Task, payload: Loaded, now_ms: u64) -> Result<(), QueueError> {
        let queue = self.queue_id(&task.queue)?;
        let (held, bytes) = match payload {
            Loaded::Inline(payload) => {
                let bytes = payload.len();
                (payload_inline(bytes).then_some(payload), bytes)
            }
            Loaded::Apart(bytes) => (None, bytes),
        };
        self.insert(task, held, bytes, queue);
        self.reveal(task.id, now_ms);
        Ok(())
    }

    /// Ids below `next_id` were handed out before a restart: never again.
    pub(crate) fn retire_ids_below(&mut self, next_id: u64) {
        self.next_id = self.next_id.max(next_id);
    }

    /// The relaxed mode: ids are stored [`IDS_RESERVED_AHEAD`] ahead of those
    /// handed out (see [`next_id_mutation`](State::next_id_mutation)).
    pub(crate) fn reserve_ids_ahead(&mut self) {
        self.ids_reserved = Some(self.next_id);
    }

    /// The [`Mutation::NextId`] written with the ids handed out so far: ids
    /// below it are never handed out again. With every commit durable, the
    /// next id itself. In the relaxed mode a crash loses the last interval's
    /// commits, and with them the next id they wrote: the ids of the tasks
    /// lost would be given again, to other tasks, while a client may still
    /// hold them. So there it is a reserve ahead of the ids handed out,
    /// raised by [`IDS_RESERVED_AHEAD`] when they reach it, and the writer
    /// makes a commit that raises the stored one durable before its answer
    /// (`store::committer`): one fsync in 65,536 ids. A restart then skips
    /// to the reserve.
    pub(crate) fn next_id_mutation(&mut self) -> Mutation {
        match &mut self.ids_reserved {
            None => Mutation::NextId(self.next_id),
            Some(reserved) => {
                if self.next_id > *reserved {
                    *reserved = self.next_id + IDS_RESERVED_AHEAD;
                }
                Mutation::NextId(*reserved)
            }
        }
    }
}

/// How far ahead of the ids handed out the relaxed mode stores its next id:
/// fewer than a listing page walks, so the ids a restart skips cost a
/// listing at most one page with nothing on it.
const IDS_RESERVED_AHEAD: u64 = 1 << 16;
const _: () = assert!(IDS_RESERVED_AHEAD < LIST_SCAN_MAX as u64);

/// The last error of a task whose lease ran out.
const LEASE_EXPIRED: &str = "lease expired";

/// A delivery failed at `at`: due again `delay_ms` or a backoff after it
/// (never early: [`Arrival::after_ms`]), or dead if out of attempts or
/// past its expiry.
pub(crate) fn fail_attempt(task: &mut Task, at: Arrival, delay_ms: Option<u64>) {
    let now_ms = at.ms();
    let unlimited = task.max_attempts == ATTEMPTS_UNLIMITED;
    if task.expires_at_ms.is_some_and(|at| at <= now_ms) {
        task.state = TaskState::Dead;
        task.dead_reason = DeadReason::Expired;
    } else if !unlimited && task.attempt >= task.max_attempts {
        task.state = TaskState::Dead;
    } else {
        task.state = TaskState::Scheduled;
        let backoff = || if unlimited { 0 } else { backoff_ms(task.attempt) };
        task.run_at_ms = at.after_ms(delay_ms.unwrap_or_else(backoff));
    }
}
