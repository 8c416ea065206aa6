//! Generation-checked storage for wheel entries, in [`Pages`]: growth never
//! copies existing entries (no latency spike at 10 M timers), and the memory
//! held is the live entries plus at most one partly used page.

use super::key::Key;
use crate::pages::{Pages, PAGE_LEN};

/// Marks the end of a list, and "no entry".
pub(crate) const NIL: u32 = u32::MAX;

/// The most entries a slab can hold: indices are `u32` and [`NIL`] is reserved.
pub(crate) const MAX_ENTRIES: usize = NIL as usize;

/// A vacated slot whose generation reaches this is retired instead of reused,
/// so generations never wrap and a stale key can never match again.
const RETIRED_GENERATION: u32 = u32::MAX;
const _: () = assert!(!is_occupied(RETIRED_GENERATION), "retirement happens at a vacant (odd) generation");

/// Generations are even while a slot is occupied, odd while it is vacant.
#[inline]
const fn is_occupied(generation: u32) -> bool {
    generation & 1 == 0
}

/// One pending timer, linked into exactly one list of the wheel.
///
/// With `T = ()` this is 32 bytes: the wheel's whole per-timer cost.
#[derive(Debug)]
pub(crate) struct Entry<T> {
    /// The tick at which the entry is due.
    pub(crate) deadline: u64,
    /// Insertion order, renewed on every reset: entries due at the same tick
    /// come out in this order.
    pub(crate) seq: u64,
    pub(crate) prev: u32,
    /// Next entry in the entry's list; for a vacant slot, the next free slot.
    pub(crate) next: u32,
    /// Even while the slot holds an entry, odd while it is vacant: one compare
    /// with a key's (even) generation tells both "same entry" and "live".
    pub(crate) generation: u32,
    /// The list the entry is in (a slot, or the expired list).
    pub(crate) location: u16,
    /// `None` exactly when the storage slot is vacant.
    pub(crate) value: Option<T>,
}

#[derive(Debug)]
pub(crate) struct Slab<T> {
    /// 4096 entries a page: 128 KiB pages for a 32-byte entry.
    pages: Pages<Entry<T>>,
    /// Head of the list of vacant slots, linked through `Entry::next`.
    free_head: u32,
    /// Slots ever handed out (the high-water mark of indices).
    allocated: usize,
    len: usize,
}

impl<T> Slab<T> {
    pub(crate) const fn new() -> Self {
        Slab { pages: Pages::new(), free_head: NIL, allocated: 0, len: 0 }
    }

    pub(crate) fn with_capacity(capacity: usize) -> Self {
        let mut slab = Slab::new();
        let pages = capacity.min(MAX_ENTRIES).div_ceil(PAGE_LEN);
        slab.pages.reserve_pages(pages);
        for _ in 0..pages {
            slab.pages.grow(vacant);
        }
        slab
    }

    #[inline]
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Bytes of entry storage held, live or vacant.
    pub(crate) fn bytes_reserved(&self) -> usize {
        self.pages.bytes_reserved()
    }

    #[inline]
    pub(crate) fn entry(&self, index: u32) -> &Entry<T> {
        &self.pages[index]
    }

    #[inline]
    pub(crate) fn entry_mut(&mut self, index: u32) -> &mut Entry<T> {
        &mut self.pages[index]
    }

    /// The live entry named by `key`, if it is still live.
    #[inline]
    pub(crate) fn live(&self, key: Key) -> Option<&Entry<T>> {
        let entry = self.pages.get(key.index)?;
        // An odd generation in a key was never handed out: refuse it before it
        // can match a vacant slot.
        (is_occupied(key.generation) && entry.generation == key.generation).then(|| {
            debug_assert!(entry.value.is_some(), "an even generation means occupied");
            entry
        })
    }

    /// As [`live`](Slab::live), mutably.
    #[inline]
    pub(crate) fn live_mut(&mut self, key: Key) -> Option<&mut Entry<T>> {
        let entry = self.pages.get_mut(key.index)?;
        (is_occupied(key.generation) && entry.generation == key.generation).then_some(entry)
    }

