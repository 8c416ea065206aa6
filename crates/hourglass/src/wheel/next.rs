//! Looking ahead without advancing: what comes out next, and when.

use super::level::{location, slot_span, slot_start, split_location, NUM_LEVELS};
use super::lists::SUBLISTS;
use super::slab::NIL;
use super::{Key, Wheel};

impl<T> Wheel<T> {
    /// A tick before which nothing will expire: `advance` to an earlier tick
    /// expires nothing. It is the current tick if entries wait to be popped,
    /// `None` if the wheel is empty. It is exact unless entries were removed or
    /// reset later since their slot was filed, in which case it may be early:
    /// advancing to it then re-files those entries and expires nothing.
    /// [`next_deadline`](Wheel::next_deadline) is exact.
    #[inline]
    pub fn next_expiration(&self) -> Option<u64> {
        if self.expired_len > 0 {
            return Some(self.elapsed);
        }
        let (location, start) = self.next_slot()?;
        // The first slot's earliest deadline may lie past the slot itself
        // (entries reset later wait there), where a later slot may hold an
        // earlier one: nothing in a later slot is due within this one.
        let (level, _) = split_location(location);
        let last = start.saturating_add(slot_span(level) - 1);
        Some(start.max(self.lists.min_deadline[location as usize].min(last)))
    }

    /// The earliest deadline of the entries, exactly: the current tick if
    /// entries wait to be popped, `None` if the wheel is empty. `advance` to
    /// it expires something, to any earlier tick nothing.
    ///
    /// Each slot knows its earliest deadline and how many of its entries are
    /// due then, so this is usually [`next_expiration`](Wheel::next_expiration)
    /// read again. Once the last entry due at a slot's earliest deadline has
    /// left it or been reset later while others stay, the slot's bound is
    /// loose, and the first call that needs it walks the slot's entries once
    /// to learn its earliest deadline again (the cost of a
    /// [`peek`](Wheel::peek)); a wait armed on this is never early.
    ///
    /// # Example
    /// ```
    /// use hourglass::Wheel;
    ///
    /// let mut wheel = Wheel::new();
    /// let soon = wheel.insert(100, "soon").unwrap();
    /// let _later = wheel.insert(110, "later").unwrap(); // the same 64-tick slot
    /// wheel.reset(soon, 5_000);
    /// assert_eq!(wheel.next_expiration(), Some(100), "a lower bound");
    /// assert_eq!(wheel.next_deadline(), Some(110), "exact");
    /// assert_eq!(wheel.next_expiration(), Some(110), "exact again");
    /// ```
    pub fn next_deadline(&mut self) -> Option<u64> {
        if self.expired_len > 0 {
            return Some(self.elapsed);
        }
        // Slots in the order they are processed start in increasing order,
        // and hold nothing due before their start.
        let mut best: Option<u64> = None;
        let mut levels = self.lists.occupied_levels;
        while levels != 0 {
            let level = levels.trailing_zeros() as usize;
            levels &= levels - 1;
            let mut occupied = self.lists.occupancy[level];
            while occupied != 0 {
                let slot = occupied.trailing_zeros() as usize;
                occupied &= occupied - 1;
                if best.is_some_and(|best| best <= slot_start(level, slot, self.elapsed)) {
                    return best;
                }
                let location = location(level, slot);
                if self.lists.min_count[location as usize] == 0 {
                    self.tighten(location);
                }
                let min = self.lists.min_deadline[location as usize];
                best = Some(best.map_or(min, |best| best.min(min)));
            }
        }
        best
    }

    /// Walks a slot whose bound is loose to learn its earliest deadline and
    /// how many entries are due then.
    #[cold]
    fn tighten(&mut self, location: u16) {
        let (mut min, mut count) = (u64::MAX, 0u32);
        let base = location as usize * SUBLISTS;
        for list in base..base + SUBLISTS {
            let mut index = self.lists.head[list];
            while index != NIL {
                let entry = self.slab.entry(index);
                if entry.deadline < min {
                    (min, count) = (entry.deadline, 1);
                } else if entry.deadline == min {
                    count += 1;
                }
                index = entry.next;
            }
        }
        self.lists.min_deadline[location as usize] = min;
        self.lists.min_count[location as usize] = count;
    }

    /// The key of the entry that [`pop_expired`](Wheel::pop_expired) will take
    /// next, once the wheel has advanced far enough: the first expired entry if
    /// any wait, else the pending entry with the earliest deadline, ties in
    /// insertion order (a reset counts as an insertion).
    ///
    /// Finds it by walking the first occupied slots until no later slot can
    /// hold an earlier deadline, so it costs the entries of one slot, or a few
    /// where entries were reset later.
    ///
    /// # Example
    /// ```
    /// use hourglass::Wheel;
    ///
    /// let mut wheel = Wheel::new();
    /// let _late = wheel.insert(120, "late").unwrap();
    /// let early = wheel.insert(100, "early").unwrap(); // the same 64-tick slot
    /// assert_eq!(wheel.peek(), Some(early));
    /// wheel.advance(1_000);
    /// assert_eq!(wheel.pop_expired().unwrap().key, early);
    /// ```
    pub fn peek(&self) -> Option<Key> {
        if let Some(key) = self.peek_expired() {
            return Some(key);
        }
        // Slots are processed lowest level first, lowest slot first, and every
        // entry in a slot is due at or after the slot's start: once the best
        // entry found is due before a slot's start, nothing later can beat it.
        let mut best: Option<(u64, u64, u32)> = None;
        'levels: for level in 0..NUM_LEVELS {
            let mut occupied = self.lists.occupancy[level];
            while occupied != 0 {
                let slot = occupied.trailing_zeros() as usize;
                occupied &= occupied - 1;
                let location = location(level, slot);
                if let Some((deadline, _, _)) = best {
                    if deadline < slot_start(level, slot, self.elapsed) {
                        break 'levels;
                    }
                    if self.lists.min_deadline[location as usize] > deadline {
                        continue;
                    }
                }
                for list in 0..SUBLISTS {
                    let mut index = self.lists.head[location as usize * SUBLISTS + list];
                    while index != NIL {
                        let entry = self.slab.entry(index);
                        let candidate = (entry.deadline, entry.seq, index);
                        if best.is_none_or(|best| (candidate.0, candidate.1) < (best.0, best.1)) {
                            best = Some(candidate);
                        }
                        index = entry.next;
                    }
                }
            }
        }
        best.map(|(_, _, index)| Key { index, generation: self.slab.entry(index).generation })
    }

    /// The next slot to process and the tick it starts at.
    #[inline]
    pub(super) fn next_slot(&self) -> Option<(u16, u64)> {
        let levels = self.lists.occupied_levels;
        if levels == 0 {
            return None;
        }
        let level = levels.trailing_zeros() as usize;
        let slot = self.lists.occupancy[level].trailing_zeros() as usize;
        Some((location(level, slot), slot_start(level, slot, self.elapsed)))
    }
}
