//! Handing tasks out: a claim leases the first due tasks of a queue in
//! claim order, a take leases one task by id; both under the lock, recorded
//! without waiting (see the engine's module doc).

use std::sync::Arc;

use tokio::sync::Notify;

use super::ready::Place;
use super::State;
use crate::engine::reads::Reads;
use crate::store::Mutation;
use hourglass_queue::limits::ANSWER_PAYLOAD_BYTES_MAX;
use hourglass_queue::{Claimed, Lease, QueueError, Task, TaskState};

impl State {
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
                payload: reads.payload(self.tasks[&id].payload.as_deref(), id, claimed.len()),
                attempt: task.attempt,
                lease,
                lease_until_ms: until_ms,
                run_at_ms,
                target: None,
            });
            updates.push(Mutation::Update(task));
        }
        self.totals.delivered += claimed.len() as u64;
        (claimed, updates)
    }

    /// Hands filed task `id` out under a new lease, for its own length if it
    /// has one, else `lease_ms`: one more attempt. Returns the task as it now
    /// is, the lease and its end.
    fn lease(&mut self, id: u64, now_ms: u64, lease_ms: u64) -> (Task, Lease, u64) {
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
    fn next_claimable(&self, queue: u32, now_ms: u64) -> Option<Place> {
        let q = &self.queues[queue as usize];
        if q.is_paused(now_ms) {
            return None;
        }
        let expired = |id: &u64| self.expiries.get(id).is_some_and(|&at| at <= now_ms);
        q.ready.iter().find(|place| !expired(&place.id)).copied()
    }

    /// Of `queues`, the one whose next task comes first in claim order, if
    /// any has one at `now_ms`.
    pub(crate) fn first_claimable(&self, queues: &[u32], now_ms: u64) -> Option<u32> {
        let first = queues.iter().filter_map(|&id| self.next_claimable(id, now_ms).map(|next| (next, id)));
        first.min().map(|(_, queue)| queue)
    }

    /// What wakes a claim waiting on `queues`: a task filed due in one of them.
    pub(crate) fn wake_on(&self, queues: &[u32]) -> Vec<Arc<Notify>> {
        queues.iter().map(|&id| self.queues[id as usize].notify.clone()).collect()
    }

    /// How long until the first of `queues` paused until a time resumes by
    /// itself (which notifies nobody), if any is paused so at `now_ms`.
    pub(crate) fn first_resume_in_ms(&self, queues: &[u32], now_ms: u64) -> Option<u64> {
        let ends = queues.iter().filter_map(|&id| {
            let q = &self.queues[id as usize];
            q.paused_until_ms.filter(|_| q.is_paused(now_ms)).map(|until_ms| until_ms - now_ms)
        });
        ends.min()
    }

    /// Task `id` under a new lease, as [`lease`](State::lease) makes it, with
    /// its payload for item `at` of an answer (noted in `reads` if kept in the
    /// store); refused if it is leased already. Returns the task as handed
    /// out and the record to write (without waiting, like any claim).
    pub(crate) fn take(
        &mut self,
        id: u64,
        now_ms: u64,
        lease_ms: u64,
        reads: &mut Reads,
    ) -> Result<(Claimed, Mutation), QueueError> {
        if self.leases.contains_key(&id) {
            return Err(QueueError::Conflict(format!("task {id} is leased")));
        }
        let (task, lease, until_ms) = self.lease(id, now_ms, lease_ms);
        let payload = reads.payload(self.tasks[&id].payload.as_deref(), id, 0);
        let claimed = Claimed {
            id,
            queue: task.queue.clone(),
            payload,
            attempt: task.attempt,
            lease,
            lease_until_ms: until_ms,
            run_at_ms: task.run_at_ms,
            target: None,
        };
        Ok((claimed, Mutation::Update(task)))
    }
}
