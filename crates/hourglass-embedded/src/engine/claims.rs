//! Claims and takes: tasks handed out under a lease, recorded without
//! waiting (losing the record in a crash only delivers the task again, which
//! at-least-once allows). A claim waits for a task through the contract's
//! one long-poll ([`long_poll`]): each look takes the lock once.

use std::time::Duration;

use hourglass_queue::long_poll::{long_poll, Look};
use hourglass_queue::validate;
use hourglass_queue::{Claim, Claimed, Delivery, QueueError};

use super::reads::Reads;
use super::requests::Access;
use super::Engine;

impl Engine {
    /// Claims up to `max` due tasks from the one of `queues` whose next
    /// task comes first in claim order; waits up to `wait_ms` for one.
    pub(crate) async fn claim_tasks(&self, claim: Claim<'_>) -> Result<Vec<Claimed>, QueueError> {
        let wait = Duration::from_millis(claim.wait_ms());
        long_poll(wait, || async move {
            self.committer.admit().await;
            self.look(claim)
        })
        .await
    }

    /// One look under the lock: claims from the queue whose next task comes
    /// first, or says what to wait for.
    fn look(&self, claim: Claim<'_>) -> Result<Look<Claimed>, QueueError> {
        let mut state = self.shared.state.lock();
        if self.closed.is_closed() {
            return Ok(Look::Closed);
        }
        let delivery = claim.delivery();
        let ids = match delivery {
            Delivery::Pull => {
                let queues = claim.queues();
                // A claim that will not wait needs no state for a queue never used.
                if claim.wait_ms() == 0 && queues.iter().all(|queue| state.queue_id_of(queue).is_none()) {
                    return Ok(Look::Nothing { wake_on: Vec::new(), look_again_in: None });
                }
                queues.iter().map(|queue| state.queue_id(queue)).collect::<Result<Vec<u32>, _>>()?
            }
            Delivery::Push => state.push_queues(),
        };
        let now_us = self.clock.now_us();
        let now_ms = now_us / 1_000;
        let mut reads = Reads::new();
        let mut claimed = Vec::new();
        let mut updates = Vec::new();
        // A pull claim takes from one queue; a push claim from each in turn
        // until it has its fill.
        while claimed.len() < claim.max() {
            let Some(queue) = state.first_claimable(&ids, now_ms, delivery) else { break };
            let before = claimed.len();
            let more = claim.max() - before;
            updates.extend(state.claim(queue, more, now_us, claim.lease_ms(), delivery, &mut claimed, &mut reads));
            if delivery == Delivery::Pull || claimed.len() == before {
                break;
            }
        }
        if claimed.is_empty() {
            // A pause that ends by itself, or a token that refills, wakes nobody: look again then.
            let look_again_in = state.look_again_in_ms(&ids, now_ms, delivery).map(Duration::from_millis);
            return Ok(Look::Nothing { wake_on: state.wake_on(&ids, delivery), look_again_in });
        }
        // Sent under the lock, in order.
        self.committer.record(updates);
        state.debug_check();
        // If the payloads cannot be read, the tasks stay leased and are
        // delivered again when the lease runs out.
        let snapshot = reads.snapshot(&*self.store);
        drop(state);
        // The timer thread sleeps to its next deadline: woken only for an earlier one.
        if let Some(first_ms) = claimed.iter().map(|claimed| claimed.lease_until_ms).min() {
            self.shared.wake_timers_for(first_ms);
        }
        snapshot?;
        reads.read(|at, payload| claimed[at].payload = payload)?;
        Ok(Look::Found(claimed))
    }

    /// Leases task `id` whatever its place, for `lease_ms` unless it has a
    /// lease of its own (beanstalkd's `reserve-job`).
    pub(crate) async fn take_task(&self, id: u64, lease_ms: u64) -> Result<Claimed, QueueError> {
        validate::lease(lease_ms)?;
        let (mut claimed, reads) = self
            .on_task(Access::Write, id, |state, id| {
                let mut reads = Reads::new();
                let (claimed, record) = state.take(id, self.clock.now_ms(), lease_ms, &mut reads)?;
                reads.snapshot(&*self.store)?;
                // Recorded without waiting, like any claim.
                self.committer.record(vec![record]);
                Ok(((claimed, reads), None))
            })
            .await?;
        // The timer thread sleeps to its next deadline: woken only for an earlier one.
        self.shared.wake_timers_for(claimed.lease_until_ms);
        reads.read(|_, payload| claimed.payload = payload)?;
        Ok(claimed)
    }
}
