//! Claims and takes: tasks handed out under a lease, recorded without
//! waiting (losing the record in a crash only delivers the task again, which
//! at-least-once allows). A claim waits for a task through the contract's
//! one long-poll ([`long_poll`]): each look takes the lock once.

use std::time::Duration;

use hourglass_queue::long_poll::{long_poll, Look};
use hourglass_queue::validate;
use hourglass_queue::{Claim, Claimed, DeadReason, Delivery, QueueError, TaskState};

use super::reads::{Damaged, Reads};
use super::requests::Access;
use super::settlement::{Settlement, Why};
use super::Engine;
use crate::store::Mutation;
use hourglass_queue::limits::NACK_REASON_BYTES_MAX;

impl Engine {
    /// Claims up to `max` due tasks from the one of `queues` whose next
    /// task comes first in claim order; waits up to `wait_ms` for one.
    pub(crate) async fn claim_tasks(&self, claim: Claim<'_>) -> Result<Vec<Claimed>, QueueError> {
        let wait = Duration::from_millis(claim.wait_ms());
        long_poll(wait, || async move {
            // Each look that found only damaged payloads made those tasks
            // dead, so that the next finds others, or nothing; each waits
            // for room at the writer, as the first did.
            loop {
                self.committer.admit().await;
                if let Some(look) = self.look(claim)? {
                    return Ok(look);
                }
            }
        })
        .await
    }

    /// One look under the lock: claims from the queue whose next task comes
    /// first, or says what to wait for; `None` if every task it claimed had
    /// a damaged payload (those are dead now).
    fn look(&self, claim: Claim<'_>) -> Result<Option<Look<Claimed>>, QueueError> {
        let mut state = self.shared.state.lock();
        if self.closed.is_closed() {
            return Ok(Some(Look::Closed));
        }
        let delivery = claim.delivery();
        let ids = match delivery {
            Delivery::Pull => {
                let queues = claim.queues();
                // A claim that will not wait needs no state for a queue never used.
                if claim.wait_ms() == 0 && queues.iter().all(|queue| state.queue_id_of(queue).is_none()) {
                    return Ok(Some(Look::Nothing { wake_on: Vec::new(), look_again_in: None }));
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
            return Ok(Some(Look::Nothing { wake_on: state.wake_on(&ids, delivery), look_again_in }));
        }
        // Sent under the lock, in order.
        self.committer.record(updates);
        state.debug_check();
        // If the payloads cannot be read, the tasks stay leased and are
        // delivered again when the lease runs out; a damaged one is dead.
        let snapshot = reads.snapshot(&*self.store);
        drop(state);
        self.committer.help();
        // The timer thread sleeps to its next deadline: woken only for an earlier one.
        if let Some(first_ms) = claimed.iter().map(|claimed| claimed.lease_until_ms).min() {
            self.shared.wake_timers_for(first_ms);
        }
        snapshot?;
        let damaged = reads.read_sound(|at, payload| claimed[at].payload = payload)?;
        self.bury_damaged(&mut claimed, damaged);
        Ok((!claimed.is_empty()).then_some(Look::Found(claimed)))
    }

    /// Tasks of `claimed` whose payloads were found `damaged` as they were
    /// handed out: left out of the answer and dead at once, `corrupt`, with a
    /// log line, where delivering them again would find the same damage
    /// until their attempts ran out. Recorded without waiting, as the claim
    /// was: lost in a crash, the damage is found again at the next delivery.
    fn bury_damaged(&self, claimed: &mut Vec<Claimed>, mut damaged: Vec<Damaged>) {
        if damaged.is_empty() {
            return;
        }
        let mut state = self.shared.state.lock();
        // Last first, so that each position still names its task.
        damaged.sort_by_key(|damaged| std::cmp::Reverse(damaged.at));
        for damaged in damaged {
            let (id, error) = (damaged.id, damaged.error());
            let gone = claimed.remove(damaged.at);
            // A lease already over, or a change of it under way, leaves the
            // task to that: its next delivery finds the damage again.
            if state.check_lease(id, gone.lease).is_err() || state.pending(id) != Some(false) {
                tracing::error!(task = id, queue = %gone.queue, %error, "a payload was found damaged as it was handed out: not delivered");
                continue;
            }
            tracing::error!(task = id, queue = %gone.queue, %error, "a payload was found damaged as it was handed out: the task is dead (dead_reason corrupt), not delivered");
            let mut task = state.task(id);
            task.state = TaskState::Dead;
            task.dead_reason = DeadReason::Corrupt;
            let last_error = format!("corrupt payload: {}", damaged.reason);
            task.last_error = Some(truncated(&last_error, NACK_REASON_BYTES_MAX).into());
            state.hide(id);
            // If the writer is gone, the store keeps the lease: a restart
            // makes the task due, and its next claim finds the damage again.
            let _ = self.send(
                &mut state,
                vec![Mutation::Update(task.clone())],
                Settlement::Change { task, why: Why::Corrupt },
            );
        }
        drop(state);
        self.committer.help();
    }

    /// Leases task `id` whatever its place, for `lease_ms` unless it has a
    /// lease of its own (beanstalkd's `reserve-job`).
    pub(crate) async fn take_task(&self, id: u64, lease_ms: u64) -> Result<Claimed, QueueError> {
        validate::lease(lease_ms)?;
        let (claimed, reads) = self
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
        let mut taken = vec![claimed];
        let damaged = reads.read_sound(|_, payload| taken[0].payload = payload)?;
        let error = damaged.first().map(Damaged::queue_error);
        self.bury_damaged(&mut taken, damaged);
        match error {
            Some(error) => Err(error),
            None => Ok(taken.remove(0)),
        }
    }
}

/// `text` cut to at most `max` bytes, at a character's boundary.
fn truncated(text: &str, max: usize) -> &str {
    let end = (0..=max.min(text.len())).rev().find(|&end| text.is_char_boundary(end)).unwrap_or(0);
    &text[..end]
}
