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

/// `Slab::insert_page` when no page has room.
const NO_PAGE: usize = usize::MAX;

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

/// What a slab knows of one page, kept together so that an insert or a
/// remove touches one small record besides the entry.
#[derive(Debug, Clone, Copy)]
struct PageBook {
    /// The head of the page's list of vacant slots, linked through
    /// `Entry::next`; [`NIL`] when the page is full.
    free_head: u32,
    /// Entries the page holds.
    live: u32,
    /// The highest generation any slot of the page has had: a page made again
    /// starts above it. Kept as slots are vacated, so giving a page back does
    /// not read its 4096 entries.
    generation_max: u32,
}

#[derive(Debug)]
pub(crate) struct Slab<T> {
    /// 4096 entries a page: 128 KiB pages for a 32-byte entry.
    pages: Pages<Entry<T>>,
    /// Per page: its free list and how many entries it holds.
    books: Vec<PageBook>,
    /// Bit `p % 64` of word `p / 64`: page `p` has a vacant slot.
    vacant_pages: Vec<u64>,
    /// No word of `vacant_pages` before this one has a bit set.
    first_vacant_word: usize,
    /// The lowest page with a vacant slot, or [`NO_PAGE`] if none has one:
    /// the insert path reads no bitmap.
    insert_page: usize,
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
            books: Vec::new(),
            vacant_pages: Vec::new(),
            first_vacant_word: 0,
            insert_page: NO_PAGE,
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
            + self.books.capacity() * std::mem::size_of::<PageBook>()
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
        let page = match self.insert_page {
            NO_PAGE if self.pages.len_pages() < MAX_PAGES => self.add_page(),
            NO_PAGE => return Err(value),
            page => page,
        };
        let book = &mut self.books[page];
        let index = book.free_head;
        let entry = &mut self.pages[index];
        debug_assert!(entry.value.is_none() && !is_occupied(entry.generation), "free slot {index} is occupied");
        let next_free = entry.next;
        entry.deadline = deadline;
        entry.seq = seq;
        entry.value = Some(value);
        entry.generation += 1; // odd (vacant) to even (occupied)
        let generation = entry.generation;
        book.free_head = next_free;
        book.live += 1;
        self.len += 1;
        if next_free == NIL {
            self.page_filled(page);
        }
        Ok(Key { index, generation })
    }

    /// Vacates the slot at `index` (which must be live and already unlinked) and
    /// returns its value. An empty top page may be given back.
    #[inline(always)]
    pub(crate) fn remove(&mut self, index: u32) -> T {
        let page = index as usize / PAGE_LEN;
        let book = &mut self.books[page];
        let entry = &mut self.pages[index];
        let value = entry.value.take().expect("removing a vacant wheel entry");
        entry.generation += 1; // even (occupied) to odd (vacant)
        let generation = entry.generation;
        entry.next = book.free_head;
        let was_full = book.free_head == NIL;
        book.free_head = index;
        book.live -= 1;
        book.generation_max = book.generation_max.max(generation);
        let now_empty = book.live == 0;
        self.len -= 1;
        if was_full | now_empty | (generation == RETIRED_GENERATION) {
            self.vacated_rarely(page, index, was_full);
        }
        value
    }

    /// What [`remove`](Slab::remove) leaves for the rare cases: the page was
    /// full (it has room again, and may now be the lowest that has), the slot
    /// retired (it leaves the free list), or the page emptied (it may be given
    /// back).
    #[cold]
    fn vacated_rarely(&mut self, page: usize, index: u32, was_full: bool) {
        let entry = &self.pages[index];
        if entry.generation == RETIRED_GENERATION {
            self.books[page].free_head = entry.next;
        } else if was_full {
            self.vacant_pages[page / 64] |= 1 << (page % 64);
            self.first_vacant_word = self.first_vacant_word.min(page / 64);
            // The lowest page with room had room before: this one is it now
            // only if it is lower.
            self.insert_page = self.insert_page.min(page);
        }
        if self.books[page].live == 0 && page + SPARE_PAGES + 1 >= self.pages.len_pages() {
            self.give_back_empty_top(SPARE_PAGES, self.reserved_pages);
        }
    }

    /// The page an insert took the last vacant slot of: the next insert goes
    /// to the lowest page that still has one.
    #[cold]
    fn page_filled(&mut self, page: usize) {
        self.vacant_pages[page / 64] &= !(1 << (page % 64));
        self.insert_page = self.first_vacant_page().unwrap_or(NO_PAGE);
    }

    /// Gives back every empty top page, and the page table's spare room.
    pub(crate) fn shrink_to_fit(&mut self) {
        self.reserved_pages = 0;
        self.give_back_empty_top(0, 0);
        self.pages.shrink_to_fit();
        self.books.shrink_to_fit();
        self.vacant_pages.shrink_to_fit();
    }

    /// Iterates over the keys of live entries, in storage order.
    pub(crate) fn keys(&self) -> impl Iterator<Item = Key> + '_ {
        self.pages
            .iter()
            .filter(|(_, entry)| entry.value.is_some())
            .map(|(index, entry)| Key { index, generation: entry.generation })
    }

    /// The lowest page with a vacant slot, from the bitmap.
    #[cold]
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
        self.books.push(PageBook { free_head: first, live: 0, generation_max: generation });
        if page.is_multiple_of(64) {
            self.vacant_pages.push(0);
        }
        self.vacant_pages[page / 64] |= 1 << (page % 64);
        self.first_vacant_word = self.first_vacant_word.min(page / 64);
        self.insert_page = self.insert_page.min(page);
        page
    }

    /// Gives back empty top pages until `keep` empty ones are left at the top,
    /// a non-empty page is on top, or `floor` pages are left.
    #[cold]
    fn give_back_empty_top(&mut self, keep: usize, floor: usize) {
        loop {
            let pages = self.pages.len_pages();
            let empty_on_top = self.books.iter().rev().take_while(|book| book.live == 0).take(keep + 1).count();
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
        debug_assert_eq!(self.books[page].live, 0);
        let highest = self.books[page].generation_max;
        debug_assert_eq!(Some(highest), self.pages.page(page).1.iter().map(|entry| entry.generation).max());
        // Made again, the page's slots must start above `highest`, and stay
        // below retirement so an insert can still make them even.
        let Some(fresh) = highest.checked_add(2).filter(|&fresh| fresh < RETIRED_GENERATION) else {
            return false;
        };
        debug_assert!(!is_occupied(fresh));
        self.fresh_generation = self.fresh_generation.max(fresh);
        self.pages.pop_page();
        self.books.pop();
        self.vacant_pages[page / 64] &= !(1 << (page % 64));
        if page.is_multiple_of(64) {
            self.vacant_pages.pop();
        }
        self.reserved_pages = self.reserved_pages.min(page);
        if self.insert_page == page {
            self.insert_page = self.first_vacant_page().unwrap_or(NO_PAGE);
        }
        true
    }

    /// Checks the per-page books against the entries (tests only: it reads
    /// every entry).
    #[cfg(test)]
    pub(crate) fn check(&self) {
        let mut lowest_with_room = NO_PAGE;
        for (page, book) in self.books.iter().enumerate() {
            let (first, entries) = self.pages.page(page);
            let live = entries.iter().filter(|entry| entry.value.is_some()).count();
            assert_eq!(book.live as usize, live, "page {page}");
            let mut free = 0;
            let mut index = book.free_head;
            while index != NIL {
                assert!(index >= first && index < first + PAGE_LEN as u32, "page {page} frees a foreign slot");
                assert!(self.entry(index).value.is_none());
                free += 1;
                index = self.entry(index).next;
            }
            let retired = entries.iter().filter(|entry| entry.generation == RETIRED_GENERATION).count();
            assert_eq!(live + free + retired, PAGE_LEN, "page {page}");
            let has_room = book.free_head != NIL;
            assert_eq!(self.vacant_pages[page / 64] >> (page % 64) & 1 == 1, has_room, "page {page}'s bit");
            if has_room && lowest_with_room == NO_PAGE {
                lowest_with_room = page;
            }
            let highest = entries.iter().map(|entry| entry.generation).max().unwrap();
            assert!(book.generation_max >= highest - u32::from(is_occupied(highest)), "page {page}");
        }
        assert_eq!(self.insert_page, lowest_with_room);
        assert!(self.vacant_pages[..self.first_vacant_word].iter().all(|&word| word == 0));
        assert_eq!(self.books.iter().map(|book| book.live as usize).sum::<usize>(), self.len);
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

    /// Random inserts and removes across many pages, the books checked as
    /// they go.
    #[test]
    fn books_stay_true_under_churn() {
        let mut slab = Slab::new();
        let mut live: Vec<Key> = Vec::new();
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        for round in 0..40 {
            // Grow for a while, then shrink for a while, removing at random.
            let growing = round % 4 < 2;
            for _ in 0..3000 {
                if growing || live.is_empty() || next() % 3 == 0 {
                    live.push(slab.insert(0, 0, 0u64).unwrap());
                } else {
                    let at = next() as usize % live.len();
                    let key = live.swap_remove(at);
                    slab.remove(key.index);
                }
            }
            slab.check();
            if round % 10 == 9 {
                slab.shrink_to_fit();
                slab.check();
            }
        }
        for key in live.drain(..) {
            slab.remove(key.index);
        }
        slab.check();
        assert!(slab.capacity() <= PAGE_LEN);
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
