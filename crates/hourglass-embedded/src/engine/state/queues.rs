//! The state's queues as a whole: names to indexes, pauses, dead sets, and
//! the counts read off them.

use std::sync::Arc;

use super::queue::QueueState;
use super::State;
use hourglass_queue::lateness::Lateness;
use hourglass_queue::limits::{Limits, QUEUES_MAX};
use hourglass_queue::QueueError;
use hourglass_queue::{QueueStats, Totals};

/// What a pause or resume of a queue comes to under the lock.
pub(crate) enum Pausing {
    /// Another pause or resume of the queue is on its way: wait for it.
    Wait,
    /// The queue is already as asked: its counts, nothing to write.
    Unchanged((QueueStats, Lateness)),
    /// Marked as pausing (another waits for it to settle): the counts as
    /// they will read once the change is settled.
    Started((QueueStats, Lateness)),
}

impl State {
    /// The index of `queue`, creating its state if new.
    ///
    /// # Errors
    /// [`QueueError::Invalid`] if there are [`QUEUES_MAX`] queues already.
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

    /// The index of `queue`, if it has state.
    pub(crate) fn queue_id_of(&self, queue: &str) -> Option<u32> {
        self.queue_index.get(queue).copied()
    }

    /// The live task of `queue` that holds idempotency key `key`, if any.
    pub(crate) fn key_holder(&self, queue: &str, key: &str) -> Option<u64> {
        let queue = self.queue_id_of(queue)?;
        self.queues[queue as usize].keys.get(key).copied()
    }

    /// The counts of the queue named `name`, with its lateness still to read
    /// once the lock is released; `None` if it has no state.
    pub(crate) fn queue_stats(&self, name: &str, now_ms: u64) -> Option<(QueueStats, Lateness)> {
        self.queue_id_of(name).map(|id| self.queues[id as usize].stats(now_ms))
    }

    /// The counts of every queue, as [`queue_stats`](State::queue_stats).
    pub(crate) fn all_queue_stats(&self, now_ms: u64) -> Vec<(QueueStats, Lateness)> {
        self.queues.iter().map(|q| q.stats(now_ms)).collect()
    }

    /// The engine's totals: its counters since start, and what it holds
    /// against the budgets in `limits`.
    pub(crate) fn totals(&self, limits: &Limits) -> Totals {
        Totals {
            tasks: self.held(),
            schedules: self.schedules.stored(),
            memory_bytes: self.memory_bytes + self.schedules.memory_bytes(),
            memory_bytes_max: Some(limits.memory_bytes_max),
            disk_bytes: self.disk_bytes,
            disk_bytes_max: limits.disk_bytes_max,
            ..self.totals
        }
    }

    /// Begins pausing (`paused`, until `until_ms` if given) or resuming
    /// queue `queue`, read at `now_ms`: see [`Pausing`]. Settled by
    /// [`Settlement::PauseQueue`](crate::engine::settlement::Settlement::PauseQueue).
    pub(crate) fn begin_pause(&mut self, queue: u32, paused: bool, until_ms: Option<u64>, now_ms: u64) -> Pausing {
        let q = &mut self.queues[queue as usize];
        if q.pausing {
            return Pausing::Wait;
        }
        let mut answer = q.stats(now_ms);
        if q.paused == paused && (!paused || q.paused_until_ms == until_ms) {
            return Pausing::Unchanged(answer);
        }
        q.pausing = true;
        answer.0.paused = hourglass_queue::paused_at(paused, until_ms, now_ms);
        answer.0.paused_until_ms = until_ms.filter(|_| answer.0.paused);
        Pausing::Started(answer)
    }

    /// A queue paused (until `until_ms` if given) as loaded from the store
    /// at a start.
    ///
    /// # Errors
    /// [`QueueError::Invalid`] if it would be one queue too many.
    pub(crate) fn load_pause(&mut self, queue: &str, until_ms: Option<u64>) -> Result<(), QueueError> {
        let queue = self.queue_id(queue)?;
        let q = &mut self.queues[queue as usize];
        q.paused = true;
        q.paused_until_ms = until_ms;
        Ok(())
    }

    /// Up to `max` of the dead tasks of the queue named `queue`, by id. The
    /// dead set holds settled tasks only: a pending one is filed nowhere.
    pub(crate) fn dead(&self, queue: &str, max: usize) -> Vec<u64> {
        match self.queue_id_of(queue) {
            Some(queue) => self.queues[queue as usize].dead.iter().take(max).copied().collect(),
            None => Vec::new(),
        }
    }

    /// Wakes every claim waiting on any queue: the engine is closing.
    pub(crate) fn wake_all_claims(&self) {
        for queue in &self.queues {
            queue.notify.notify_waiters();
        }
    }
}
