//! The entries one slot's walk finds due, put in insertion order before
//! they join the expired list.
//!
//! A slot's walk meets its entries in rounds over the sublists
//! (`Wheel::process_slot`), which is not the order they were inserted in,
//! while entries due at the same tick must come out in that order. So a
//! batch is gathered on the stack, sorted there if the rounds met it out of
//! order, and only then linked: the list is written once, in order, and the
//! sort is of plain words. Past [`GATHERED_MAX`] entries (a storm), the batch
//! is linked as it comes and, if it came out of order, sorted in place once
//! it is complete. A storm of entries stored at consecutive indices from a
//! multiple of [`SUBLISTS`](super::lists::SUBLISTS) (one inserted into a fresh
//! wheel) comes out of the rounds in order and is never sorted.

use super::lists::{EXPIRED, EXPIRED_LIST};
use super::slab::NIL;
use super::Wheel;

/// The most entries a batch gathers, and sorts, on the stack: more than a
/// tick's worth in most uses (a million timers spread over a minute expire
/// about 17 a tick).
pub(super) const GATHERED_MAX: usize = 64;

/// A sequence number in a gathered word is counted from this far below the
/// batch's first, so that the word holds any within 2^31 of it either way.
const SEQ_OFFSET: u64 = 1 << 31;

/// The due entries of one slot's walk, in the order the rounds met them.
///
/// Each is gathered as one word: its sequence number, counted from the
/// batch's base, in the high half, and its index in the low one, so that
/// sorting the words sorts the batch by insertion order. A batch whose
/// sequence numbers do not all fit there (entries inserted billions of
/// insertions apart and due at one tick) is sorted by reading them again.
pub(super) struct Batch {
    gathered: [u64; GATHERED_MAX],
    len: usize,
    last_seq: u64,
    in_order: bool,
    /// What the sequence numbers in `gathered` are counted from.
    base: u64,
    /// A sequence number did not fit in its word's high half.
    wide: bool,
    /// The expired list's tail before the batch: where a spilled batch starts.
    before: u32,
    /// Past [`GATHERED_MAX`]: every entry so far is linked.
    spilled: bool,
}

impl Batch {
    /// An empty batch, to follow the expired list's current tail.
    #[inline]
    pub(super) fn new<T>(wheel: &Wheel<T>) -> Batch {
        Batch {
            gathered: [0; GATHERED_MAX],
            len: 0,
            last_seq: 0,
            in_order: true,
            base: 0,
            wide: false,
            before: wheel.lists.tail[EXPIRED_LIST],
            spilled: false,
        }
    }

    /// The entry at `index`, inserted as number `seq`, is due.
    #[inline]
    pub(super) fn add<T>(&mut self, wheel: &mut Wheel<T>, seq: u64, index: u32) {
        if self.len == 0 {
            self.base = seq.wrapping_sub(SEQ_OFFSET);
        }
        self.in_order &= self.len == 0 || seq > self.last_seq;
        self.last_seq = seq;
        if self.len < GATHERED_MAX {
            let counted = seq.wrapping_sub(self.base);
            self.wide |= counted >> 32 != 0;
            self.gathered[self.len] = counted << 32 | u64::from(index);
        } else {
            if !self.spilled {
                self.spilled = true;
                for &word in &self.gathered {
                    wheel.push_back(EXPIRED, word as u32);
                }
            }
            wheel.push_back(EXPIRED, index);
        }
        self.len += 1;
    }

    /// Links the batch onto the expired list in insertion order.
    #[inline]
    pub(super) fn finish<T>(mut self, wheel: &mut Wheel<T>) {
        if self.spilled {
            if !self.in_order {
                wheel.sort_spilled(self.before, self.len);
            }
            return;
        }
        let gathered = &mut self.gathered[..self.len];
        if !self.in_order {
            if self.wide {
                gathered.sort_unstable_by_key(|&word| wheel.slab.entry(word as u32).seq);
            } else {
                gathered.sort_unstable();
            }
        }
        for &word in gathered.iter() {
            wheel.push_back(EXPIRED, word as u32);
        }
    }
}

impl<T> Wheel<T> {
    /// Restores insertion order in the last `len` expired entries, which
    /// follow `before` (or start the list): a spilled batch that the rounds
    /// met out of order.
    #[cold]
    #[inline(never)]
    fn sort_spilled(&mut self, before: u32, len: usize) {
        let mut batch = Vec::with_capacity(len);
        let mut index = if before == NIL { self.lists.head[EXPIRED_LIST] } else { self.slab.entry(before).next };
        while index != NIL {
            let entry = self.slab.entry(index);
            batch.push((entry.seq, index));
            index = entry.next;
        }
        debug_assert_eq!(batch.len(), len, "the batch is the end of the expired list");
        batch.sort_unstable();
        let mut prev = before;
        for &(_, index) in &batch {
            self.slab.entry_mut(index).prev = prev;
            if prev == NIL {
                self.lists.head[EXPIRED_LIST] = index;
            } else {
                self.slab.entry_mut(prev).next = index;
            }
            prev = index;
        }
        self.slab.entry_mut(prev).next = NIL;
        self.lists.tail[EXPIRED_LIST] = prev;
    }
}
