//! Where the engine keeps its tasks: compact slots in [`hourglass::Pages`], found
//! by id through an index of 16-byte entries. (Named apart from the
//! contract's `Tasks` trait, which is what clients call.)
//!
//! A `HashMap<u64, Slot>` stored every slot in its table, which is up to half
//! empty after each doubling: at 5 M tasks that came to about 122 bytes a task.
//! Here only the index doubles; the slots themselves grow one page at a time.
//! Ids are made by the engine, not by clients, so the index hashes them with
//! the fast, non-keyed Fx hash (SipHash was 3 % of a batch enqueue's profile).

use std::ops::Index;

use hourglass::{Pages, PAGE_LEN};
use rustc_hash::FxHashMap;

/// Slots by task id.
pub(crate) struct Slots<S> {
    index: FxHashMap<u64, u32>,
    pages: Pages<Option<S>>,
    /// Vacant slots, reused first.
    free: Vec<u32>,
}

impl<S> Slots<S> {
    pub(crate) fn new() -> Self {
        Slots { index: FxHashMap::default(), pages: Pages::new(), free: Vec::new() }
    }

    pub(crate) fn len(&self) -> usize {
        self.index.len()
    }

    pub(crate) fn get(&self, id: &u64) -> Option<&S> {
        self.pages[*self.index.get(id)?].as_ref()
    }

    pub(crate) fn get_mut(&mut self, id: &u64) -> Option<&mut S> {
        let at = *self.index.get(id)?;
        self.pages[at].as_mut()
    }

    /// Stores `slot` under `id`, replacing any slot it had.
    pub(crate) fn insert(&mut self, id: u64, slot: S) {
        if let Some(&at) = self.index.get(&id) {
            self.pages[at] = Some(slot);
            return;
        }
        let at = match self.free.pop() {
            Some(at) => at,
            None => {
                let at = self.pages.grow(|| None);
                self.free.extend((at + 1..at + PAGE_LEN as u32).rev());
                at
            }
        };
        self.pages[at] = Some(slot);
        self.index.insert(id, at);
    }

    /// Every id, in no particular order.
    pub(crate) fn ids(&self) -> impl Iterator<Item = u64> + '_ {
        self.index.keys().copied()
    }

    pub(crate) fn remove(&mut self, id: &u64) -> Option<S> {
        let at = self.index.remove(id)?;
        self.free.push(at);
        self.pages[at].take()
    }
}

impl<S> Index<&u64> for Slots<S> {
    type Output = S;

    fn index(&self, id: &u64) -> &S {
        self.get(id).expect("a known task")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn insert_get_remove_reuse() {
        let mut tasks = Slots::new();
        for id in 1..=10_000u64 {
            tasks.insert(id, id * 2);
        }
        assert_eq!(tasks.len(), 10_000);
        assert_eq!(tasks[&7], 14);
        assert_eq!(tasks.remove(&7), Some(14));
        assert_eq!(tasks.remove(&7), None);
        assert!(tasks.get(&7).is_none());
        tasks.insert(20_000, 1);
        assert_eq!(tasks.pages.capacity(), 3 * PAGE_LEN, "the vacated slot was reused, no new page");
        *tasks.get_mut(&20_000).unwrap() += 1;
        assert_eq!(tasks[&20_000], 2);
        tasks.insert(20_000, 5);
        assert_eq!((tasks.len(), tasks[&20_000]), (10_000, 5));
    }
}
