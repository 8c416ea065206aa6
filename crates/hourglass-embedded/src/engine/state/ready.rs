//! One queue's due tasks in claim order: the most urgent priority first
//! (the lowest number), then the oldest due, then the oldest id. With one
//! priority, that is the order of due times, as before priorities existed.

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Bound::{Excluded, Unbounded};

use hourglass_queue::limits::PRIORITY_DEFAULT;

/// A due task's place in the claim order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub(super) struct Place {
    pub(super) priority: u32,
    pub(super) run_at_ms: u64,
    pub(super) id: u64,
}

/// The due tasks, in claim order, with what the queue's counts read off
/// them kept up to date: how many are urgent, and the oldest due time.
#[derive(Default)]
pub(super) struct Ready {
    order: BTreeSet<Place>,
    /// Due tasks by due time, counted: the oldest due is the first key
    /// whatever the priorities (walking the order's priorities instead would
    /// cost one search per distinct priority).
    by_due: BTreeMap<u64, u32>,
    /// Due tasks more urgent than [`PRIORITY_DEFAULT`].
    urgent: usize,
}

impl Ready {
    pub(super) fn insert(&mut self, place: Place) {
        if self.order.insert(place) {
            *self.by_due.entry(place.run_at_ms).or_default() += 1;
            self.urgent += usize::from(place.priority < PRIORITY_DEFAULT);
        }
    }

    pub(super) fn remove(&mut self, place: &Place) -> bool {
        if !self.order.remove(place) {
            return false;
        }
        let count = self.by_due.get_mut(&place.run_at_ms).expect("counted when inserted");
        *count -= 1;
        if *count == 0 {
            self.by_due.remove(&place.run_at_ms);
        }
        self.urgent -= usize::from(place.priority < PRIORITY_DEFAULT);
        true
    }

    pub(super) fn contains(&self, place: &Place) -> bool {
        self.order.contains(place)
    }

    pub(super) fn len(&self) -> usize {
        self.order.len()
    }

    /// Due tasks more urgent than [`PRIORITY_DEFAULT`] (beanstalkd's
    /// `current-jobs-urgent`).
    pub(super) fn urgent(&self) -> usize {
        self.urgent
    }

    /// The next to claim.
    pub(super) fn first(&self) -> Option<Place> {
        self.order.first().copied()
    }

    /// Every due task, in claim order.
    pub(super) fn iter(&self) -> impl Iterator<Item = &Place> + '_ {
        self.order.iter()
    }

    /// The due tasks after `place`, in claim order.
    pub(super) fn after(&self, place: Place) -> impl Iterator<Item = &Place> + '_ {
        self.order.range((Excluded(place), Unbounded))
    }

    /// The earliest due time among them.
    pub(super) fn oldest_due_ms(&self) -> Option<u64> {
        self.by_due.first_key_value().map(|(&run_at_ms, _)| run_at_ms)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn place(priority: u32, run_at_ms: u64, id: u64) -> Place {
        Place { priority, run_at_ms, id }
    }

    #[test]
    fn claim_order_is_priority_then_due_time_then_id() {
        let mut ready = Ready::default();
        for p in [place(5, 10, 1), place(0, 30, 2), place(5, 5, 3), place(0, 30, 0), place(PRIORITY_DEFAULT, 1, 9)] {
            ready.insert(p);
        }
        let order: Vec<u64> = ready.iter().map(|p| p.id).collect();
        assert_eq!(order, [0, 2, 3, 1, 9]);
        assert_eq!(ready.oldest_due_ms(), Some(1), "the oldest due, whatever its priority");
        assert_eq!(ready.urgent(), 4);
        assert_eq!(ready.after(place(0, 30, 2)).map(|p| p.id).collect::<Vec<_>>(), [3, 1, 9]);
        assert!(ready.remove(&place(PRIORITY_DEFAULT, 1, 9)));
        assert!(!ready.remove(&place(PRIORITY_DEFAULT, 1, 9)), "removed once");
        assert_eq!((ready.oldest_due_ms(), ready.urgent(), ready.len()), (Some(5), 4, 4));
        ready.insert(place(7, 5, 4));
        assert!(ready.remove(&place(5, 5, 3)));
        assert_eq!(ready.oldest_due_ms(), Some(5), "another task is due at 5 still");
    }
}
