//! The engine's invariants, checked in one place: after every operation in
//! debug builds (while the engine is small enough for a full walk to be
//! cheap), and by the crash simulator after every step.

use std::collections::HashMap;

use hourglass::Key;

use super::ready::Place;
use super::slot::{Phase, NO_TIMER};
use super::State;
use crate::store::{target_bytes, Sizes};
use hourglass_queue::limits::{error_bytes, payload_inline, terms_bytes, ATTEMPTS_UNLIMITED, PAYLOAD_INLINE_MAX};

/// Above this many tasks, debug builds stop walking the whole state after
/// every operation (the simulator still does).
pub(crate) const CHECK_AFTER_EVERY_OP_TASKS_MAX: usize = 2_000;

impl State {
    /// Verifies every cross-table invariant; the message names the first one
    /// broken and the task or queue.
    pub(crate) fn check(&self) -> Result<(), String> {
        let mut counts: HashMap<u32, (usize, usize, usize, usize)> = HashMap::new();
        let mut timers = 0;
        let mut fresh = 0;
        let (mut memory, mut disk) = (0, 0);
        for id in self.tasks.ids() {
            let slot = &self.tasks[&id];
            let sizes = self.sizes(id);
            if sizes != Sizes::of(&self.task(id), sizes.payload) {
                return Err(format!("task {id}: its sizes {sizes:?} disagree with the task"));
            }
            let (task_memory, task_disk) = State::charges(sizes);
            let (error_memory, error_disk) = self.errors.get(&id).map_or((0, 0), |error| error_bytes(error.len()));
            let (terms_memory, terms_disk) = if self.terms.contains_key(&id) { terms_bytes() } else { (0, 0) };
            if sizes.target != self.targets.get(&id).map_or(0, |target| target_bytes(target)) {
                return Err(format!("task {id}: its target's size disagrees with the target table"));
            }
            memory += task_memory + error_memory + terms_memory;
            disk += task_disk + error_disk + terms_disk;
            let held = slot.payload.as_ref().map(|payload| payload.len());
            if held.is_some() != payload_inline(slot.payload_bytes as usize)
                || held.is_some_and(|len| len != slot.payload_bytes as usize)
            {
                return Err(format!(
                    "task {id}: payload of {} bytes, {held:?} held in memory (inline up to {PAYLOAD_INLINE_MAX})",
                    slot.payload_bytes
                ));
            }
            let queue =
                self.queues.get(slot.queue as usize).ok_or_else(|| format!("task {id}: no queue {}", slot.queue))?;
            if id >= self.next_id {
                return Err(format!("task {id} is not below next_id {}", self.next_id));
            }
            if slot.keyed != self.keys.contains_key(&id) {
                return Err(format!("task {id}: keyed is {} but the key table disagrees", slot.keyed));
            }
            if let Some(key) = self.keys.get(&id) {
                if queue.keys.get(key) != Some(&id) {
                    return Err(format!("task {id}: its key {key:?} does not lead back to it"));
                }
            }
            if (slot.phase == Phase::Leased) != self.leases.contains_key(&id) {
                return Err(format!(
                    "task {id}: phase {:?} but a lease is {}",
                    slot.phase,
                    if self.leases.contains_key(&id) { "held" } else { "missing" }
                ));
            }
            if slot.max_attempts != ATTEMPTS_UNLIMITED as u16 && slot.attempt > slot.max_attempts {
                return Err(format!("task {id}: attempt {} past max_attempts {}", slot.attempt, slot.max_attempts));
            }
            let filed_as =
                queue.ready.contains(&Place { priority: self.terms(id).priority, run_at_ms: slot.run_at_ms, id });
            let ready = filed_as.is_some();
            if let Some(filed_as) = filed_as.filter(|&filed_as| filed_as != self.delivery_of(id, slot.queue)) {
                return Err(format!("task {id}: due for {filed_as:?} claims, but it is not delivered so"));
            }
            let dead = queue.dead.contains(&id);
            if slot.timer != NO_TIMER {
                timers += 1;
                if self.wheel.get(Key::from_raw(slot.timer)).map(|v| v.get()) != Some(id) {
                    return Err(format!("task {id}: its timer is not in the wheel"));
                }
            }
            if slot.fresh {
                fresh += 1;
                if !slot.pending {
                    return Err(format!("task {id} is fresh (its enqueue not durable) but not pending"));
                }
            }
            if slot.pending {
                if slot.timer != NO_TIMER || ready || dead {
                    return Err(format!("task {id} is pending but filed (timer, ready {ready}, dead {dead})"));
                }
                continue;
            }
            let count = counts.entry(slot.queue).or_default();
            match slot.phase {
                Phase::Scheduled => {
                    count.0 += 1;
                    count.3 += usize::from(ready);
                    // Waiting, it is timed by its due time; due (ready), by its expiry if it has one.
                    let expires_at_ms = self.expiries.get(&id).copied();
                    let timed_by = if ready { expires_at_ms } else { Some(slot.run_at_ms) };
                    let deadline =
                        (slot.timer != NO_TIMER).then(|| self.wheel.deadline(Key::from_raw(slot.timer))).flatten();
                    if deadline != timed_by || dead {
                        return Err(format!(
                            "task {id}: scheduled, ready {ready}, timer at {deadline:?}, due at {}, expires at {expires_at_ms:?}",
                            slot.run_at_ms
                        ));
                    }
                }
                Phase::Leased => {
                    count.1 += 1;
                    let until_ms = self.leases[&id].until_ms;
                    if ready || dead || self.wheel.deadline(Key::from_raw(slot.timer)) != Some(until_ms) {
                        return Err(format!("task {id}: leased until {until_ms} but not timed by it alone"));
                    }
                }
                Phase::Dead => {
                    count.2 += 1;
                    if ready || slot.timer != NO_TIMER || !dead {
                        return Err(format!("task {id}: dead, ready {ready}, in the dead set {dead}"));
                    }
                }
            }
        }
        if fresh != self.fresh {
            return Err(format!("{fresh} fresh tasks, {} counted", self.fresh));
        }
        if (memory, disk) != (self.memory_bytes, self.disk_bytes) {
            return Err(format!(
                "tasks charge {memory} bytes of memory and {disk} of disk; counted {} and {}",
                self.memory_bytes, self.disk_bytes
            ));
        }
        if timers != self.wheel.len() {
            return Err(format!("{} wheel entries for {timers} task timers", self.wheel.len()));
        }
        for (index, queue) in self.queues.iter().enumerate() {
            let (scheduled, leased, dead, ready) = counts.get(&(index as u32)).copied().unwrap_or_default();
            let counted = (queue.scheduled, queue.leased, queue.dead.len(), queue.ready.len());
            if counted != (scheduled, leased, dead, ready) {
                return Err(format!(
                    "queue {}: counts (scheduled, leased, dead, ready) {counted:?}, tasks say {:?}",
                    queue.name,
                    (scheduled, leased, dead, ready)
                ));
            }
            if self.queue_index.get(&queue.name) != Some(&(index as u32)) {
                return Err(format!("queue {} is not indexed by its name", queue.name));
            }
            for (key, id) in &queue.keys {
                if self.keys.get(id).map(|k| &**k) != Some(&**key) {
                    return Err(format!("queue {}: key {key:?} names task {id}, which does not have it", queue.name));
                }
            }
        }
        let side = self
            .leases
            .keys()
            .chain(self.repeats.keys())
            .chain(self.expiries.keys())
            .chain(self.dead_reasons.keys())
            .chain(self.errors.keys())
            .chain(self.targets.keys());
        if let Some(id) = side.clone().find(|id| self.tasks.get(id).is_none()) {
            return Err(format!("a side table names task {id}, which does not exist"));
        }
        if let Some(id) = self.dead_reasons.keys().find(|id| self.tasks[id].phase != Phase::Dead) {
            return Err(format!("task {id} has a reason it died but is not dead"));
        }
        self.schedules.check()
    }

    /// [`check`](State::check) in debug builds, while the state is small;
    /// panics with the broken invariant.
    #[inline]
    pub(crate) fn debug_check(&self) {
        if cfg!(debug_assertions) && self.tasks.len() <= CHECK_AFTER_EVERY_OP_TASKS_MAX {
            if let Err(broken) = self.check() {
                panic!("engine invariant broken: {broken}");
            }
        }
    }
}
