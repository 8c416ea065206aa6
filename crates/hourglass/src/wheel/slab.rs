//! Generation-checked storage for wheel entries, in [`Pages`]: growth never
//! copies existing entries (no latency spike at 10 M timers).
//!
//! Each page keeps its own list of vacant slots, and an insert takes a slot in
//! the lowest page that has one. Live entries therefore gather in the low
//! pages as the set turns over, the top pages empty, and an empty top page is
//! given back (one spare is kept so that a queue hovering at a page boundary
//! does not allocate and free a page on every operation). Entries never move,
//! so keys stay valid; a page given back and made again later starts its
//! generations above every generation handed out in it before, so a key from
//! before is still stale.

use super::key::Key;
use crate::pages::{Pages, PAGE_LEN};

/// Marks the end of a list, and "no entry".
pub(crate) const NIL: u32 = u32::MAX;

/// The most pages: every index of every page is below [`NIL`].
const MAX_PAGES: usize = NIL as usize / PAGE_LEN;

/// The most entries a slab can hold (about 4.3 billion).
pub(crate) const MAX_ENTRIES: usize = MAX_PAGES * PAGE_LEN;
const _: () = assert!(MAX_ENTRIES <= NIL as usize, "every index is below NIL");

/// A vacated slot whose generation reaches this is retired instead of reused,
/// so generations never wrap and a stale key can never match again.
const RETIRED_GENERATION: u32 = u32::MAX;
const _: () = assert!(!is_occupied(RETIRED_GENERATION), "retirement happens at a vacant (odd) generation");

/// Empty pages kept at the top when the rest are given back by themselves.
const SPARE_PAGES: usize = 1;

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
    /// Next entry in the entry's list; for a vacant slot, the next vacant slot
    /// of its page.
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
    /// Per page: the head of its list of vacant slots, linked through
    /// `Entry::next`; [`NIL`] when the page is full.
    free_heads: Vec<u32>,
    /// Per page: the entries it holds.
    live: Vec<u32>,
    /// Bit `p % 64` of word `p / 64`: page `p` has a vacant slot.
    vacant_pages: Vec<u64>,
    /// No word of `vacant_pages` before this one has a bit set.
    first_vacant_word: usize,
    /// The (odd) generation of the slots of a page made from now on: above
    /// every generation given out in a page that was given back.
    fresh_generation: u32,
    /// Pages that are not given back by themselves: what `with_capacity` and
    /// `reserve` asked for, until `shrink_to_fit`.
    reserved_pages: usize,
    len: usize,
}

impl<T> Slab<T> {
    pub(crate) const fn new() -> Self {
        Slab {
            pages: Pages::new(),
            free_heads: Vec::new(),
            live: Vec::new(),
            vacant_pages: Vec::new(),
            first_vacant_word: 0,
            fresh_generation: 1,
            reserved_pages: 0,
            len: 0,
        }
    }

    pub(crate) fn with_capacity(capacity: usize) -> Self {
        let mut slab = Slab::new();
        slab.reserve(capacity);
        slab
    }

    /// Makes room for `additional` more entries, kept until
    /// [`shrink_to_fit`](Slab::shrink_to_fit).
    pub(crate) fn reserve(&mut self, additional: usize) {
        let pages = self.len.saturating_add(additional).min(MAX_ENTRIES).div_ceil(PAGE_LEN);
        self.pages.reserve_pages(pages.saturating_sub(self.pages.len_pages()));
        while self.pages.len_pages() < pages {
            self.add_page();
        }
        self.reserved_pages = self.reserved_pages.max(pages);
    }

    #[inline]
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Entries the slab can hold before it makes a page.
    #[inline]
    pub(crate) fn capacity(&self) -> usize {
        self.pages.capacity()
    }

