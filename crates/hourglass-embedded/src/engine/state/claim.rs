//! Handing tasks out: a claim leases the first due tasks of a queue in
//! claim order, those its delivery (pull or push) takes and its flow
//! control allows; a take leases one task by id; both under the lock,
//! recorded without waiting (see the engine's module doc).

use std::sync::Arc;

use tokio::sync::Notify;

use super::ready::Place;
use super::State;
use crate::engine::reads::Reads;
use crate::store::Mutation;
use hourglass_queue::limits::ANSWER_PAYLOAD_BYTES_MAX;
use hourglass_queue::{Claimed, Delivery, Lease, PushTarget, QueueError, Task, TaskState};

/// How long a task handed out is leased for.
#[derive(Debug, Clone, Copy)]
enum LeaseFor {
    /// The claim's lease, unless the task has its own.
    Claim(u64),
    /// Exactly this long: a push delivery's timeout and margin.
    Exactly(u64),
}

impl State {
    /// Leases up to `max` due tasks of `queue` delivered as `delivery` says,
    /// no more than its flow control allows (each pull task for its own
    /// lease if it has one, else for `lease_ms`; each push task for its
    /// target's), with at most [`ANSWER_PAYLOAD_BYTES_MAX`] of payloads among
    /// them (at least one task); appends them to `claimed`, their payloads
    /// still to read noted in `reads`, and returns what must be recorded (the
    /// new attempt counts, never the payloads).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn claim(
        &mut self,
        queue: u32,
        max: usize,
        now_us: u64,
        lease_ms: u64,
        delivery: Delivery,
        claimed: &mut Vec<Claimed>,
        reads: &mut Reads,
    ) -> Vec<Mutation> {
        let now_ms = now_us / 1_000;
        let mut updates = Vec::new();
        let q = &self.queues[queue as usize];
        if q.is_paused(now_ms) {
            return updates;
        }
        let max = max.min(q.allowance(now_ms));
        let mut bytes = 0;
        // Due tasks past their expiry stay for the timer thread, which makes
        // them dead: never delivered late.
        let mut unexpired = Vec::new();
        if !self.expiries.is_empty() {
            let ready = self.queues[queue as usize].ready.iter(delivery);
            let expired = |id: &u64| self.expiries.get(id).is_some_and(|&at| at <= now_ms);
            unexpired.extend(ready.filter(|place| !expired(&place.id)).take(max).copied());
            unexpired.reverse();
        }
        let first = claimed.len();
        while claimed.len() - first < max {
            let next = if self.expiries.is_empty() {
                self.queues[queue as usize].ready.first(delivery)
            } else {
                unexpired.pop()
            };
            let Some(Place { run_at_ms, id, .. }) = next else { break };
            bytes += self.tasks[&id].payload_bytes as usize;
            if bytes > ANSWER_PAYLOAD_BYTES_MAX && claimed.len() > first {
                break;
            }
            let target = match delivery {
                Delivery::Pull => None,
                Delivery::Push => PushTarget::resolve(self.targets.get(&id), self.push_target(queue)),
            };
            let lease_for = match &target {
                Some(target) => LeaseFor::Exactly(target.lease_ms()),
                None => LeaseFor::Claim(lease_ms),
            };
            let (task, lease, until_ms) = self.lease(id, now_ms, lease_for);
            self.queues[queue as usize].delivered(now_us.saturating_sub(run_at_ms * 1_000));
            let at = claimed.len();
            claimed.push(Claimed {
                id,
                queue: task.queue.clone(),
                payload: reads.payload(self.tasks[&id].payload.as_deref(), id, at),
                attempt: task.attempt,
                lease,
                lease_until_ms: until_ms,
                run_at_ms,
                target,
            });
            updates.push(Mutation::Update(task));
        }
        let taken = claimed.len() - first;
        if let Some(bucket) = &mut self.queues[queue as usize].bucket {
            bucket.take(taken, now_ms);
        }
        self.totals.delivered += taken as u64;
        updates
    }

    /// Hands filed task `id` out under a new lease as `lease_for` says: one
    /// more attempt. Returns the task as it now is, the lease and its end.
    fn lease(&mut self, id: u64, now_ms: u64, lease_for: LeaseFor) -> (Task, Lease, u64) {
        let lease = Lease(rand::random());
        let lease_ms = match lease_for {
            LeaseFor::Claim(lease_ms) => self.terms(id).lease_ms.map_or(lease_ms, u64::from),
            LeaseFor::Exactly(lease_ms) => lease_ms,
        };
        let until_ms = now_ms + lease_ms;
        let task = self.transition(id, now_ms, |task| {
            task.attempt += 1;
            task.state = TaskState::Leased { lease, until_ms };
        });
        (task, lease, until_ms)
    }

    /// The task a claim of `queue` for `delivery` at `now_ms` would take
    /// first, if any: none if the queue is paused or its flow control holds
    /// claims back; never one due but past its expiry (those wait for the
    /// timer thread to make them dead).
    fn next_claimable(&self, queue: u32, now_ms: u64, delivery: Delivery) -> Option<Place> {
        let q = &self.queues[queue as usize];
        if q.is_paused(now_ms) || q.ready.len_of(delivery) == 0 || q.allowance(now_ms) == 0 {
            return None;
        }
        let expired = |id: &u64| self.expiries.get(id).is_some_and(|&at| at <= now_ms);
        q.ready.iter(delivery).find(|place| !expired(&place.id)).copied()
    }

    /// Of `queues`, the one whose next task for `delivery` comes first in
    /// claim order, if any has one at `now_ms`.
    pub(crate) fn first_claimable(&self, queues: &[u32], now_ms: u64, delivery: Delivery) -> Option<u32> {
        let first = queues.iter().filter_map(|&id| self.next_claimable(id, now_ms, delivery).map(|next| (next, id)));
        first.min().map(|(_, queue)| queue)
    }

    /// The queues with tasks due for push claims: those a push claim looks at.
    pub(crate) fn push_queues(&self) -> Vec<u32> {
        let pushing = self.queues.iter().enumerate().filter(|(_, q)| q.ready.len_of(Delivery::Push) > 0);
        pushing.map(|(id, _)| id as u32).collect()
    }

    /// What wakes a claim for `delivery` waiting on `queues`: a task filed
    /// due for it, or a slot freed under a cap, in one of them (in any
    /// queue, for push).
    pub(crate) fn wake_on(&self, queues: &[u32], delivery: Delivery) -> Vec<Arc<Notify>> {
        match delivery {
            Delivery::Pull => queues.iter().map(|&id| self.queues[id as usize].notify.clone()).collect(),
            Delivery::Push => vec![self.push_notify.clone()],
        }
    }

    /// How long until a claim for `delivery` of `queues` may find what
    /// notifies nobody: the first pause until a time ending by itself, or a
    /// token for a queue whose due tasks wait for its rate.
    pub(crate) fn look_again_in_ms(&self, queues: &[u32], now_ms: u64, delivery: Delivery) -> Option<u64> {
        let ends = queues.iter().filter_map(|&id| {
            let q = &self.queues[id as usize];
            if q.is_paused(now_ms) {
                q.paused_until_ms.map(|until_ms| until_ms - now_ms)
            } else if q.ready.len_of(delivery) > 0 {
                q.next_token_in_ms(now_ms)
            } else {
                None
            }
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
        let (task, lease, until_ms) = self.lease(id, now_ms, LeaseFor::Claim(lease_ms));
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
