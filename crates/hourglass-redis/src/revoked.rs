//! Tasks cancelled while leased, as this node heard of them, so that a task
//! a fire handed to this node's claims and not yet taken by one (held until
//! its due time after a hand-over ahead, or lingering for the next claim) is
//! dropped rather than answered after its cancel.
//!
//! A cancel of a leased task publishes `x SHARD SEQ` (`lua/task.lua`), and
//! every node remembers the task's id for [`REVOKED_FOR`], [`REVOKED_MAX`]
//! ids at most (the oldest go first). A task stays on a node no longer than
//! a hold ([`FIRE_AHEAD_MS_MAX`]) and a linger ([`LINGER_MS`]), so its cancel
//! is remembered while it could be there; ids are never reused, so one
//! remembered longer drops nothing else. A cancel heard after a claim took
//! the task is as a cancel after a delivery: the claim has it, and its ack
//! is answered `not_found`.

use std::collections::{HashSet, VecDeque};
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use hourglass_queue::Claimed;

use crate::options::FIRE_AHEAD_MS_MAX;
use crate::takers::LINGER_MS;

/// How long a cancel heard is remembered: twice the longest a task handed
/// over waits on a node for its claim.
pub(crate) const REVOKED_FOR: Duration = Duration::from_millis(2 * (FIRE_AHEAD_MS_MAX + LINGER_MS));
/// Cancels remembered at most; past it the oldest are forgotten first.
pub(crate) const REVOKED_MAX: usize = 65_536;

/// The ids of tasks whose cancel this node heard, with when it did.
#[derive(Debug, Default)]
pub(crate) struct Revoked(Mutex<Heard>);

#[derive(Debug, Default)]
struct Heard {
    order: VecDeque<(Instant, u64)>,
    ids: HashSet<u64>,
}

impl Heard {
    fn forget_before(&mut self, now: Instant) {
        while let Some(&(at, id)) = self.order.front() {
            if now.saturating_duration_since(at) < REVOKED_FOR && self.order.len() <= REVOKED_MAX {
                return;
            }
            self.order.pop_front();
            self.ids.remove(&id);
        }
    }
}

impl Revoked {
    /// The cancel of task `id`, heard `now`.
    pub(crate) fn revoke(&self, id: u64, now: Instant) {
        let mut heard = self.0.lock();
        if heard.ids.insert(id) {
            heard.order.push_back((now, id));
        }
        heard.forget_before(now);
    }

    /// Takes out of `tasks` those whose cancel was heard, and returns them.
    pub(crate) fn drop_cancelled(&self, tasks: &mut Vec<Claimed>, now: Instant) -> Vec<Claimed> {
        let mut heard = self.0.lock();
        heard.forget_before(now);
        if heard.ids.is_empty() {
            return Vec::new();
        }
        let (dropped, kept) = std::mem::take(tasks).into_iter().partition(|task| heard.ids.contains(&task.id));
        *tasks = kept;
        dropped
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::takers::fixtures::{ids, task};

    #[test]
    fn a_cancel_heard_drops_its_task_for_as_long_as_it_is_remembered() {
        let revoked = Revoked::default();
        let start = Instant::now();
        revoked.revoke(2, start);
        let mut tasks = vec![task(1), task(2), task(3)];
        assert_eq!(ids(&revoked.drop_cancelled(&mut tasks, start + REVOKED_FOR / 2)), [2]);
        assert_eq!(ids(&tasks), [1, 3]);
        let mut later = vec![task(2)];
        assert!(revoked.drop_cancelled(&mut later, start + REVOKED_FOR).is_empty(), "forgotten");
        assert_eq!(ids(&later), [2]);
    }

    #[test]
    fn past_its_most_the_oldest_cancels_are_forgotten_first() {
        let revoked = Revoked::default();
        let now = Instant::now();
        for id in 0..=REVOKED_MAX as u64 {
            revoked.revoke(id, now);
        }
        let mut tasks = vec![task(0), task(1), task(REVOKED_MAX as u64)];
        assert_eq!(ids(&revoked.drop_cancelled(&mut tasks, now)), [1, REVOKED_MAX as u64]);
        assert_eq!(ids(&tasks), [0], "the oldest went first");
        assert_eq!(revoked.0.lock().order.len(), REVOKED_MAX);
    }
}