    /// Bytes of entry storage held, live or vacant, with the per-page books.
    pub(crate) fn bytes_reserved(&self) -> usize {
        self.pages.bytes_reserved()
            + (self.free_heads.capacity() + self.live.capacity()) * std::mem::size_of::<u32>()
            + self.vacant_pages.capacity() * std::mem::size_of::<u64>()
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

    /// Stores `value` in a vacant slot of the lowest page that has one and
    /// returns its key; the entry's links are left for the caller to set.
    /// Gives the value back when full.
    #[inline]
    pub(crate) fn insert(&mut self, deadline: u64, seq: u64, value: T) -> Result<Key, T> {
        let page = match self.first_vacant_page() {
            Some(page) => page,
            None if self.pages.len_pages() < MAX_PAGES => self.add_page(),
            None => return Err(value),
        };
        let index = self.free_heads[page];
        let entry = self.entry_mut(index);
        debug_assert!(entry.value.is_none() && !is_occupied(entry.generation), "free slot {index} is occupied");
        let next_free = entry.next;
        entry.deadline = deadline;
        entry.seq = seq;
        entry.value = Some(value);
        entry.generation += 1; // odd (vacant) to even (occupied)
        let generation = entry.generation;
        self.free_heads[page] = next_free;
        if next_free == NIL {
            self.vacant_pages[page / 64] &= !(1 << (page % 64));
        }
        self.live[page] += 1;
        self.len += 1;
        Ok(Key { index, generation })
    }

    /// Vacates the slot at `index` (which must be live and already unlinked) and
    /// returns its value. An empty top page may be given back.
    #[inline]
    pub(crate) fn remove(&mut self, index: u32) -> T {
        let page = index as usize / PAGE_LEN;
        let free_head = self.free_heads[page];
        let entry = self.entry_mut(index);
        let value = entry.value.take().expect("removing a vacant wheel entry");
        entry.generation += 1; // even (occupied) to odd (vacant)
        if entry.generation != RETIRED_GENERATION {
            entry.next = free_head;
            self.free_heads[page] = index;
            self.vacant_pages[page / 64] |= 1 << (page % 64);
            self.first_vacant_word = self.first_vacant_word.min(page / 64);
        }
        self.live[page] -= 1;
        self.len -= 1;
        if self.live[page] == 0 && page + SPARE_PAGES + 1 >= self.pages.len_pages() {
            self.give_back_empty_top(SPARE_PAGES, self.reserved_pages);
        }
        value
    }

    /// Gives back every empty top page, and the page table's spare room.
    pub(crate) fn shrink_to_fit(&mut self) {
        self.reserved_pages = 0;
        self.give_back_empty_top(0, 0);
        self.pages.shrink_to_fit();
        self.free_heads.shrink_to_fit();
        self.live.shrink_to_fit();
        self.vacant_pages.shrink_to_fit();
    }

    /// Iterates over the keys of live entries, in storage order.
    pub(crate) fn keys(&self) -> impl Iterator<Item = Key> + '_ {
        self.pages
            .iter()
            .filter(|(_, entry)| entry.value.is_some())
            .map(|(index, entry)| Key { index, generation: entry.generation })
    }

    /// The lowest page with a vacant slot.
    #[inline]
    fn first_vacant_page(&mut self) -> Option<usize> {
        while let Some(&word) = self.vacant_pages.get(self.first_vacant_word) {
            if word != 0 {
                return Some(self.first_vacant_word * 64 + word.trailing_zeros() as usize);
            }
            self.first_vacant_word += 1;
        }
        None
    }

    /// Makes a page of vacant slots, linked in index order; returns its number.
    #[cold]
    fn add_page(&mut self) -> usize {
        let page = self.pages.len_pages();
        debug_assert!(page < MAX_PAGES);
        let first = (page * PAGE_LEN) as u32;
        let generation = self.fresh_generation;
        let mut made = 0u32;
        self.pages.grow(|| {
            made += 1;
            let next = if made < PAGE_LEN as u32 { first + made } else { NIL };
            Entry { deadline: 0, seq: 0, prev: NIL, next, generation, location: 0, value: None }
        });
        self.free_heads.push(first);
        self.live.push(0);
        if page.is_multiple_of(64) {
            self.vacant_pages.push(0);
        }
        self.vacant_pages[page / 64] |= 1 << (page % 64);
        self.first_vacant_word = self.first_vacant_word.min(page / 64);
        page
    }

    /// Gives back empty top pages until `keep` empty ones are left at the top,
    /// a non-empty page is on top, or `floor` pages are left.
    #[cold]
    fn give_back_empty_top(&mut self, keep: usize, floor: usize) {
        loop {
            let pages = self.pages.len_pages();
            let empty_on_top = self.live.iter().rev().take_while(|&&live| live == 0).take(keep + 1).count();
            if empty_on_top <= keep || pages <= floor || !self.give_back_top_page() {
                return;
            }
            debug_assert_eq!(self.pages.len_pages(), pages - 1);
        }
    }