    /// Stores `value` in a vacant slot and returns its key; the entry's links
    /// are left for the caller to set. Gives the value back when full.
    #[inline]
    pub(crate) fn insert(&mut self, deadline: u64, seq: u64, value: T) -> Result<Key, T> {
        if self.free_head != NIL {
            let index = self.free_head;
            let entry = self.entry_mut(index);
            debug_assert!(entry.value.is_none(), "free slot {index} is occupied");
            let next_free = entry.next;
            entry.deadline = deadline;
            entry.seq = seq;
            entry.value = Some(value);
            entry.generation += 1; // odd (vacant) to even (occupied)
            let generation = entry.generation;
            self.free_head = next_free;
            self.len += 1;
            return Ok(Key { index, generation });
        }
        if self.allocated >= MAX_ENTRIES {
            return Err(value);
        }
        let index = self.allocated as u32;
        if self.allocated == self.pages.capacity() {
            self.pages.grow(vacant);
        }
        let entry = self.entry_mut(index);
        entry.deadline = deadline;
        entry.seq = seq;
        entry.value = Some(value);
        entry.generation = 0;
        self.allocated += 1;
        self.len += 1;
        Ok(Key { index, generation: 0 })
    }

    /// Vacates the slot at `index` (which must be live and already unlinked) and
    /// returns its value.
    #[inline]
    pub(crate) fn remove(&mut self, index: u32) -> T {
        let free_head = self.free_head;
        let entry = self.entry_mut(index);
        let value = entry.value.take().expect("removing a vacant wheel entry");
        entry.generation += 1; // even (occupied) to odd (vacant)
        let retire = entry.generation == RETIRED_GENERATION;
        if !retire {
            entry.next = free_head;
            self.free_head = index;
        }
        self.len -= 1;
        value
    }

    /// Iterates over the keys of live entries, in storage order.
    pub(crate) fn keys(&self) -> impl Iterator<Item = Key> + '_ {
        self.pages
            .iter()
            .filter(|(_, entry)| entry.value.is_some())
            .map(|(index, entry)| Key { index, generation: entry.generation })
    }

    #[cfg(test)]
    pub(crate) fn set_generation(&mut self, index: u32, generation: u32) {
        self.entry_mut(index).generation = generation;
    }
}

/// A slot never used: vacant (odd generation), linked nowhere.
fn vacant<T>() -> Entry<T> {
    Entry { deadline: 0, seq: 0, prev: NIL, next: NIL, generation: 1, location: 0, value: None }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entry_is_32_bytes_without_payload() {
        assert_eq!(std::mem::size_of::<Entry<()>>(), 32);
    }

    #[test]
    fn reuse_changes_generation() {
        let mut slab = Slab::new();
        let a = slab.insert(1, 0, 'a').unwrap();
        assert_eq!(slab.remove(a.index), 'a');
        assert!(slab.live(a).is_none());
        let b = slab.insert(1, 1, 'b').unwrap();
        assert_eq!(b.index, a.index);
        assert_ne!(b.generation, a.generation);
        assert!(slab.live(a).is_none());
        assert_eq!(slab.live(b).and_then(|e| e.value), Some('b'));
    }

    #[test]
    fn a_forged_odd_generation_never_matches_a_vacant_slot() {
        let mut slab = Slab::new();
        let a = slab.insert(1, 0, ()).unwrap();
        slab.remove(a.index);
        let forged = Key { index: a.index, generation: a.generation + 1 };
        assert!(slab.live(forged).is_none());
        assert!(slab.live_mut(forged).is_none());
    }

    #[test]
    fn exhausted_generation_retires_the_slot() {
        let mut slab = Slab::new();
        let a = slab.insert(1, 0, ()).unwrap();
        slab.set_generation(a.index, RETIRED_GENERATION - 1); // the last even generation
        slab.remove(a.index);
        let b = slab.insert(1, 1, ()).unwrap();
        assert_ne!(b.index, a.index, "a retired slot is never reused");
        assert_eq!(slab.len(), 1);
    }

    #[test]
    fn pages_hold_at_most_one_partial_page_of_slack() {
        let mut slab = Slab::new();
        let n = 3 * PAGE_LEN + 10;
        for i in 0..n {
            slab.insert(i as u64, i as u64, ()).unwrap();
        }
        let entry_bytes = std::mem::size_of::<Entry<()>>();
        assert!(slab.bytes_reserved() <= (n + PAGE_LEN) * entry_bytes + 1024);
        assert_eq!(slab.keys().count(), n);
    }
}
