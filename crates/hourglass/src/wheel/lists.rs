//! The wheel's lists: every slot's sublists and the expired list, threaded
//! through the slab's entries, with what is known of each slot without walking
//! it (its occupancy bit, a lower bound of its deadlines).

use super::level::{split_location, NUM_LEVELS, NUM_SLOTS, SLOTS};
use super::slab::NIL;
use super::Wheel;

/// The location of entries that are due and not yet popped.
pub(super) const EXPIRED: u16 = NUM_SLOTS as u16;

/// Lists per slot. A slot's entries are spread over its sublists by storage
/// index and walked in rounds when the slot is processed, one entry of each
/// sublist read before any is filed, so a cascade follows this many
/// independent pointer chains at once instead of one: at a million timers
/// every step of a chain is a cache miss, and the misses of different chains
/// overlap. Eight measured 7 % faster than four on expiry spread over a
/// minute (BENCHMARKS.md), for 22 KiB more list heads and tails a wheel.
pub(super) const SUBLISTS: usize = 8;
const _: () = assert!(SUBLISTS.is_power_of_two());
/// The expired list: a single one, since it is walked in order.
pub(super) const EXPIRED_LIST: usize = NUM_SLOTS * SUBLISTS;
/// Slot sublists plus the expired list.
pub(super) const NUM_LISTS: usize = EXPIRED_LIST + 1;

/// The list an entry at `index` is in when it is at `location`.
#[inline]
pub(super) fn list_of(location: u16, index: u32) -> usize {
    if location == EXPIRED {
        EXPIRED_LIST
    } else {
        location as usize * SUBLISTS + (index as usize & (SUBLISTS - 1))
    }
}

/// The heads of every list, and what is known about each slot without walking it.
pub(super) struct Lists {
    pub(super) head: [u32; NUM_LISTS],
    pub(super) tail: [u32; NUM_LISTS],
    /// A lower bound of the deadlines in each slot: its earliest deadline
    /// while the slot's witness is there to show it.
    pub(super) min_deadline: [u64; NUM_SLOTS],
    /// The entry that lowered a slot's bound to what it is ([`NIL`] if none).
    /// While that entry is still in the slot and due at the bound, the bound
    /// is the slot's earliest deadline; once it has left or been reset later,
    /// the bound may be loose, and [`Wheel::next_deadline`] walks the slot to
    /// learn it again. Nothing is kept up to date as entries leave: the
    /// witness is checked when the bound is asked for.
    pub(super) min_witness: [u32; NUM_SLOTS],
    /// Bit `s` of word `L`: slot `s` of level `L` is not empty.
    pub(super) occupancy: [u64; NUM_LEVELS],
    /// Bit `L`: level `L` has an occupied slot.
    pub(super) occupied_levels: u32,
}

impl Lists {
    /// Every list empty, every slot vacant.
    pub(super) fn new() -> Box<Lists> {
        Box::new(Lists {
            head: [NIL; NUM_LISTS],
            tail: [NIL; NUM_LISTS],
            min_deadline: [u64::MAX; NUM_SLOTS],
            min_witness: [NIL; NUM_SLOTS],
            occupancy: [0; NUM_LEVELS],
            occupied_levels: 0,
        })
    }
}

impl<T> Wheel<T> {
    #[inline]
    pub(super) fn push_back(&mut self, location: u16, index: u32) {
        let list = list_of(location, index);
        let tail = self.lists.tail[list];
        let entry = self.slab.entry_mut(index);
        entry.prev = tail;
        entry.next = NIL;
        entry.location = location;
        if tail == NIL {
            self.lists.head[list] = index;
        } else {
            self.slab.entry_mut(tail).next = index;
        }
        self.lists.tail[list] = index;
        if location == EXPIRED {
            self.expired_len += 1;
        } else {
            let (level, slot) = split_location(location);
            self.lists.occupancy[level] |= 1 << slot;
            self.lists.occupied_levels |= 1 << level;
        }
    }

    /// Lowers a slot's bound to `deadline`, that of the entry at `index`
    /// (already linked there or about to be), if it is below or at it: the
    /// entry is then its witness.
    #[inline]
    pub(super) fn bound_add(&mut self, location: u16, index: u32, deadline: u64) {
        let slot = location as usize;
        if deadline <= self.lists.min_deadline[slot] {
            self.lists.min_deadline[slot] = deadline;
            self.lists.min_witness[slot] = index;
        }
    }

    #[inline(always)]
    pub(super) fn unlink(&mut self, index: u32) {
        let entry = self.slab.entry(index);
        let (prev, next, location) = (entry.prev, entry.next, entry.location);
        let list = list_of(location, index);
        if prev == NIL {
            self.lists.head[list] = next;
        } else {
            self.slab.entry_mut(prev).next = next;
        }
        if next == NIL {
            self.lists.tail[list] = prev;
        } else {
            self.slab.entry_mut(next).prev = prev;
        }
        if location == EXPIRED {
            self.expired_len -= 1;
        } else if self.lists.head[list] == NIL {
            let base = location as usize * SUBLISTS;
            if self.lists.head[base..base + SUBLISTS].iter().all(|&head| head == NIL) {
                self.vacate(location as usize);
            }
        }
    }

    /// Marks a slot whose lists are all empty as empty.
    #[inline]
    pub(super) fn vacate(&mut self, slot_location: usize) {
        debug_assert!(slot_location < NUM_SLOTS);
        let (level, slot) = (slot_location / SLOTS, slot_location % SLOTS);
        self.lists.occupancy[level] &= !(1 << slot);
        if self.lists.occupancy[level] == 0 {
            self.lists.occupied_levels &= !(1 << level);
        }
        self.lists.min_deadline[slot_location] = u64::MAX;
        self.lists.min_witness[slot_location] = NIL;
    }
}