    /// Drops the top page, which must be empty; `false` if it must be kept
    /// because its generations are nearly exhausted.
    fn give_back_top_page(&mut self) -> bool {
        let page = self.pages.len_pages() - 1;
        debug_assert_eq!(self.live[page], 0);
        let (_, entries) = self.pages.page(page);
        let highest = entries.iter().map(|entry| entry.generation).max().unwrap_or(0);
        // Made again, the page's slots must start above `highest`, and stay
        // below retirement so an insert can still make them even.
        let Some(fresh) = highest.checked_add(2).filter(|&fresh| fresh < RETIRED_GENERATION) else {
            return false;
        };
        debug_assert!(!is_occupied(fresh));
        self.fresh_generation = self.fresh_generation.max(fresh);
        self.pages.pop_page();
        self.free_heads.pop();
        self.live.pop();
        self.vacant_pages[page / 64] &= !(1 << (page % 64));
        if page.is_multiple_of(64) {
            self.vacant_pages.pop();
        }
        self.reserved_pages = self.reserved_pages.min(page);
        true
    }

    #[cfg(test)]
    pub(crate) fn set_generation(&mut self, index: u32, generation: u32) {
        self.entry_mut(index).generation = generation;
    }
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
        assert!(slab.bytes_reserved() <= (n + PAGE_LEN) * entry_bytes + 1024 + 16 * 8);
        assert_eq!(slab.keys().count(), n);
    }

    fn fill(slab: &mut Slab<u64>, n: usize) -> Vec<Key> {
        (0..n as u64).map(|i| slab.insert(i, i, i).unwrap()).collect()
    }

    #[test]
    fn empty_top_pages_are_given_back_keeping_one_spare() {
        let mut slab = Slab::new();
        let keys = fill(&mut slab, 4 * PAGE_LEN);
        assert_eq!(slab.capacity(), 4 * PAGE_LEN);
        for key in keys.iter().rev() {
            slab.remove(key.index);
        }
        assert_eq!(slab.len(), 0);
        assert_eq!(slab.capacity(), PAGE_LEN, "one spare page is kept");
        slab.shrink_to_fit();
        assert_eq!(slab.capacity(), 0);
        assert_eq!(slab.bytes_reserved(), 0);
    }

    #[test]
    fn inserts_fill_the_lowest_page_so_the_top_drains() {
        let mut slab = Slab::new();
        let keys = fill(&mut slab, 3 * PAGE_LEN);
        // Free one slot in each page, lowest page last: the next insert still
        // goes to the lowest page.
        for page in (0..3).rev() {
            slab.remove(keys[page * PAGE_LEN + 5].index);
        }
        let again = slab.insert(0, 0, 0).unwrap();
        assert_eq!(again.index, 5);
        // Turn the set over: the survivors of the top page leave, new entries
        // go low, and the top page is given back.
        for key in &keys[2 * PAGE_LEN..] {
            if key.index as usize != 2 * PAGE_LEN + 5 {
                slab.remove(key.index);
            }
        }
        assert_eq!(slab.capacity(), 3 * PAGE_LEN, "the empty top page is the spare");
        for key in &keys[PAGE_LEN..2 * PAGE_LEN] {
            if key.index as usize != PAGE_LEN + 5 {
                slab.remove(key.index);
            }
        }
        assert_eq!(slab.capacity(), 2 * PAGE_LEN);
    }

    #[test]
    fn a_key_from_a_page_given_back_stays_stale_when_the_page_is_made_again() {
        let mut slab = Slab::new();
        let keys = fill(&mut slab, 2 * PAGE_LEN + 1);
        // Churn one slot of the top page so its generation runs ahead.
        let mut churned = keys[2 * PAGE_LEN];
        for _ in 0..10 {
            slab.remove(churned.index);
            let refill = slab.insert(0, 0, 0).unwrap();
            assert_eq!(refill.index, churned.index);
            churned = refill;
        }
        let old: Vec<Key> = keys[PAGE_LEN..2 * PAGE_LEN].iter().copied().chain([churned]).collect();
        for key in &old {
            slab.remove(key.index);
        }
        slab.shrink_to_fit();
        assert_eq!(slab.capacity(), PAGE_LEN);
        let new = fill(&mut slab, 2 * PAGE_LEN);
        for key in &old {
            assert!(slab.live(*key).is_none(), "{key:?} aliases a new entry");
        }
        assert!(new.iter().all(|key| slab.live(*key).is_some()));
    }

    #[test]
    fn reserved_pages_stay_until_shrink_to_fit() {
        let mut slab = Slab::with_capacity(3 * PAGE_LEN);
        let key = slab.insert(0, 0, 0u64).unwrap();
        slab.remove(key.index);
        assert_eq!(slab.capacity(), 3 * PAGE_LEN);
        slab.shrink_to_fit();
        assert_eq!(slab.capacity(), 0);
    }
}
