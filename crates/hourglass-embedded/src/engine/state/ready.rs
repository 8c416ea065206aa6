//! One queue's due tasks in claim order: the most urgent priority first
//! (the lowest number), then the oldest due, then the oldest id. With one
//! priority, that is the order of due times, as before priorities existed.
//!
//! Tasks delivered by pull and by push are kept in two sets, so that each
//! kind of claim finds its own first task at once; listings and counts see
//! them together.

use std::collections::{BTreeMap, BTreeSet};
use std::iter::Peekable;
use std::ops::Bound::{Excluded, Unbounded};

use hourglass_queue::limits::PRIORITY_DEFAULT;
use hourglass_queue::Delivery;

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
    pull: BTreeSet<Place>,
    push: BTreeSet<Place>,
    /// Due tasks by due time, counted: the oldest due is the first key
    /// whatever the priorities (walking the order's priorities instead would
    /// cost one search per distinct priority).
    by_due: BTreeMap<u64, u32>,
    /// Due tasks more urgent than [`PRIORITY_DEFAULT`].
    urgent: usize,
}

impl Ready {
    fn set(&self, delivery: Delivery) -> &BTreeSet<Place> {
        match delivery {
            Delivery::Pull => &self.pull,
            Delivery::Push => &self.push,
        }
    }

    pub(super) fn insert(&mut self, place: Place, delivery: Delivery) {
        let set = match delivery {
            Delivery::Pull => &mut self.pull,
            Delivery::Push => &mut self.push,
        };
        if set.insert(place) {
            *self.by_due.entry(place.run_at_ms).or_default() += 1;
            self.urgent += usize::from(place.priority < PRIORITY_DEFAULT);
        }
    }

    pub(super) fn remove(&mut self, place: &Place) -> bool {
        if !self.pull.remove(place) && !self.push.remove(place) {
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

    /// How the task at `place` is delivered, if it is due here.
    pub(super) fn contains(&self, place: &Place) -> Option<Delivery> {
        if self.pull.contains(place) {
            Some(Delivery::Pull)
        } else if self.push.contains(place) {
            Some(Delivery::Push)
        } else {
            None
        }
    }

    pub(super) fn len(&self) -> usize {
        self.pull.len() + self.push.len()
    }

    /// Due tasks delivered as `delivery` says.
    pub(super) fn len_of(&self, delivery: Delivery) -> usize {
        self.set(delivery).len()
    }

    /// Moves the due tasks `moves` picks to the set of `to`; how many moved.
    pub(super) fn move_to(&mut self, to: Delivery, moves: impl Fn(u64) -> bool) -> usize {
        let (from, into) = match to {
            Delivery::Pull => (&mut self.push, &mut self.pull),
            Delivery::Push => (&mut self.pull, &mut self.push),
        };
        let moving: Vec<Place> = from.iter().filter(|place| moves(place.id)).copied().collect();
        for place in &moving {
            from.remove(place);
            into.insert(*place);
        }
        moving.len()
    }

    /// Due tasks more urgent than [`PRIORITY_DEFAULT`] (beanstalkd's
    /// `current-jobs-urgent`).
    pub(super) fn urgent(&self) -> usize {
        self.urgent
    }

    /// The next to claim by `delivery`.
    pub(super) fn first(&self, delivery: Delivery) -> Option<Place> {
        self.set(delivery).first().copied()
    }

    /// Every due task delivered as `delivery` says, in claim order.
    pub(super) fn iter(&self, delivery: Delivery) -> impl Iterator<Item = &Place> + '_ {
        self.set(delivery).iter()
    }

    /// The due tasks after `place`, of both deliveries, in claim order.
    pub(super) fn after(&self, place: Place) -> impl Iterator<Item = Place> + '_ {
        let from = (Excluded(place), Unbounded);
        Merge { a: self.pull.range(from).copied().peekable(), b: self.push.range(from).copied().peekable() }
    }

    /// The earliest due time among them.
    pub(super) fn oldest_due_ms(&self) -> Option<u64> {
        self.by_due.first_key_value().map(|(&run_at_ms, _)| run_at_ms)
    }
}

/// Two ascending iterators as one.
struct Merge<A: Iterator<Item = Place>, B: Iterator<Item = Place>> {
    a: Peekable<A>,
    b: Peekable<B>,
}

impl<A: Iterator<Item = Place>, B: Iterator<Item = Place>> Iterator for Merge<A, B> {
    type Item = Place;

    fn next(&mut self) -> Option<Place> {
        match (self.a.peek(), self.b.peek()) {
            (Some(a), Some(b)) if b < a => self.b.next(),
            (Some(_), _) => self.a.next(),
            (None, _) => self.b.next(),
        }
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
            ready.insert(p, Delivery::Pull);
        }
        let order: Vec<u64> = ready.iter(Delivery::Pull).map(|p| p.id).collect();
        assert_eq!(order, [0, 2, 3, 1, 9]);
        assert_eq!(ready.oldest_due_ms(), Some(1), "the oldest due, whatever its priority");
        assert_eq!(ready.urgent(), 4);
        assert_eq!(ready.after(place(0, 30, 2)).map(|p| p.id).collect::<Vec<_>>(), [3, 1, 9]);
        assert_eq!(ready.move_to(Delivery::Push, |id| id == 1 || id == 9), 2);
        assert_eq!((ready.len_of(Delivery::Pull), ready.len_of(Delivery::Push), ready.len()), (3, 2, 5));
        assert_eq!(ready.first(Delivery::Push).map(|p| p.id), Some(1));
        assert_eq!(ready.contains(&place(5, 10, 1)), Some(Delivery::Push));
        let merged: Vec<u64> = ready.after(place(0, 0, 0)).map(|p| p.id).collect();
        assert_eq!(merged, [0, 2, 3, 1, 9], "listed together, in claim order");
        assert!(ready.remove(&place(PRIORITY_DEFAULT, 1, 9)));
        assert!(!ready.remove(&place(PRIORITY_DEFAULT, 1, 9)), "removed once");
        assert_eq!((ready.oldest_due_ms(), ready.urgent(), ready.len()), (Some(5), 4, 4));
        ready.insert(place(7, 5, 4), Delivery::Push);
        assert!(ready.remove(&place(5, 5, 3)));
        assert_eq!(ready.oldest_due_ms(), Some(5), "another task is due at 5 still");
    }
}
