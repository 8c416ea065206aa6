//! The jobs one connection has reserved, each with its lease: what
//! `delete`, `release`, `bury` and `touch` may act on, and what a `reserve`
//! watches for `DEADLINE_SOON`. A job past its time-to-run is no longer
//! held (the engine has taken it back); it is forgotten the next time the
//! jobs are looked at. Pure: the caller says what time it is.

use std::collections::HashMap;
use std::sync::Arc;

use hourglass_queue::{Claimed, Lease};

/// A job this connection reserved.
#[derive(Debug, Clone)]
pub(super) struct Held {
    pub(super) lease: Lease,
    /// When its time-to-run ends (Unix ms).
    pub(super) until_ms: u64,
    /// Its time-to-run: how far a `touch` extends it.
    pub(super) ttr_ms: u64,
    pub(super) tube: Arc<str>,
}

/// The jobs a connection holds, by id.
#[derive(Debug, Default)]
pub(super) struct Reserved {
    jobs: HashMap<u64, Held>,
}

impl Reserved {
    /// Whether no job is held (some may be past their time-to-run).
    pub(super) fn is_empty(&self) -> bool {
        self.jobs.is_empty()
    }

    /// `claimed`, reserved at `now_ms`, is held.
    pub(super) fn insert(&mut self, claimed: &Claimed, now_ms: u64) {
        let held = Held {
            lease: claimed.lease,
            until_ms: claimed.lease_until_ms,
            ttr_ms: claimed.lease_until_ms.saturating_sub(now_ms).max(1),
            tube: claimed.queue.clone(),
        };
        self.jobs.insert(claimed.id, held);
    }

    /// Job `id`, if held and not yet past its time-to-run at `now_ms`.
    pub(super) fn holding(&mut self, id: u64, now_ms: u64) -> Option<Held> {
        self.expire(now_ms);
        self.jobs.get(&id).cloned()
    }

    /// The tube of job `id`, if it was reserved here (it may be past its
    /// time-to-run: the engine then refuses what is asked of it).
    pub(super) fn tube_of(&self, id: u64) -> Option<&str> {
        self.jobs.get(&id).map(|held| &*held.tube)
    }

    /// The soonest end of a time-to-run among the jobs still held at `now_ms`.
    pub(super) fn soonest_until_ms(&mut self, now_ms: u64) -> Option<u64> {
        self.expire(now_ms);
        self.jobs.values().map(|held| held.until_ms).min()
    }

    /// Job `id`'s time-to-run was extended to `until_ms`.
    pub(super) fn touched(&mut self, id: u64, until_ms: u64) {
        if let Some(held) = self.jobs.get_mut(&id) {
            held.until_ms = until_ms;
        }
    }

    /// Job `id` is no longer held here.
    pub(super) fn remove(&mut self, id: u64) {
        self.jobs.remove(&id);
    }

    /// Every job held, to give back: none is held after.
    pub(super) fn take_all(&mut self) -> HashMap<u64, Held> {
        std::mem::take(&mut self.jobs)
    }

    fn expire(&mut self, now_ms: u64) {
        self.jobs.retain(|_, held| held.until_ms > now_ms);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claimed(id: u64, lease_until_ms: u64) -> Claimed {
        Claimed {
            id,
            queue: "default".into(),
            payload: "".into(),
            attempt: 1,
            lease: Lease(id),
            lease_until_ms,
            run_at_ms: 0,
            target: None,
        }
    }

    #[test]
    fn a_job_is_held_until_its_time_to_run_ends() {
        let mut reserved = Reserved::default();
        reserved.insert(&claimed(1, 5_000), 1_000);
        reserved.insert(&claimed(2, 3_000), 1_000);
        assert_eq!(reserved.holding(1, 1_000).map(|held| held.ttr_ms), Some(4_000));
        assert_eq!(reserved.soonest_until_ms(2_999), Some(3_000));
        assert_eq!(reserved.soonest_until_ms(3_000), Some(5_000), "job 2's time-to-run ended");
        assert!(reserved.holding(2, 3_000).is_none());
        reserved.touched(1, 9_000);
        assert_eq!(reserved.holding(1, 8_999).map(|held| held.until_ms), Some(9_000));
        reserved.remove(1);
        assert!(reserved.holding(1, 0).is_none());
        assert!(reserved.take_all().is_empty());
    }

    #[test]
    fn a_time_to_run_already_over_is_still_a_millisecond() {
        let mut reserved = Reserved::default();
        reserved.insert(&claimed(1, 1_000), 2_000);
        assert_eq!(reserved.take_all()[&1].ttr_ms, 1);
    }
}
