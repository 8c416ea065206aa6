//! Where the engine keeps its tasks: compact slots in fixed-size pages, found
//! by id through an index of 16-byte entries.
//!
//! A `HashMap<u64, Slot>` stored every slot in its table, which is up to half
//! empty after each doubling: at 5 M tasks that came to about 122 bytes a task.
//! Here only the index doubles; the slots themselves grow one page at a time.
//! Ids are made by the engine, not by clients, so the index hashes them with
//! the fast, non-keyed Fx hash (SipHash was 3 % of a batch enqueue's profile).

use rustc_hash::FxHashMap;
use std::ops::Index;

/// Slots per page.
const PAGE_LEN: usize = 4096;

/// Tasks by id.
pub(crate) struct Tasks<S> {
    index: FxHashMap<u64, u32>,
    pages: Vec<Box<[Option<S>]>>,
    /// Vacant slots, reused first.
    free: Vec<u32>,
}

impl<S> Tasks<S> {
    pub(crate) fn new() -> Self {
        Tasks { index: FxHashMap::default(), pages: Vec::new(), free: Vec::new() }
    }

    pub(crate) fn len(&self) -> usize {
        self.index.len()
    }

    fn at(&self, at: u32) -> &Option<S> {
        &self.pages[at as usize / PAGE_LEN][at as usize % PAGE_LEN]
    }

    fn at_mut(&mut self, at: u32) -> &mut Option<S> {
        &mut self.pages[at as usize / PAGE_LEN][at as usize % PAGE_LEN]
    }

    pub(crate) fn get(&self, id: &u64) -> Option<&S> {
        self.at(*self.index.get(id)?).as_ref()
    }

    pub(crate) fn get_mut(&mut self, id: &u64) -> Option<&mut S> {
        let at = *self.index.get(id)?;
        self.at_mut(at).as_mut()
    }

    /// Stores `slot` under `id`, replacing any slot it had.
    pub(crate) fn insert(&mut self, id: u64, slot: S) {
        if let Some(&at) = self.index.get(&id) {
            *self.at_mut(at) = Some(slot);
            return;
        }
        let at = match self.free.pop() {
            Some(at) => at,
            None => {
                let at = u32::try_from(self.pages.len() * PAGE_LEN).expect("fewer than 4 billion task slots");
                self.pages.push((0..PAGE_LEN).map(|_| None).collect());
                self.free.extend((at + 1..at + PAGE_LEN as u32).rev());
                at
            }
        };
        *self.at_mut(at) = Some(slot);
        self.index.insert(id, at);
    }

    /// Every id, in no particular order.
    pub(crate) fn ids(&self) -> impl Iterator<Item = u64> + '_ {
        self.index.keys().copied()
    }

    pub(crate) fn remove(&mut self, id: &u64) -> Option<S> {
        let at = self.index.remove(id)?;
        self.free.push(at);
        self.at_mut(at).take()
    }
}

impl<S> Index<&u64> for Tasks<S> {
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
        let mut tasks = Tasks::new();
        for id in 1..=10_000u64 {
            tasks.insert(id, id * 2);
        }
        assert_eq!(tasks.len(), 10_000);
        assert_eq!(tasks[&7], 14);
        assert_eq!(tasks.remove(&7), Some(14));
        assert_eq!(tasks.remove(&7), None);
        assert!(tasks.get(&7).is_none());
        tasks.insert(20_000, 1);
        assert_eq!(tasks.pages.len(), 3, "the vacated slot was reused, no new page");
        *tasks.get_mut(&20_000).unwrap() += 1;
        assert_eq!(tasks[&20_000], 2);
        tasks.insert(20_000, 5);
        assert_eq!((tasks.len(), tasks[&20_000]), (10_000, 5));
    }
}
